import FeedKit
import Foundation
import Testing
import TestSupport

/// The metrics of SPEC §10 from a real daemon, checked by Prometheus's own `promtool`.
@Suite struct MetricsTests {
    /// promtool comes from Debian's `prometheus` package (in .ci/apt-packages); without it this fails, never skips.
    static let promtool = "/usr/bin/promtool"

    /// Runs `promtool check metrics` on `text`; returns what it said, empty when it found nothing wrong.
    static func promtoolProblems(_ text: String) throws -> String {
        guard FileManager.default.isExecutableFile(atPath: promtool) else {
            throw TestFailure("\(promtool) is missing: apt-get install prometheus (see .ci/apt-packages)")
        }
        let directory = try TemporaryDirectory()
        let file = try directory.write("metrics.txt", text)
        let result = try ChildProcess.run("/bin/sh", ["-c", "\(promtool) check metrics < \"$1\"", "sh", file])
        return result.status == 0 ? "" : "exit \(result.status): \(result.output)\(result.errors)"
    }

    @Test func the_metrics_op_answers_openmetrics_text_that_promtool_accepts() throws {
        let daemon = try ProtocolTests.numbersFeed(lines: 25, pageSize: 10)
        let client = try daemon.connect()
        try client.send(["op": "next", "feed": "numbers", "count": 2])
        _ = try client.read(until: "page")
        _ = try client.read(until: "page")
        let reply = try client.request(["op": "metrics", "id": 7])
        #expect(reply["type"] == "metrics")
        #expect(reply["id"] == 7)
        let text = try #require(reply["text"]?.stringValue)
        #expect(text.hasSuffix("# EOF\n"))
        let lines = text.split(separator: "\n")
        #expect(lines.contains(#"feedd_feed_pages_delivered_total{feed="numbers"} 2"#))
        #expect(lines.contains(#"feedd_feed_subscribers{feed="numbers"} 1"#))
        #expect(lines.contains("feedd_clients 1"))
        #expect(lines.contains { $0.hasPrefix(#"feedd_feed_upstream_request_duration_seconds_count{feed="numbers"} "#) })
        #expect(try Self.promtoolProblems(text) == "")
    }

    @Test func upstream_errors_are_counted() throws {
        let daemon = try ProtocolTests.numbersFeed()
        try FileManager.default.removeItem(atPath: daemon.directory.path("numbers.ndjson"))
        let client = try daemon.connect()
        try client.send("next numbers")
        _ = try client.read(until: "error")
        let text = try #require(try client.request("metrics")["text"]?.stringValue)
        #expect(text.contains(#"feedd_feed_upstream_errors_total{feed="numbers"} 1"#))
        #expect(try Self.promtoolProblems(text) == "")
    }

    @Test func feedctl_metrics_prints_the_same_text() throws {
        let daemon = try ProtocolTests.numbersFeed()
        let result = try ChildProcess.run(FeeddBinaries.feedctl, ["--socket", daemon.socketPath, "metrics"], environment: ["PATH": "/usr/bin:/bin"])
        #expect(result.status == 0)
        #expect(result.output.hasPrefix("# TYPE feedd_clients gauge\n"))
        #expect(result.output.hasSuffix("\n# EOF\n"))
        #expect(try Self.promtoolProblems(result.output) == "")
    }

    @Test func metrics_file_holds_the_text_and_no_temporary_file_is_left() throws {
        let directory = try TemporaryDirectory()
        let path = directory.path("feedd.prom")
        let daemon = try ProtocolTests.numbersFeed(extraDaemon: #"metrics_file = "\#(path)""#)
        let deadline = ContinuousClock.now + .seconds(10)
        while !FileManager.default.fileExists(atPath: path) {
            guard ContinuousClock.now < deadline, daemon.isRunning else { throw TestFailure("no \(path) within 10 s") }
            Thread.sleep(forTimeInterval: 0.02)
        }
        let text = try String(contentsOfFile: path, encoding: .utf8)
        #expect(text.hasSuffix("# EOF\n"))
        #expect(text.contains(#"feedd_feed_cached_pages{feed="numbers"} "#))
        #expect(!FileManager.default.fileExists(atPath: path + ".tmp"))
        let mode = try FileManager.default.attributesOfItem(atPath: path)[.posixPermissions] as? Int
        #expect(mode == 0o644, "node_exporter, another user, must be able to read it")
        #expect(try Self.promtoolProblems(text) == "")
    }

    @Test func upstream_requests_counts_http_requests_and_fetches_counts_adapter_calls() throws {
        let upstream = try LoopbackUpstream()
        AggregatorAdapterTests.serve(upstream, [
            ("a", "Sun, 01 Nov 2026 10:00:00 GMT"), ("b", "Mon, 02 Nov 2026 10:00:00 GMT"), ("c", "Tue, 03 Nov 2026 10:00:00 GMT"),
        ], entityTag: "\"1\"")
        let daemon = try DaemonProcess(config: """
            [feeds.news]
            source = "rss"
            url = "\(upstream.baseURL)/feed.xml"
            page_size = 1
            prefetch = 0
            """)
        let client = try daemon.connect()
        try client.send("next news 3")
        try client.expect("subscribed")
        for _ in 0..<3 { try client.expect("page") }
        let status = try #require(try client.request("status")["feeds"]?.arrayValue?.first)
        // One GET brought the document its three pages are cut from.
        #expect(upstream.received.count == 1)
        #expect(status["upstream_requests"] == 1 && status["fetches"] == 3, "\(status.jsonText)")
        let text = try #require(try client.request("metrics")["text"]?.stringValue)
        #expect(text.contains(#"feedd_feed_upstream_requests_total{feed="news"} 1"#) && text.contains(#"feedd_feed_fetches_total{feed="news"} 3"#))
    }
}
