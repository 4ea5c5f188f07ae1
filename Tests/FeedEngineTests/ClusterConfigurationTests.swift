import FeedKit
import FileAdapter
import Testing

@testable import FeedEngine

/// The `[cluster]` table and the `shared` feed key (SPEC §8).
@Suite struct ClusterConfigurationTests {
    let loader = ConfigurationLoader(registry: AdapterRegistry([FileSource.self, NumberedPages.self]), logger: Logger(sink: NoLog()), transport: CurlTransport())

    func load(_ text: String) throws(ConfigError) -> Configuration {
        try loader.load(text: text, named: "test.toml", dropInDirectory: nil)
    }

    /// The problems `text` is rejected with, as `FILE:LINE:COL: message`.
    func problems(_ text: String) -> [String] {
        do {
            _ = try load(text)
            return []
        } catch {
            return error.problems.map(\.description)
        }
    }

    @Test func without_a_cluster_table_the_daemon_runs_alone() throws {
        #expect(try load("").cluster == nil)
    }

    @Test func the_cluster_table_is_read_with_its_defaults() throws {
        let minimal = try #require(try load("[cluster]\nnats = [\"nats://127.0.0.1:4222\"]\n").cluster)
        #expect(minimal == ClusterSettings(servers: ["nats://127.0.0.1:4222"]))
        #expect(minimal.name == "feedd" && minimal.replicas == 1 && minimal.lease == .seconds(10))
        #expect(minimal.authentication == .none && minimal.trustedCertificatesFile == nil && minimal.keyFile == nil)

        let full = try #require(
            try load("""
                [cluster]
                nats = ["nats://nats-1.internal:4222", "tls://user:secret@nats-2.internal"]
                name = "prod"
                replicas = 3
                lease = "2s"
                creds = "/etc/feedd/nats.creds"
                tls_ca = "/etc/feedd/ca.pem"
                """
            ).cluster)
        #expect(full.servers == ["nats://nats-1.internal:4222", "tls://user:secret@nats-2.internal"])
        #expect(full.name == "prod" && full.replicas == 3 && full.lease == .seconds(2))
        #expect(full.authentication == .credentials(file: "/etc/feedd/nats.creds") && full.trustedCertificatesFile == "/etc/feedd/ca.pem")
    }

    @Test func the_nats_list_is_required_and_every_url_must_be_nats_or_tls() {
        #expect(problems("[daemon]\nprefetch = 1\n[cluster]\nname = \"prod\"\n") == ["test.toml:3:2: cluster.nats: is required"])
        #expect(problems("[cluster]\nnats = []\n") == ["test.toml:2:1: cluster.nats: needs at least one server URL"])
        #expect(problems("[cluster]\nnats = \"nats://a:4222\"\n") == ["test.toml:2:1: cluster.nats: expected an array of strings, got a string"])
        for bad in ["http://a:4222", "nats://", "a:4222", "nats://a:99999", "nats://a:4222/path"] {
            #expect(
                problems("[cluster]\nnats = [\"nats://ok:4222\", \"\(bad)\"]\n")
                    == ["test.toml:2:1: cluster.nats: \"\(bad)\" is not a nats:// or tls:// URL with a host (such as \"nats://nats-1.internal:4222\")"])
        }
    }

    @Test func replicas_name_lease_and_unknown_keys_are_checked_where_they_are_written() {
        let found = problems("""
            [cluster]
            nats = ["nats://127.0.0.1:4222"]
            replicas = 0
            name = "Prod.East"
            lease = "0s"
            leases = "1s"
            """)
        #expect(Set(found) == [
            "test.toml:3:1: cluster.replicas: must be from 1 to 5, got 0",
            "test.toml:4:1: cluster.name: \"Prod.East\" must match [a-z0-9][a-z0-9_-]{0,63}",
            "test.toml:5:1: cluster.lease: must be longer than zero",
            "test.toml:6:1: cluster.leases: unknown key; did you mean \"lease\"?",
        ])
        #expect(problems("cluster = 3\n") == ["test.toml:1:1: cluster: expected a table"])
    }

    @Test func feeds_are_shared_by_default_except_files() throws {
        let configuration = try load("""
            [feeds.local]
            source = "file"
            path = "/a"
            [feeds.remote]
            source = "scripted"
            [feeds.private]
            source = "scripted"
            shared = false
            [feeds.everywhere]
            source = "file"
            path = "/mounted/everywhere"
            shared = true
            """)
        let shared = Dictionary(uniqueKeysWithValues: configuration.feeds.map { ($0.settings.name, $0.settings.shared) })
        #expect(shared == ["local": false, "remote": true, "private": false, "everywhere": true])
        #expect(configuration.feeds.allSatisfy { $0.settings.options["shared"] == nil })
        #expect(problems("[feeds.a]\nsource = \"file\"\npath = \"/a\"\nshared = \"yes\"\n") == ["test.toml:4:1: feeds.a.shared: expected a boolean, got a string"])
    }

    @Test func each_way_of_authenticating_is_read_and_only_one_may_be_given() throws {
        let base = "[cluster]\nnats = [\"tls://127.0.0.1:4222\"]\n"
        func authentication(_ keys: String) throws -> ClusterSettings.Authentication? { try load(base + keys).cluster?.authentication }
        #expect(try authentication("user = \"feedd\"\npassword_file = \"/p\"\n") == .password(user: "feedd", passwordFile: "/p"))
        #expect(try authentication("token_file = \"/t\"\n") == .token(file: "/t"))
        #expect(try authentication("nkey_seed_file = \"/n\"\n") == .nkeySeed(file: "/n"))
        #expect(try authentication("creds_file = \"/c\"\n") == .credentials(file: "/c"))
        #expect(try authentication("creds = \"/old\"\n") == .credentials(file: "/old"))
        let full = try #require(try load(base + "tls_ca = \"/ca\"\ntls_cert = \"/cert\"\ntls_key = \"/key\"\nkey_file = \"/fleet.key\"\n").cluster)
        #expect(full.trustedCertificatesFile == "/ca" && full.certificateFile == "/cert" && full.privateKeyFile == "/key" && full.keyFile == "/fleet.key")

        #expect(problems(base + "user = \"feedd\"\n") == ["test.toml:3:1: cluster.user: needs password_file (the file holding its password)"])
        #expect(problems(base + "password_file = \"/p\"\n") == ["test.toml:3:1: cluster.password_file: needs user (whose password it holds)"])
        #expect(
            problems(base + "token_file = \"/t\"\nnkey_seed_file = \"/n\"\n")
                == ["test.toml:4:1: cluster.nkey_seed_file: only one way of authenticating may be given: token_file, nkey_seed_file are"])
        // A URL that is not right is shown without the password it carries.
        #expect(
            problems("[cluster]\nnats = [\"nats://feedd:hunter2@a:99999\"]\n")
                == ["test.toml:2:1: cluster.nats: \"nats://a:99999\" is not a nats:// or tls:// URL with a host (such as \"nats://nats-1.internal:4222\")"])
        #expect(problems(base + "tls_cert = \"/cert\"\n") == ["test.toml:3:1: cluster.tls_cert: tls_cert and tls_key go together (a client certificate and its key)"])
    }
}
