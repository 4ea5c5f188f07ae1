import FeedCluster
import FeedKit
import Foundation
import TestSupport
import Testing

/// Every way NATS authenticates a client, each against a real nats-server that requires it; and
/// each refusal named as what it is, never as "not reachable", with no secret in any message.
@Suite(.serialized, .timeLimit(.minutes(2)))
struct ClusterAuthenticationTests {
    let files: TemporaryDirectory

    init() throws {
        files = try TemporaryDirectory()
    }

    func configuration(_ server: NATSServer, url: String? = nil, _ configure: (inout ClusterStore.Configuration) throws -> Void = { _ in })
        rethrows -> ClusterStore.Configuration
    {
        var configuration = ClusterStore.Configuration(servers: [url ?? server.url], name: "test", replicas: 1, lease: .seconds(10), instance: "auth")
        configuration.requestTimeout = .seconds(1)
        try configure(&configuration)
        return configuration
    }

    /// Connects with `configuration` and shows the store works: it can write and read a cursor.
    func expectWorks(_ configuration: ClusterStore.Configuration) async throws {
        let store = try await ClusterStore.connect(configuration, logger: testLogger)
        try await waitForState(.connected, of: store)
        let position = CursorPosition(generation: 1, page: 0)
        _ = try await retryingWhileUnavailable { try await store.advanceCursor(feed: "users", consumer: "app", to: position) }
        #expect(try await store.cursor(feed: "users", consumer: "app") == position)
        await store.close()
    }

    /// Connects with `configuration` and returns why its first attempt failed.
    func firstFailure(_ configuration: ClusterStore.Configuration) async throws -> NATSError {
        let store = try await ClusterStore.connect(configuration, logger: testLogger)
        defer { Task { await store.close() } }
        #expect(store.state == .disconnected)
        let report = try await next(of: store.client.reports(), "the first attempt's failure") {
            if case .attemptFailed = $0 { true } else { false }
        }
        guard case .attemptFailed(let error) = report else { throw TestFailure("no failure reported") }
        return error
    }

