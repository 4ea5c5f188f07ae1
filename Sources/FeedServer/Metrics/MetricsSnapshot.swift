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
        /// Its consumers summed up: how many, how far behind the newest page.
        public var lag: ConsumerLag

        public init(name: String, counters: FeedCounters, cachedPages: Int, subscribers: Int, lag: ConsumerLag = ConsumerLag()) {
            self.name = name
            self.counters = counters
            self.cachedPages = cachedPages
            self.subscribers = subscribers
            self.lag = lag
        }
    }

    /// One consumer's lag, for `daemon.metrics_consumers`.
    public struct ConsumerLagFigure: Sendable {
        public var feed: String
        public var consumer: String
        /// Pages between its cursor and the newest page the feed knows.
        public var behind: Int

        public init(feed: String, consumer: String, behind: Int) {
            self.feed = feed
            self.consumer = consumer
            self.behind = behind
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
    /// Every consumer's lag, by feed and name; nil unless `daemon.metrics_consumers` asks for
    /// them (a series per consumer).
    public var consumerLags: [ConsumerLagFigure]?

    public init(
        clients: Int, connectionsAccepted: Int, bytesSent: Int, feeds: [FeedFigures], fleet: FleetStatistics? = nil,
        consumerLags: [ConsumerLagFigure]? = nil
    ) {
        self.clients = clients
        self.connectionsAccepted = connectionsAccepted
        self.bytesSent = bytesSent
        self.feeds = feeds
        self.fleet = fleet
        self.consumerLags = consumerLags
    }

    /// The OpenMetrics text, ending in `# EOF`.
    public var text: String {
        var writer = OpenMetricsWriter()
        writer.scalar("feedd_clients", .gauge, help: "Clients connected now.", samples: [([], clients)])
        writer.scalar("feedd_client_connections_total", .counter, help: "Client connections accepted.", samples: [([], connectionsAccepted)])
        writer.scalar("feedd_sent_bytes_total", .counter, help: "Bytes written to clients.", samples: [([], bytesSent)])
        perFeed(&writer, "feedd_feed_upstream_requests_total", .counter, "Requests made to the feed's upstream: HTTP requests, for a source that speaks HTTP.") { $0.counters.upstreamRequests }
        perFeed(&writer, "feedd_feed_fetches_total", .counter, "Calls to the feed's adapter, each for one page.") { $0.counters.fetches }
        perFeed(&writer, "feedd_feed_upstream_errors_total", .counter, "Upstream requests that failed.") { $0.counters.upstreamErrors }
        perFeed(&writer, "feedd_feed_pages_fetched_total", .counter, "Pages fetched from the upstream.") { $0.counters.pagesFetched }
        perFeed(&writer, "feedd_feed_pages_delivered_total", .counter, "Pages sent to subscribers, once per subscriber.") { $0.counters.pagesDelivered }
        perFeed(&writer, "feedd_feed_cached_pages", .gauge, "Pages in the feed's cache now.") { $0.cachedPages }
        perFeed(&writer, "feedd_feed_subscribers", .gauge, "Subscriptions to the feed now.") { $0.subscribers }
        perFeed(&writer, "feedd_feed_consumers", .gauge, "Durable consumers of the feed, connected or not.") { $0.lag.consumers }
        perFeed(&writer, "feedd_feed_consumer_lag_max_pages", .gauge, "The most pages any consumer is behind the newest page.") { $0.lag.maxBehind }
        // Not `_sum`, which Prometheus reserves for histograms and summaries.
        perFeed(&writer, "feedd_feed_consumer_lag_sum_pages", .gauge, "The pages every consumer is behind the newest page, added up.") {
            $0.lag.totalBehind
        }
        if let consumerLags {
            writer.scalar(
                "feedd_consumer_lag_pages", .gauge, help: "Pages between the consumer's cursor and the newest page the feed knows.",
                samples: consumerLags.map { ([("feed", $0.feed), ("consumer", $0.consumer)], $0.behind) })
        }
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
