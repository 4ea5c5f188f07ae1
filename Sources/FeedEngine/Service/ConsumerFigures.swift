import FeedKit

/// One durable consumer as `status` and the `consumers` op give it (SPEC §5):
/// `{"name","after","behind","connected","last_ack"}`.
public struct ConsumerFigures: Sendable, Equatable {
    /// The consumer's name.
    public let name: String
    /// The last page it acknowledged in the current generation.
    public let after: Int
    /// Pages between its cursor and the newest page the feed knows (0 when it is there, or past it).
    public let behind: Int
    /// Whether a client of this instance reads it now.
    public let connected: Bool
    /// When it last acknowledged pages, durably, since the daemon started; nil if it has not.
    public let lastAck: FeedTime?

    /// The object as the protocol gives it, `last_ack` in RFC 3339 (or null).
    public var json: JSONValue {
        .object([
            "name": .string(name), "after": .integer(Int64(after)), "behind": .integer(Int64(behind)), "connected": .bool(connected),
            "last_ack": lastAck.map { .string($0.rfc3339) } ?? .null,
        ])
    }
}

/// A feed's consumers summed up, for `status` and the metrics: how many there are and how far
/// behind the newest page they are, furthest and in all.
public struct ConsumerLag: Sendable, Equatable {
    /// Every consumer, connected or not.
    public internal(set) var consumers = 0
    /// The most pages any consumer is behind.
    public internal(set) var maxBehind = 0
    /// The pages every consumer is behind, added up.
    public internal(set) var totalBehind = 0

    /// No consumers.
    public init() {}

    mutating func count(behind: Int) {
        consumers += 1
        maxBehind = max(maxBehind, behind)
        totalBehind += behind
    }
}

/// One page of the answer to `{"op":"consumers"}`: consumers in name order, and the name to ask
/// for the next page `after` (nil on the last page).
public struct ConsumerPage: Sendable, Equatable {
    /// The most consumers one answer lists.
    public static let maximumCount = 1_000

    /// The feed.
    public let feed: String
    /// At most the `limit` asked for, by name.
    public let consumers: [ConsumerFigures]
    /// The last name of this page when more follow; nil when none does.
    public let next: String?
}

/// The `limit` first consumers by name past `after`, gathered in one pass over every consumer:
/// a sorted window of at most `limit`, so the first 100 of 30,000 cost no sort of all 30,000.
struct FirstConsumers {
    typealias Entry = (name: String, after: Int, connected: Bool)

    let limit: Int
    let after: String?
    private(set) var entries: [Entry] = []
    /// Whether a consumer past the window was seen (so the page is not the last).
    private(set) var moreFollow = false
    /// The last name in a full window: most names are past it, and are turned away by one comparison.
    private var cutoff: String?

    init(limit: Int, after: String?) {
        self.limit = max(limit, 0)
        self.after = after
        entries.reserveCapacity(min(self.limit, 1_024) + 1)
    }

    mutating func offer(_ name: String, after cursor: Int, connected: Bool) {
        if let cutoff, name >= cutoff {
            moreFollow = true
            return
        }
        if let after, name <= after { return }
        if entries.count == limit {
            moreFollow = true
            guard limit > 0 else { return }
            entries.removeLast()
        }
        var low = 0
        var high = entries.count
        while low < high {
            let middle = (low + high) / 2
            if entries[middle].name < name { low = middle + 1 } else { high = middle }
        }
        entries.insert((name, cursor, connected), at: low)
        if entries.count == limit { cutoff = entries[limit - 1].name }
    }
}
