import FeedKit
import Foundation
import Testing
import TestSupport

/// What an operator of a fleet sees (SPEC §8, §10): the connection's losses and recoveries in
/// the log, refusals named as such and never with a secret, the cluster in `feedctl status`,
/// and the `feedd_cluster_*` metrics.
@Suite(.serialized, .timeLimit(.minutes(3))) struct FleetOperationsTests {
    static func metrics(_ daemon: DaemonProcess) throws -> String {
        try daemon.connect().request(["op": "metrics"])["text"]?.stringValue ?? ""
    }

    @Test func a_lost_connection_is_a_warning_and_its_return_a_notice_with_the_outage() throws {
        let upstream = try LoopbackUpstream()
        let nats = try NATSServer()
        let daemon = try FleetTests.instance([nats.url], upstream)
        try daemon.log.waitForLine(containing: "connected to the NATS cluster at nats://127.0.0.1:\(nats.port)")
        nats.stop()
        try daemon.log.waitForLine(containing: "lost the connection to the NATS cluster")
        try nats.start()
        let back = try daemon.log.waitForLine(containing: "connected to the NATS cluster again")
        #expect(back.contains("after an outage of "), "\(back)")
        #expect(back.hasPrefix("<5>") || back.contains("notice"), "\(back)")
        try FleetTests.waitForCluster(daemon, "connected")
        let cluster = try #require(try FleetTests.status(daemon)["cluster"])
        #expect(cluster["reconnects"] == 1)
        #expect(cluster["server"] == .string(nats.url))
        #expect(cluster["problem"] == .null)
        let metrics = try Self.metrics(daemon)
        #expect(metrics.contains("feedd_cluster_connected 1\n"))
        #expect(metrics.contains("feedd_cluster_reconnects_total 1\n"))
        nats.stop()
    }

    @Test func a_wrong_password_is_named_an_authentication_failure_and_the_password_is_never_logged() throws {
        let upstream = try LoopbackUpstream()
        let nats = try NATSServer(configuration: #"authorization { user: feedd, password: "right-password" }"#)
        let files = try TemporaryDirectory()
        let wrong = try files.write("password", "wrong-password-1234\n")
        let daemon = try FleetTests.instance(
            ["nats://feedd:url-password-5678@127.0.0.1:\(nats.port)"], upstream, waitUntilJoined: false,
            cluster: "user = \"feedd\"\npassword_file = \"\(wrong)\"")
        let refused = try daemon.log.waitForLine(containing: "refused this instance's credentials")
        #expect(refused.contains("authentication failed"), "\(refused)")
        // Once the log says it, so does status.
        let cluster = try #require(try FleetTests.status(daemon)["cluster"])
        #expect(cluster["state"] == "disconnected")
        #expect(cluster["problem"]?.stringValue?.contains("authentication failed") == true)
        // Feeds are still served, alone.
        let client = try daemon.connect()
        try client.send("next users 1")
        try client.expect("subscribed")
        #expect(try client.expect("page")["page"] == 1)
        #expect(!daemon.log.text.contains("wrong-password-1234"))
        #expect(!daemon.log.text.contains("url-password-5678"))
    }

    @Test func feedctl_status_has_a_cluster_line_and_the_metrics_the_cluster_families() throws {
        let upstream = try LoopbackUpstream()
        let nats = try NATSServer()
        let daemon = try FleetTests.instance([nats.url], upstream)
        let client = try daemon.connect()
        try client.send("next users 2")
        _ = try (client.expect("subscribed"), client.expect("page"), client.expect("page"))
        let status = try ChildProcess.run(FeeddBinaries.feedctl, ["--socket", daemon.socketPath, "status"])
        #expect(status.status == 0)
        let clusterLine = status.output.split(separator: "\n").first { $0.hasPrefix("cluster ") }
        #expect(clusterLine == "cluster test: connected to \(nats.url), 0 reconnects, 0 rejected; joined: users")

        let metrics = try Self.metrics(daemon)
        for line in [
            "feedd_cluster_connected 1", "feedd_cluster_reconnects_total 0", #"feedd_cluster_rejected_total{reason="page"} 0"#,
            #"feedd_cluster_rejected_total{reason="mac"} 0"#, "feedd_cluster_refused_publications_total 0",
            "feedd_cluster_publish_duration_seconds_count 2", "feedd_cluster_lease_duration_seconds_count 2",
        ] {
            #expect(metrics.contains("\n\(line)\n"), "\(line)")
        }
        #expect(try MetricsTests.promtoolProblems(metrics) == "")
        nats.stop()
    }

    @Test func a_full_jetstream_is_named_full_in_the_log_and_status() throws {
        let upstream = try LoopbackUpstream()
        // An account whose JetStream may store 4 KiB: the pages stream fills at once.
        let nats = try NATSServer(configuration: """
            accounts { FEEDD { jetstream { max_file: 4096, max_mem: 4096 }, users: [ { user: feedd, password: small } ] } }
            """)
        let files = try TemporaryDirectory()
        let daemon = try FleetTests.instance(
            [nats.url], upstream, cluster: "user = \"feedd\"\npassword_file = \"\(try files.write("password", "small"))\"",
            feeds: """
                [feeds.users]
                source = "randomuser"
                url = "\(upstream.baseURL)/api/"
                results = 20
                prefetch = 0
                """)
        let client = try daemon.connect()
        try client.send("next users 3")
        try client.expect("subscribed")
        // Pages are still served; the fleet cannot keep them.
        #expect(try JSONValue.pageNumbers([client.expect("page"), client.expect("page"), client.expect("page")]) == [1, 2, 3])
        let warning = try daemon.log.waitForLine(containing: "not published to the fleet")
        #expect(warning.contains("JetStream is full"), "\(warning)")
        #expect(try FleetTests.status(daemon)["cluster"]?["problem"]?.stringValue?.contains("JetStream is full") == true)
        nats.stop()
    }
}