    @Test func a_user_with_the_password_in_a_file_is_let_in_and_a_wrong_one_is_named_an_authentication_failure() async throws {
        let server = try NATSServer(configuration: #"authorization { user: feedd, password: "pass-word-42" }"#)
        try await expectWorks(configuration(server) { $0.authentication = .password(user: "feedd", passwordFile: try files.write("password", "pass-word-42\n")) })

        let wrong = try files.write("wrong", "not-the-password")
        let refused = try await firstFailure(configuration(server) { $0.authentication = .password(user: "feedd", passwordFile: wrong) })
        #expect(refused.code == .authentication, "\(refused)")
        #expect(!"\(refused)".contains("not-the-password"))

        // A password in a URL works too, and never appears in a message about it.
        let inURL = try await firstFailure(configuration(server, url: "nats://feedd:url-secret@127.0.0.1:\(server.port)"))
        #expect(inURL.code == .authentication)
        #expect(!"\(inURL)".contains("url-secret"), "\(inURL)")
        #expect(NATSClient.redacted("nats://feedd:url-secret@127.0.0.1:4222") == "nats://127.0.0.1:4222")
    }

    @Test func a_token_in_a_file_is_let_in_and_a_wrong_one_refused() async throws {
        let server = try NATSServer(configuration: #"authorization { token: "token-7d1b" }"#)
        try await expectWorks(configuration(server) { $0.authentication = .token(file: try files.write("token", "token-7d1b\n")) })
        let refused = try await firstFailure(configuration(server) { $0.authentication = .token(file: try files.write("bad-token", "token-0000")) })
        #expect(refused.code == .authentication)
        #expect(!"\(refused)".contains("token-0000"))
    }

    @Test func an_nkey_seed_file_is_let_in_by_its_public_key_and_another_seed_refused() async throws {
        let user = NKey.generate(.user)
        let server = try NATSServer(configuration: "authorization { users: [ { nkey: \(user.publicKey) } ] }")
        try await expectWorks(configuration(server) { $0.authentication = .nkeySeed(file: try files.write("user.nk", user.seedText + "\n")) })
        let stranger = try files.write("stranger.nk", NKey.generate(.user).seedText)
        let refused = try await firstFailure(configuration(server) { $0.authentication = .nkeySeed(file: stranger) })
        #expect(refused.code == .authentication)
    }

    @Test func an_nkey_seed_file_without_a_user_seed_is_an_error_at_once() async throws {
        let server = try NATSServer()
        let notASeed = try files.write("account.nk", NKey.generate(.account).seedText)
        await #expect(throws: NATSError.self) {
            _ = try await ClusterStore.connect(configuration(server) { $0.authentication = .nkeySeed(file: notASeed) }, logger: testLogger)
        }
    }

    @Test func the_public_key_of_a_seed_is_the_one_nats_tools_derive() throws {
        // From nats-server's own tests (config_check_test.go): a seed and its public key.
        let seed = try #require(NKey(seedText: "SUAEL6RU3BSDAFKOHNTEOK5Q6FTM5FTAMWVIKBET6FHPO4JRII3CYELVNM"))
        #expect(seed.role == .user)
        #expect(seed.publicKey == "UCARKS2E3KVB7YORL2DG34XLT7PUCOL2SVM7YXV6ETHLW6Z46UUJ2VZ3")
        #expect(NKey(seedText: seed.seedText)?.publicKey == seed.publicKey)
        // One character changed: the checksum no longer matches.
        #expect(NKey(seedText: "SUAEL6RU3BSDAFKOHNTEOK5Q6FTM5FTAMWVIKBET6FHPO4JRII3CYELVNM".replacingOccurrences(of: "BSDAF", with: "BSDAG")) == nil)
    }

    @Test func a_credentials_file_is_let_in_by_an_operator_and_one_of_an_unknown_account_refused() async throws {
        let operatorMode = OperatorMode()
        let server = try NATSServer(configuration: operatorMode.serverConfiguration)
        try await expectWorks(configuration(server) { $0.authentication = .credentials(file: try files.write("feedd.creds", operatorMode.credentials)) })
        let stranger = try files.write("stranger.creds", operatorMode.strangerCredentials)
        let refused = try await firstFailure(configuration(server) { $0.authentication = .credentials(file: stranger) })
        #expect(refused.code == .authentication, "\(refused)")
    }

    @Test func tls_with_a_trusted_authority_works_and_an_untrusted_certificate_is_named_a_tls_failure() async throws {
        let certificates = try TestCertificates()
        let server = try NATSServer(configuration: """
            tls { cert_file: "\(certificates.serverCertificate)", key_file: "\(certificates.serverKey)" }
            """)
        let url = "tls://127.0.0.1:\(server.port)"
        try await expectWorks(configuration(server, url: url) { $0.tls.trustedCertificates = certificates.authority })
        let untrusted = try await firstFailure(configuration(server, url: url) { $0.tls.trustedCertificates = certificates.strangerAuthority })
        #expect(untrusted.code == .tls, "\(untrusted)")
        // A plain-text client at a server that demands TLS.
        let plain = try await firstFailure(configuration(server))
        #expect(plain.code == .tls, "\(plain)")
    }

    @Test func a_server_that_verifies_clients_lets_in_a_client_certificate_it_trusts_and_no_other() async throws {
        let certificates = try TestCertificates()
        let server = try NATSServer(configuration: """
            tls {
              cert_file: "\(certificates.serverCertificate)", key_file: "\(certificates.serverKey)"
              ca_file: "\(certificates.authority)", verify: true
            }
            """)
        let url = "tls://127.0.0.1:\(server.port)"
        try await expectWorks(configuration(server, url: url) {
            $0.tls = NATSClient.TLSFiles(trustedCertificates: certificates.authority, certificate: certificates.clientCertificate, privateKey: certificates.clientKey)
        })
        let without = try await firstFailure(configuration(server, url: url) { $0.tls.trustedCertificates = certificates.authority })
        #expect(without.code == .tls, "\(without)")
        let stranger = try await firstFailure(configuration(server, url: url) {
            $0.tls = NATSClient.TLSFiles(trustedCertificates: certificates.authority, certificate: certificates.strangerCertificate, privateKey: certificates.strangerKey)
        })
        #expect(stranger.code == .tls, "\(stranger)")
    }

    @Test func an_unreachable_cluster_is_named_unreachable_and_a_refused_one_keeps_being_tried() async throws {
        let port = try NATSServer.freePort()
        var unreachable = ClusterStore.Configuration(servers: ["nats://127.0.0.1:\(port)"], name: "test", replicas: 1, lease: .seconds(10), instance: "auth")
        unreachable.requestTimeout = .seconds(1)
        #expect(try await firstFailure(unreachable).code == .unavailable)

        // Refused at first, the store keeps trying, and gets in once the server lets it.
        let passwordFile = try files.write("password", "later-pw")
        let refusing = try NATSServer(port: port, configuration: #"authorization { user: feedd, password: "other-pw" }"#)
        var configuration = unreachable
        configuration.authentication = .password(user: "feedd", passwordFile: passwordFile)
        let store = try await ClusterStore.connect(configuration, logger: testLogger)
        #expect(store.state == .disconnected)
        refusing.stop()
        let admitting = try NATSServer(port: port, configuration: #"authorization { user: feedd, password: "later-pw" }"#)
        try await waitForState(.connected, of: store)
        await store.close()
        admitting.stop()
    }
}
