import FeedKit
import Glibc

/// The `[daemon]` table.
public struct DaemonSettings: Sendable, Equatable {
    public var socketPath: String?
    public var stateDirectory: String?
    /// `state_page_bytes`: the most bytes of stored pages each feed whose source cannot fetch a
    /// page again keeps in the state directory; past it the oldest pages go first. (The config
    /// is read without the state store, by the fuzzer among others: the daemon hands this to it.)
    public var statePageBytes = 16 << 20
    public var prefetch = 2
    public var maxClients = 10_000
    public var maxLineBytes = 65_536
    /// Subscriptions one connection may hold at once.
    public var maxSubscriptions = 256
    /// How long a client may leave its output unread before it is disconnected.
    public var stallTimeout: Duration = .seconds(60)
    public var socketMode: mode_t = 0o660
    public var socketGroup: String?
    /// `allow_uids`, user names resolved to uids when the config was loaded.
    public var allowUIDs: [UInt32] = []
    /// `allow_groups`, group names resolved to gids when the config was loaded.
    public var allowGIDs: [UInt32] = []
    /// The uids of the users listed as (supplementary) members of those groups, resolved when the
    /// config was loaded, so that admitting a client never reads the user database.
    public var allowGroupMemberUIDs: [UInt32] = []
    public var logLevel: LogLevel = .info
    /// Where the metrics' OpenMetrics text is rewritten every 15 s, for node_exporter; nil writes none.
    public var metricsFile: String?
    /// `metrics_consumers`: the metrics give each consumer's lag, one series per consumer.
    public var metricsConsumers = false

    public init() {}
}

/// The settings of one `[feeds.NAME]` table that the daemon reads itself; the rest are the adapter's.
public struct FeedSettings: Sendable, Equatable {
    public var name: String
    public var source: String
    public var prefetch: Int
    public var wrap = false
    public var poll: Duration?
    public var timeout: Duration = .seconds(10)
    public var retryMaxDelay: Duration = .seconds(60)
    public var cachePages = 256
    /// The memory the cached pages may take, as the daemon really holds them.
    public var cacheBytes = 64 << 20
    /// Durable consumers the feed keeps at most (`max_consumers`); a new one past it is refused.
    public var maxConsumers = 10_000
    /// Shared with the fleet through `[cluster]` (SPEC §8); by default every source but `file`.
    public var shared = true
    /// The adapter's own options, as written.
    public var options: [String: JSONValue] = [:]

    public init(name: String, source: String, prefetch: Int) {
        self.name = name
        self.source = source
        self.prefetch = prefetch
    }

    /// Whether a feed with `other`'s settings has the same pages as one with these (SPEC §3): the
    /// source, its options and `wrap` shape them; how often, how fast and how much is fetched
    /// ahead or cached (`timeout`, `poll`, `prefetch`, `retry_max_delay`, `cache_pages`,
    /// `cache_bytes`) does not. A reload that keeps them keeps the generation and every cursor.
    public func shapesSamePages(as other: FeedSettings) -> Bool {
        name == other.name && source == other.source && options == other.options && wrap == other.wrap
    }

    /// A hash of what shapes the feed's pages (source, `wrap`, the adapter's options): stored
    /// with a generation, so a restart with other contents starts a new one (SPEC §3).
    public var contentFingerprint: String {
        StableHash.hex(JSONValue.object(["source": .string(source), "wrap": .bool(wrap), "options": .object(options)]).serialized)
    }
}

/// A feed ready to run: its settings and the adapter built (and so validated) from them.
public struct FeedDefinition: Sendable {
    public let settings: FeedSettings
    public let adapter: any SourceAdapter
    /// Builds another instance of the same adapter, to replace one whose call never returns;
    /// nil where that cannot be done (the feed then waits for the call for as long as it takes).
    public let makeAdapter: (@Sendable () throws -> any SourceAdapter)?
    /// Where its `[feeds.NAME]` table is written.
    public var location: ConfigLocation?

    public init(
        settings: FeedSettings, adapter: any SourceAdapter, makeAdapter: (@Sendable () throws -> any SourceAdapter)? = nil,
        location: ConfigLocation? = nil
    ) {
        self.settings = settings
        self.adapter = adapter
        self.makeAdapter = makeAdapter
        self.location = location
    }
}

/// A loaded, valid configuration.
public struct Configuration: Sendable {
    public var daemon: DaemonSettings
    /// The fleet this instance belongs to, or nil when it runs alone.
    public var cluster: ClusterSettings?
    /// The HTTP front (SPEC §11), or nil without an `[http]` table.
    public var http: HTTPSettings?
    /// Sorted by name.
    public var feeds: [FeedDefinition]
    /// The files it was read from, main file first, or the name of the embedded default.
    public var files: [String]
    /// What is valid but cannot work yet (a file a feed reads that is not there), in reading order.
    public var warnings: [ConfigProblem] = []
}

/// The adapters the daemon knows, by source name.
public struct AdapterRegistry: Sendable {
    private let adapters: [String: any SourceAdapter.Type]

    public init(_ adapters: [any SourceAdapter.Type]) {
        self.adapters = Dictionary(adapters.map { ($0.sourceName, $0) }, uniquingKeysWith: { first, _ in first })
    }

    public subscript(source: String) -> (any SourceAdapter.Type)? { adapters[source] }

    public var sourceNames: [String] { adapters.keys.sorted() }

    /// Every adapter, by source name.
    public var adapterTypes: [(source: String, type: any SourceAdapter.Type)] {
        adapters.keys.sorted().map { ($0, adapters[$0]!) }
    }
}
