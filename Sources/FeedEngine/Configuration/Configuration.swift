import FeedKit
import Glibc

/// The `[daemon]` table.
public struct DaemonSettings: Sendable, Equatable {
    public var socketPath: String?
    public var stateDirectory: String?
    public var prefetch = 2
    public var maxClients = 10_000
    public var maxLineBytes = 65_536
    /// Subscriptions one connection may hold at once.
    public var maxSubscriptions = 256
    /// How long a client may leave its output unread before it is disconnected.
    public var stallTimeout: Duration = .seconds(60)
    public var socketMode: mode_t = 0o660
    public var socketGroup: String?
    public var allowUIDs: [UInt32] = []
    public var allowGroups: [String] = []
    public var logLevel: LogLevel = .info
    /// Where the metrics' OpenMetrics text is rewritten every 15 s, for node_exporter; nil writes none.
    public var metricsFile: String?

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
    /// The adapter's own options, as written.
    public var options: [String: JSONValue] = [:]

    public init(name: String, source: String, prefetch: Int) {
        self.name = name
        self.source = source
        self.prefetch = prefetch
    }
}

/// A feed ready to run: its settings and the adapter built (and so validated) from them.
public struct FeedDefinition: Sendable {
    public let settings: FeedSettings
    public let adapter: any SourceAdapter
}

/// A loaded, valid configuration.
public struct Configuration: Sendable {
    public var daemon: DaemonSettings
    /// Sorted by name.
    public var feeds: [FeedDefinition]
    /// The files it was read from, main file first, or the name of the embedded default.
    public var files: [String]
}

/// The adapters the daemon knows, by source name.
public struct AdapterRegistry: Sendable {
    private let adapters: [String: any SourceAdapter.Type]

    public init(_ adapters: [any SourceAdapter.Type]) {
        self.adapters = Dictionary(adapters.map { ($0.sourceName, $0) }, uniquingKeysWith: { first, _ in first })
    }

    public subscript(source: String) -> (any SourceAdapter.Type)? { adapters[source] }

    public var sourceNames: [String] { adapters.keys.sorted() }
}
