import FeedKit

/// One page of one generation of a feed: what a lease, a page subject and a message id name.
public struct PageAddress: Sendable, Hashable, CustomStringConvertible {
    public let feed: String
    public let generation: Int
    public let page: Int

    public init(feed: String, generation: Int, page: Int) {
        self.feed = feed
        self.generation = generation
        self.page = page
    }

    /// `<feed>.<generation>.<page>`: the lease key, the page message id and the subject's tail.
    var key: String { "\(feed).\(generation).\(page)" }

    public var description: String { "feed \(feed) generation \(generation) page \(page)" }
}

/// What a lease is for: fetching a page, or looking whether a live source has it yet.
public enum LeasePurpose: Sendable, Equatable {
    /// Fetching the page from the upstream; the key is `<feed>.<gen>.<page>`.
    case fetch
    /// Waiting for a polled source to have the page (its `poll` looks); the key is
    /// `<feed>.<gen>.<page>.look`, so a look never holds up the fetch that follows it.
    case look
}

/// The right to fetch one page (or to look for it), held by one instance until `expires` unless renewed.
public struct FeedLease: Sendable, Equatable {
    public let page: PageAddress
    public let purpose: LeasePurpose
    /// The instance holding it.
    public let holder: String
    /// Unix time in milliseconds; 0 once released.
    public let expires: Int64
    /// The key's revision this lease was written at; renew and release expect it.
    public let revision: UInt64

    init(page: PageAddress, purpose: LeasePurpose = .fetch, holder: String, expires: Int64, revision: UInt64) {
        self.page = page
        self.purpose = purpose
        self.holder = holder
        self.expires = expires
        self.revision = revision
    }

    init?(page: PageAddress, purpose: LeasePurpose, entry: KeyValueBucket.Entry) {
        guard let json = try? JSONValue(parsing: entry.value), let holder = json["holder"]?.stringValue,
            let expires = json["expires_ms"]?.integerValue
        else { return nil }
        self.init(page: page, purpose: purpose, holder: holder, expires: expires, revision: entry.revision)
    }

    /// Its key in the leases bucket.
    var key: String { Self.key(of: page, for: purpose) }

    static func key(of page: PageAddress, for purpose: LeasePurpose) -> String {
        purpose == .look ? page.key + ".look" : page.key
    }

    var value: [UInt8] { JSONValue.object(["holder": .string(holder), "expires_ms": .integer(expires)]).serialized }

    /// The same lease, held until `expires`.
    func until(_ expires: Int64) -> FeedLease {
        FeedLease(page: page, purpose: purpose, holder: holder, expires: expires, revision: 0)
    }

    func with(revision: UInt64) -> FeedLease {
        FeedLease(page: page, purpose: purpose, holder: holder, expires: expires, revision: revision)
    }
}

/// What ``ClusterStore/acquireLease(_:)`` found.
public enum LeaseOutcome: Sendable, Equatable {
    /// This instance fetches the page.
    case acquired(FeedLease)
    /// Another instance is fetching it; its lease runs until this Unix time in milliseconds.
    case heldElsewhere(holder: String, untilUnixMilliseconds: Int64)
}

/// A feed's generation as the fleet agreed on it.
public struct FeedGeneration: Sendable, Equatable {
    public let feed: String
    public let generation: Int
    /// The seed every instance uses for this generation's pages.
    public let seed: String
    /// A digest of the feed's definition (the keys that shape its pages); instances whose
    /// fingerprints differ do not share the feed.
    public let fingerprint: String
    /// The compare-and-set token for starting the next generation.
    public let revision: UInt64

    init(feed: String, generation: Int, seed: String, fingerprint: String, revision: UInt64) {
        self.feed = feed
        self.generation = generation
        self.seed = seed
        self.fingerprint = fingerprint
        self.revision = revision
    }

    init?(entry: KeyValueBucket.Entry) {
        guard entry.isPresent, let json = try? JSONValue(parsing: entry.value),
            let generation = json["generation"]?.integerValue, let seed = json["seed"]?.stringValue,
            let fingerprint = json["fingerprint"]?.stringValue
        else { return nil }
        self.init(feed: entry.key, generation: Int(generation), seed: seed, fingerprint: fingerprint, revision: entry.revision)
    }

    var value: [UInt8] {
        JSONValue.object(["generation": .integer(Int64(generation)), "seed": .string(seed), "fingerprint": .string(fingerprint)]).serialized
    }

    func with(revision: UInt64) -> FeedGeneration {
        FeedGeneration(feed: feed, generation: generation, seed: seed, fingerprint: fingerprint, revision: revision)
    }
}

/// The last page a consumer acknowledged: later generations come after every page of earlier ones.
public struct CursorPosition: Sendable, Hashable, Comparable, CustomStringConvertible {
    public let generation: Int
    public let page: Int

    public init(generation: Int, page: Int) {
        self.generation = generation
        self.page = page
    }

    init?(entry: KeyValueBucket.Entry) {
        guard entry.isPresent, let json = try? JSONValue(parsing: entry.value),
            let generation = json["generation"]?.integerValue, let page = json["page"]?.integerValue
        else { return nil }
        self.init(generation: Int(generation), page: Int(page))
    }

    var value: [UInt8] { JSONValue.object(["generation": .integer(Int64(generation)), "page": .integer(Int64(page))]).serialized }

    public static func < (left: CursorPosition, right: CursorPosition) -> Bool {
        (left.generation, left.page) < (right.generation, right.page)
    }

    public var description: String { "generation \(generation) page \(page)" }
}

/// Which instance serves a consumer now: the last one where it subscribed.
public struct ConsumerClaim: Sendable, Equatable {
    public let feed: String
    public let consumer: String
    public let instance: String

    public init(feed: String, consumer: String, instance: String) {
        self.feed = feed
        self.consumer = consumer
        self.instance = instance
    }

    init?(entry: KeyValueBucket.Entry) {
        guard entry.isPresent, let json = try? JSONValue(parsing: entry.value), let feed = json["feed"]?.stringValue,
            let consumer = json["consumer"]?.stringValue, let instance = json["instance"]?.stringValue
        else { return nil }
        self.init(feed: feed, consumer: consumer, instance: instance)
    }

    var value: [UInt8] { JSONValue.object(["feed": .string(feed), "consumer": .string(consumer), "instance": .string(instance)]).serialized }
}

/// What ``ClusterStore/publishPage(_:line:)`` did.
public enum PagePublication: Sendable, Equatable {
    case published
    /// Another publication of the same page came first; it is the one every instance reads.
    case alreadyPublished
}

/// A page as another instance (or this one) published it.
public struct PublishedPage: Sendable, Equatable {
    public let page: PageAddress
    /// The exact page line.
    public let line: [UInt8]
    /// What the publisher said about the page besides its line.
    public let headers: [String: String]

    public init(page: PageAddress, line: [UInt8], headers: [String: String] = [:]) {
        self.page = page
        self.line = line
        self.headers = headers
    }
}
