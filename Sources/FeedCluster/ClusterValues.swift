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

    /// The lease in `value` (unsealed); its expiry may be at most `latestExpiry` (Unix ms): no
    /// instance writes one further than its own `lease` from now.
    static func decode(
        page: PageAddress, purpose: LeasePurpose, value: [UInt8], revision: UInt64, latestExpiry: Int64, address: String
    ) -> Result<FeedLease, Rejection> {
        let record = RecordFields(value, .lease, at: address)
        return record.get { fields throws(Rejection) in
            let holder = try record.string(fields, "holder", maximumBytes: RecordLimits.instanceBytes)
            let expires = try record.integer(fields, "expires_ms", in: 0...latestExpiry)
            return FeedLease(page: page, purpose: purpose, holder: holder, expires: expires, revision: revision)
        }
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

    /// The generation of feed `key` in `value` (unsealed).
    static func decode(key: String, value: [UInt8], revision: UInt64, address: String) -> Result<FeedGeneration, Rejection> {
        let record = RecordFields(value, .generation, at: address)
        return record.get { fields throws(Rejection) in
            guard RecordLimits.isFeedName(key) else { throw record.rejection("\"\(key)\" is not a feed name") }
            let generation = try record.integer(fields, "generation", in: 1...RecordLimits.maximumGeneration)
            let seed = try record.string(fields, "seed", maximumBytes: RecordLimits.seedBytes, allowEmpty: true)
            let fingerprint = try record.string(fields, "fingerprint", maximumBytes: RecordLimits.fingerprintBytes)
            return FeedGeneration(feed: key, generation: Int(generation), seed: seed, fingerprint: fingerprint, revision: revision)
        }
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

    /// The cursor in `value` (unsealed).
    static func decode(_ value: [UInt8], address: String) -> Result<CursorPosition, Rejection> {
        let record = RecordFields(value, .cursor, at: address)
        return record.get { fields throws(Rejection) in
            let generation = try record.integer(fields, "generation", in: 1...RecordLimits.maximumGeneration)
            let page = try record.integer(fields, "page", in: 0...RecordLimits.maximumPage)
            return CursorPosition(generation: Int(generation), page: Int(page))
        }
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

    /// The claim in `value` (unsealed), which must be the one its key `key` names.
    static func decode(key: String, value: [UInt8], address: String) -> Result<ConsumerClaim, Rejection> {
        let record = RecordFields(value, .claim, at: address)
        return record.get { fields throws(Rejection) in
            let feed = try record.string(fields, "feed", maximumBytes: RecordLimits.feedBytes)
            let consumer = try record.string(fields, "consumer", maximumBytes: RecordLimits.consumerBytes)
            let instance = try record.string(fields, "instance", maximumBytes: RecordLimits.instanceBytes)
            guard RecordLimits.isFeedName(feed), ClusterStore.consumerKey(feed: feed, consumer: consumer) == key else {
                throw record.rejection("it claims consumer \"\(consumer)\" of feed \"\(feed)\", which is not what its key names")
            }
            return ConsumerClaim(feed: feed, consumer: consumer, instance: instance)
        }
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
