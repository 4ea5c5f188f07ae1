import FeedKit

/// One feed's figures at one moment: its entry of `status` (SPEC §5) and of the metrics (SPEC §10).
public struct FeedStatus: Sendable {
    /// One durable consumer of the feed.
    public struct Consumer: Sendable, Equatable {
        /// The consumer's name.
        public let name: String
        /// The last page it acknowledged in the current generation.
        public let after: Int
        /// Whether a client of this instance reads it now.
        public let connected: Bool
    }

    /// The feed's name.
    public let name: String
    /// Its `source`.
    public let source: String
    /// How its upstream is doing.
    public let health: FeedHealth
    /// The generation it serves.
    public let generation: Int
    /// Pages in its cache.
    public let cachedPages: Int
    /// The memory the cached pages take.
    public let cachedBytes: Int
    /// Whether its source said which page is the last.
    public let reachedEnd: Bool
    /// Subscriptions now.
    public let subscribers: Int
    /// Every consumer, connected or not, by name.
    public let consumers: [Consumer]
    /// Its prefetch depth.
    public let prefetch: Int
    /// `joined`, `joining` or `alone`, for a shared feed.
    public let fleet: String?
    /// What the feed has done since it started.
    public let counters: FeedCounters

    /// `feed`'s figures; its consumers only if `withConsumers` (the metrics need none). A feed
    /// that gathers `members` (`merge`) and is itself fine reports the first member that is not,
    /// since that member's items are left out of its pages until it recovers.
    @MainActor
    init(_ feed: Feed, members: [Feed] = [], withConsumers: Bool = true) {
        name = feed.name
        source = feed.settings.source
        health = Self.health(of: feed, members: members)
        generation = feed.generation
        cachedPages = feed.cachedPages
        cachedBytes = feed.cachedBytes
        reachedEnd = feed.reachedEnd
        subscribers = feed.subscriberCount
        prefetch = feed.settings.prefetch
        fleet = feed.fleetState
        counters = feed.counters
        guard withConsumers else {
            consumers = []
            return
        }
        let connected = feed.subscriptions.connectedConsumers
        var all = feed.ledger.storedCursors(generation: feed.generation)
        all.merge(connected) { _, live in live }
        consumers = all.map { Consumer(name: $0.key, after: $0.value, connected: connected[$0.key] != nil) }.sorted { $0.name < $1.name }
    }

    @MainActor
    private static func health(of feed: Feed, members: [Feed]) -> FeedHealth {
        guard feed.health.state == .ok, let failing = members.first(where: { $0.health.state != .ok }) else { return feed.health }
        let error = failing.health.lastError.map { ": \($0)" } ?? ""
        return FeedHealth(
            state: failing.health.state, lastError: "member \(failing.name) is \(failing.health.state.rawValue), its items are left out until it recovers\(error)")
    }

    /// The entry as `status` gives it.
    public var json: JSONValue {
        .object([
            "name": .string(name),
            "source": .string(source),
            "state": .string(health.state.rawValue),
            "generation": .integer(Int64(generation)),
            "fetched_pages": .integer(Int64(counters.pagesFetched)),
            "cached_pages": .integer(Int64(cachedPages)),
            "cached_bytes": .integer(Int64(cachedBytes)),
            "reached_end": .bool(reachedEnd),
            "upstream_requests": .integer(Int64(counters.upstreamRequests)),
            "last_error": health.lastError.map(JSONValue.string) ?? .null,
            "subscribers": .integer(Int64(subscribers)),
            "consumers": .array(consumers.map { .object(["name": .string($0.name), "after": .integer(Int64($0.after)), "connected": .bool($0.connected)]) }),
            "prefetch": .integer(Int64(prefetch)),
        ])
    }
}

/// The fleet's part of `status` (SPEC §8): its name, whether it can be reached, and where each
/// shared feed stands.
public struct ClusterStatus: Sendable {
    /// The fleet's `[cluster] name`.
    public let name: String
    /// Whether the fleet can be reached now.
    public let connected: Bool
    /// Each shared feed with `joined`, `joining` or `alone`.
    public let feeds: [(name: String, state: String)]
    /// The link's figures (server, reconnections, rejections, problem), if a link runs.
    public let statistics: FleetStatistics?

    /// `status`'s `cluster` object.
    public var json: JSONValue {
        var object: [String: JSONValue] = ["state": .string(connected ? "connected" : "disconnected"), "name": .string(name)]
        for state in ["joined", "joining", "alone"] {
            object[state] = .array(feeds.filter { $0.state == state }.map { .string($0.name) })
        }
        if let statistics { object.merge(statistics.statusFields) { _, link in link } }
        return .object(object)
    }
}
