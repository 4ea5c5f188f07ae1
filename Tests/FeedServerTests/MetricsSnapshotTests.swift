import FeedEngine
import Testing

@testable import FeedServer

/// The OpenMetrics text of SPEC §10, rendered from fixed figures.
@Suite struct MetricsSnapshotTests {
    static func snapshot() -> MetricsSnapshot {
        var counters = FeedCounters()
        counters.upstreamRequests = 4
        counters.upstreamErrors = 1
        counters.pagesFetched = 3
        counters.pagesDelivered = 6
        counters.upstreamDuration.record(.milliseconds(3))
        counters.upstreamDuration.record(.milliseconds(40))
        counters.upstreamDuration.record(.seconds(45))
        return MetricsSnapshot(
            clients: 2, connectionsAccepted: 7, bytesSent: 12_345,
            feeds: [MetricsSnapshot.FeedFigures(name: "users", counters: counters, cachedPages: 3, subscribers: 2)])
    }

    func lines(_ snapshot: MetricsSnapshot = snapshot()) -> [Substring] {
        snapshot.text.split(separator: "\n", omittingEmptySubsequences: false)
    }

    @Test func the_text_ends_with_eof_and_a_newline() {
        #expect(Self.snapshot().text.hasSuffix("\n# EOF\n"))
    }

    @Test func every_spec_figure_is_there_per_feed() {
        let lines = lines()
        for expected in [
            #"feedd_feed_upstream_requests_total{feed="users"} 4"#,
            #"feedd_feed_upstream_errors_total{feed="users"} 1"#,
            #"feedd_feed_pages_fetched_total{feed="users"} 3"#,
            #"feedd_feed_pages_delivered_total{feed="users"} 6"#,
            #"feedd_feed_cached_pages{feed="users"} 3"#,
            #"feedd_feed_subscribers{feed="users"} 2"#,
            "feedd_clients 2",
            "feedd_client_connections_total 7",
            "feedd_sent_bytes_total 12345",
        ] {
            #expect(lines.contains(Substring(expected)), "\(expected)")
        }
    }

    @Test func every_family_has_a_type_and_a_help_line_before_its_samples() {
        let lines = lines()
        #expect(lines.contains("# TYPE feedd_feed_upstream_requests_total counter"))
        #expect(lines.contains("# TYPE feedd_feed_cached_pages gauge"))
        #expect(lines.contains("# TYPE feedd_feed_upstream_request_duration_seconds histogram"))
        #expect(lines.contains("# UNIT feedd_feed_upstream_request_duration_seconds seconds"))
        let typed = lines.filter { $0.hasPrefix("# TYPE ") }.map { $0.split(separator: " ")[2] }
        let helped = lines.filter { $0.hasPrefix("# HELP ") }.map { $0.split(separator: " ")[2] }
        #expect(typed == helped)
        for sample in lines where !sample.hasPrefix("#") && !sample.isEmpty {
            #expect(typed.contains { sample.hasPrefix($0) }, "\(sample) has no family")
        }
    }

    @Test func the_duration_histogram_counts_cumulatively_up_to_inf() {
        let lines = lines()
        let name = "feedd_feed_upstream_request_duration_seconds"
        #expect(lines.contains(Substring(#"\#(name)_bucket{feed="users",le="0.005"} 1"#)))
        #expect(lines.contains(Substring(#"\#(name)_bucket{feed="users",le="0.025"} 1"#)))
        #expect(lines.contains(Substring(#"\#(name)_bucket{feed="users",le="0.05"} 2"#)))
        #expect(lines.contains(Substring(#"\#(name)_bucket{feed="users",le="30.0"} 2"#)))
        #expect(lines.contains(Substring(#"\#(name)_bucket{feed="users",le="+Inf"} 3"#)))
        #expect(lines.contains(Substring(#"\#(name)_count{feed="users"} 3"#)))
        #expect(lines.contains(Substring(#"\#(name)_sum{feed="users"} 45.043"#)))
    }

    @Test func label_values_are_escaped() {
        var snapshot = Self.snapshot()
        snapshot.feeds[0].name = "a\"b\\c\nd"
        #expect(lines(snapshot).contains(#"feedd_feed_subscribers{feed="a\"b\\c\nd"} 2"#))
    }

    @Test func without_feeds_the_daemon_figures_remain() {
        let text = MetricsSnapshot(clients: 0, connectionsAccepted: 0, bytesSent: 0, feeds: []).text
        #expect(text.contains("feedd_sent_bytes_total 0\n"))
        #expect(!text.contains("{feed="))
    }
}
