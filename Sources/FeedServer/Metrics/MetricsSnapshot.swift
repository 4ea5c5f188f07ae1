import FeedEngine

/// The daemon's figures at one moment, and their OpenMetrics text (SPEC §10): what
/// `{"op":"metrics"}` answers and `daemon.metrics_file` holds. The README lists every metric.
public struct MetricsSnapshot: Sendable {
    /// One feed's figures.
    public struct FeedFigures: Sendable {
        public var name: String
        public var counters: FeedCounters
        public var cachedPages: Int
        public var subscribers: Int

        public init(name: String, counters: FeedCounters, cachedPages: Int, subscribers: Int) {
            self.name = name
            self.counters = counters
            self.cachedPages = cachedPages
            self.subscribers = subscribers
        }
    }

    /// Clients connected now.
    public var clients: Int
    /// Connections accepted since start, refused ones not included.
    public var connectionsAccepted: Int
    /// Bytes written to clients since start.
    public var bytesSent: Int
    /// Sorted by name.
    public var feeds: [FeedFigures]
    /// The fleet link's figures, for a daemon with `[cluster]`.
    public var fleet: FleetStatistics?

    public init(clients: Int, connectionsAccepted: Int, bytesSent: Int, feeds: [FeedFigures], fleet: FleetStatistics? = nil) {
        self.clients = clients
        self.connectionsAccepted = connectionsAccepted
        self.bytesSent = bytesSent
        self.feeds = feeds
        self.fleet = fleet
    }

    /// The OpenMetrics text, ending in `# EOF`.
    public var text: String {
        var writer = OpenMetricsWriter()
        writer.scalar("feedd_clients", .gauge, help: "Clients connected now.", samples: [([], clients)])
        writer.scalar("feedd_client_connections_total", .counter, help: "Client connections accepted.", samples: [([], connectionsAccepted)])
        writer.scalar("feedd_sent_bytes_total", .counter, help: "Bytes written to clients.", samples: [([], bytesSent)])
        perFeed(&writer, "feedd_feed_upstream_requests_total", .counter, "Requests made to the feed's upstream.") { $0.counters.upstreamRequests }
        perFeed(&writer, "feedd_feed_upstream_errors_total", .counter, "Upstream requests that failed.") { $0.counters.upstreamErrors }
        perFeed(&writer, "feedd_feed_pages_fetched_total", .counter, "Pages fetched from the upstream.") { $0.counters.pagesFetched }
        perFeed(&writer, "feedd_feed_pages_delivered_total", .counter, "Pages sent to subscribers, once per subscriber.") { $0.counters.pagesDelivered }
        perFeed(&writer, "feedd_feed_cached_pages", .gauge, "Pages in the feed's cache now.") { $0.cachedPages }
        perFeed(&writer, "feedd_feed_subscribers", .gauge, "Subscriptions to the feed now.") { $0.subscribers }
        writer.histogram(
            "feedd_feed_upstream_request_duration_seconds", unit: "seconds", help: "How long upstream requests took.",
            samples: feeds.map { ([("feed", $0.name)], $0.counters.upstreamDuration) })
        if let fleet { Self.write(fleet, to: &writer) }
        writer.end()
        return writer.text
    }

    private func perFeed(
        _ writer: inout OpenMetricsWriter, _ name: String, _ kind: OpenMetricsWriter.ScalarKind, _ help: String, _ value: (FeedFigures) -> Int
    ) {
        writer.scalar(name, kind, help: help, samples: feeds.map { (labels: [(name: "feed", value: $0.name)], value: value($0)) })
    }
}
