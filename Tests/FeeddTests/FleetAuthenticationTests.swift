import FeedCluster
import FeedKit
import Foundation
import Testing
import TestSupport

/// Each `[cluster]` authentication key, end to end: a daemon joins a fleet whose nats-server
/// requires that kind, and a daemon whose secret is wrong serves alone and says why.
@Suite(.serialized, .timeLimit(.minutes(3))) struct FleetAuthenticationTests {
    /// A nats-server's configuration, the URL to reach it, and `[cluster]` keys that get in.
    struct Requirement {
        let server: String
        let url: (Int) -> String
        let keys: String
    }

    static func requirements(_ files: TemporaryDirectory, _ certificates: TestCertificates) throws -> [Requirement] {
        let user = NKey.generate(.user)
        let operatorMode = OperatorMode()
        let plain = { (port: Int) in "nats://127.0.0.1:\(port)" }
        return [
            Requirement(server: #"authorization { token: "a-token" }"#, url: plain, keys: "token_file = \"\(try files.write("token", "a-token\n"))\""),
            Requirement(
                server: "authorization { users: [ { nkey: \(user.publicKey) } ] }", url: plain,
                keys: "nkey_seed_file = \"\(try files.write("user.nk", user.seedText))\""),
            Requirement(
                server: operatorMode.serverConfiguration, url: plain, keys: "creds_file = \"\(try files.write("feedd.creds", operatorMode.credentials))\""),
            Requirement(
                server: """
                    tls {
                      cert_file: "\(certificates.serverCertificate)", key_file: "\(certificates.serverKey)"
                      ca_file: "\(certificates.authority)", verify: true
                    }
                    """,
                url: { "tls://127.0.0.1:\($0)" },
                keys: """
                    tls_ca = "\(certificates.authority)"
                    tls_cert = "\(certificates.clientCertificate)"
                    tls_key = "\(certificates.clientKey)"
                    """),
        ]
    }

    @Test func a_daemon_joins_a_fleet_whose_server_requires_each_kind_of_authentication() throws {
        let files = try TemporaryDirectory()
        let certificates = try TestCertificates()
        let upstream = try LoopbackUpstream()
        for requirement in try Self.requirements(files, certificates) {
            let nats = try NATSServer(configuration: requirement.server)
            defer { nats.stop() }
            let daemon = try FleetTests.instance([requirement.url(nats.port)], upstream, cluster: requirement.keys)
            try FleetTests.waitForCluster(daemon, "connected")
            let client = try daemon.connect()
            #expect(try client.request(["op": "subscribe", "feed": "users", "consumer": "app"])["type"] == "subscribed", "\(requirement.keys)")
        }
    }

    @Test func a_client_certificate_the_server_does_not_trust_is_named_a_tls_failure() throws {
        let certificates = try TestCertificates()
        let upstream = try LoopbackUpstream()
        let nats = try NATSServer(configuration: """
            tls { cert_file: "\(certificates.serverCertificate)", key_file: "\(certificates.serverKey)", ca_file: "\(certificates.authority)", verify: true }
            """)
        defer { nats.stop() }
        let daemon = try FleetTests.instance(
            ["tls://127.0.0.1:\(nats.port)"], upstream, waitUntilJoined: false,
            cluster: "tls_ca = \"\(certificates.authority)\"\ntls_cert = \"\(certificates.strangerCertificate)\"\ntls_key = \"\(certificates.strangerKey)\"")
        let line = try daemon.log.waitForLine(containing: "TLS with the NATS cluster failed")
        #expect(line.contains("TLS failed"), "\(line)")
        #expect(try FleetTests.status(daemon)["cluster"]?["problem"]?.stringValue?.contains("TLS failed") == true)
    }

    @Test func a_secret_file_that_cannot_be_read_leaves_the_daemon_serving_alone_and_says_which() throws {
        let upstream = try LoopbackUpstream()
        let nats = try NATSServer()
        defer { nats.stop() }
        let daemon = try FleetTests.instance(
            [nats.url], upstream, waitUntilJoined: false, cluster: "user = \"feedd\"\npassword_file = \"/nonexistent/nats-password\"")
        let line = try daemon.log.waitForLine(containing: "cannot join the fleet")
        #expect(line.contains("/nonexistent/nats-password") && line.contains("No such file"), "\(line)")
        let client = try daemon.connect()
        try client.send("next users 1")
        try client.expect("subscribed")
        #expect(try client.expect("page")["page"] == 1)
    }
}
