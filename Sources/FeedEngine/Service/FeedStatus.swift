import FeedKit

/// One feed's figures at one moment: its entry of `status` (SPEC §5) and of the metrics (SPEC §10).
public struct FeedStatus: Sendable {
    /// How many consumers `status` lists per feed: past it, `consumers` holds the first by name
    /// and `consumers_truncated` is true (the `consumers` op pages through all of them).
    public static let listedConsumers = 100

    /// How much of a feed's consumers a figure needs: looking over 30,000 of them costs
    /// milliseconds, which systemd's STATUS line, rebuilt whenever a client comes or goes, must not pay.
    public enum ConsumerDetail: Sendable {
        /// Nothing: `consumers` empty, `lag` zero.
        case none
        /// Their lag summed up (the metrics).
        case lag
        /// The lag and the first ``listedConsumers`` by name (`status`).
        case listed
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
    /// The first ``listedConsumers`` consumers, connected or not, by name (for `status` only).
    public let consumers: [ConsumerFigures]
    /// Every consumer summed up: how many, and how far behind the newest page.
    public let lag: ConsumerLag
    /// The newest page of the generation the feed knows.
    public let newestPage: Int
    /// Its prefetch depth.
    public let prefetch: Int
    /// `joined`, `joining` or `alone`, for a shared feed.
    public let fleet: String?
    /// What the feed has done since it started.
    public let counters: FeedCounters

    /// `feed`'s figures, with as much of its consumers as `detail` says. A feed that gathers
    /// `members` (`merge`) and is itself fine reports the first member that is not, since that
    /// member's items are left out of its pages until it recovers.
    @MainActor
    init(_ feed: Feed, members: [Feed] = [], consumers detail: ConsumerDetail = .listed) {
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
        newestPage = feed.newestKnownPage
        guard detail != .none else {
            (lag, consumers) = (ConsumerLag(), [])
            return
        }
        let roster = feed.consumerRoster(listing: detail == .listed ? Self.listedConsumers : 0)
        lag = roster.lag
        consumers = roster.first.consumers
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
            "fetches": .integer(Int64(counters.fetches)),
            "last_error": health.lastError.map(JSONValue.string) ?? .null,
            "subscribers": .integer(Int64(subscribers)),
            "consumers": .array(consumers.map(\.json)),
            "consumer_count": .integer(Int64(lag.consumers)),
            "consumers_truncated": .bool(lag.consumers > consumers.count),
            "behind_max": .integer(Int64(lag.maxBehind)),
            "behind_sum": .integer(Int64(lag.totalBehind)),
            "newest_page": .integer(Int64(newestPage)),
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
