/// What the store knows about one feed: its current generation and that generation's pages.
public struct StoredFeed: Sendable, Equatable {
    /// Never goes backwards; a new one starts when a refresh or a changed config reshapes the pages.
    public var generation: Int
    /// The engine's hash of the config keys that shape this feed's pages; a different one at
    /// start means the stored pages and cursors belong to another feed, so a new generation starts.
    public var fingerprint: String
    /// The seed the generation started with (randomuser without a fixed seed), so a restart
    /// continues the same sequence.
    public var seed: String?
    /// Page n of the generation is `pages[n - 1]`; always numbered 1...count without gaps.
    public var pages: [StoredPage]
    /// Pages up to this number lost their stored body to the disk budget (0 = none lost).
    public var bodiesDroppedThrough: Int

    public init(generation: Int, fingerprint: String, seed: String?, pages: [StoredPage], bodiesDroppedThrough: Int) {
        self.generation = generation
        self.fingerprint = fingerprint
        self.seed = seed
        self.pages = pages
        self.bodiesDroppedThrough = bodiesDroppedThrough
    }

    /// The stored pages' bodies together, in bytes.
    public var storedBodyBytes: Int { pages.reduce(0) { $0 + $1.bodyBytes } }

    /// The highest generation a feed may have, 2^40: far more refreshes than any feed sees, far
    /// below `Int.max`, so no generation arithmetic can overflow. A fleet numbers its generations
    /// within the same range. A row outside `1...maximumGeneration` is rejected when read.
    public static let maximumGeneration = 1 << 40
    /// The highest page number a generation may have, 2^40, for the same reason.
    public static let maximumPage = 1 << 40
}

/// One fetched page of a generation.
public struct StoredPage: Sendable, Equatable {
    /// The continuation token the source returned with this page (what fetches the page after it).
    public var token: String?
    /// The size of the page's stored items, 0 if none are stored (read them with ``StateStore/pageBody(feed:generation:page:)``).
    public var bodyBytes: Int
    /// Whether the page's items themselves are stored.
    public var hasBody: Bool

    public init(token: String?, bodyBytes: Int, hasBody: Bool) {
        self.token = token
        self.bodyBytes = bodyBytes
        self.hasBody = hasBody
    }
}

/// A consumer's durable position in a feed.
public struct StoredCursor: Sendable, Equatable {
    public var generation: Int
    /// The last page it acknowledged in that generation (0 = none).
    public var cursor: Int
}

/// One change to the durable state, as the engine asks for it.
enum StateChange: Sendable {
    case setCursor(feed: String, consumer: String, generation: Int, cursor: Int)
    case forget(feed: String, consumer: String)
    case startGeneration(feed: String, generation: Int, fingerprint: String, seed: String?)
    /// Pages `first`, `first + 1`, … of a generation, in one change so they are stored in order.
    case recordPages(feed: String, generation: Int, first: Int, pages: [NewPage])
}

/// A fetched page to record: the token that fetches the page after it, and optionally its items.
public struct NewPage: Sendable {
    public var token: String?
    /// The page's body, nil when none is kept: these bytes, then those of ``bodyTail``.
    public var body: [UInt8]?
    /// The rest of the body, stored from where it is: a page line, which a feed keeps anyway,
    /// costs no copy of itself while it waits for its commit.
    public var bodyTail: (any FixedBytes)?

    public init(token: String?, body: [UInt8]? = nil, bodyTail: (any FixedBytes)? = nil) {
        self.token = token
        self.body = body
        self.bodyTail = bodyTail
    }

    /// The body's length, nil when none is kept.
    var bodyCount: Int? { body.map { $0.count + (bodyTail?.buffer.count ?? 0) } }
}

/// Bytes at a fixed address that are never written again (a page line), read in place when
/// they are stored.
public protocol FixedBytes: AnyObject, Sendable {
    var buffer: UnsafeRawBufferPointer { get }
}

/// Everything the store holds except page bodies: what the store loads at start, what the
/// writer checks each change against, and the in-memory mirror readers see.
struct StateSnapshot: Sendable {
    var feeds: [String: StoredFeed] = [:]
    /// feed → consumer → cursor.
    var consumers: [String: [String: StoredCursor]] = [:]

    /// Throws ``StoreError/Kind/rejected`` if `change` contradicts the state; changes nothing.
    func validate(_ change: StateChange) throws(StoreError) {
        switch change {
        case .setCursor(let feed, let consumer, let generation, let cursor):
            let stored = try current(feed, generation: generation, for: "the cursor of consumer \(consumer)")
            guard cursor >= 0, cursor <= stored.pages.count else {
                throw StoreError(.rejected, "feed \(feed): cursor \(cursor) of consumer \(consumer) is outside 0...\(stored.pages.count), the pages known in generation \(generation)")
            }
        case .forget:
            break
        case .startGeneration(let feed, let generation, let fingerprint, let seed):
            guard (1...StoredFeed.maximumGeneration).contains(generation) else {
                throw StoreError(.rejected, "feed \(feed): generation \(generation) is outside 1...\(StoredFeed.maximumGeneration)")
            }
            guard let stored = feeds[feed] else { return }
            if generation < stored.generation {
                throw StoreError(.rejected, "feed \(feed): generation \(generation) would go back from \(stored.generation)")
            }
            if generation == stored.generation, fingerprint != stored.fingerprint || seed != stored.seed {
                throw StoreError(.rejected, "feed \(feed): generation \(generation) is already stored with other contents; a change needs a new generation")
            }
        case .recordPages(let feed, let generation, let page, let pages):
            let stored = try current(feed, generation: generation, for: "page \(page)")
            guard page >= 1, page <= stored.pages.count + 1 else {
                throw StoreError(.rejected, "feed \(feed): page \(page) of generation \(generation) would leave a gap after page \(stored.pages.count)")
            }
            guard page - 1 + pages.count <= StoredFeed.maximumPage else {
                throw StoreError(.rejected, "feed \(feed): page \(page - 1 + pages.count) is past the last page there can be, \(StoredFeed.maximumPage)")
            }
        }
    }

    /// (`what` is made only for a refusal: built for every change, it was a tenth of the writer
    /// thread's work per ack in an ack storm, callgrind.)
    private func current(_ feed: String, generation: Int, for what: @autoclosure () -> String) throws(StoreError) -> StoredFeed {
        guard let stored = feeds[feed] else {
            throw StoreError(.rejected, "feed \(feed): no generation is stored, so \(what()) cannot be")
        }
        guard stored.generation == generation else {
            throw StoreError(.rejected, "feed \(feed): \(what()) belongs to generation \(generation), but the current one is \(stored.generation)")
        }
        return stored
    }

    /// What applying a change did, beyond the change itself, that the database must repeat.
    struct Effects: Sendable {
        /// A generation was started (false when the same one was stored again).
        var startedGeneration = false
        /// Bodies of pages up to this number are dropped to keep within the budget.
        var dropBodiesThrough: Int?
        /// Whether each page's body is kept (false when the budget leaves no room for it).
        var keepsBody: [Bool] = []
        /// `forget` found the consumer.
        var forgotten = false
    }

    /// Applies a change that ``validate(_:)`` accepted, keeping each feed's page bodies within
    /// `bodyBudget` bytes by dropping its oldest bodies first.
    mutating func apply(_ change: StateChange, bodyBudget: Int) -> Effects {
        var effects = Effects()
        switch change {
        case .setCursor(let feed, let consumer, let generation, let cursor):
            consumers[feed, default: [:]][consumer] = StoredCursor(generation: generation, cursor: cursor)
        case .forget(let feed, let consumer):
            effects.forgotten = consumers[feed]?.removeValue(forKey: consumer) != nil
            if consumers[feed]?.isEmpty == true { consumers[feed] = nil }
        case .startGeneration(let feed, let generation, let fingerprint, let seed):
            guard feeds[feed]?.generation != generation else { break }
            effects.startedGeneration = true
            feeds[feed] = StoredFeed(generation: generation, fingerprint: fingerprint, seed: seed, pages: [], bodiesDroppedThrough: 0)
            if let names = consumers[feed]?.keys {
                for name in Array(names) { consumers[feed]?[name] = StoredCursor(generation: generation, cursor: 0) }
            }
        case .recordPages(let feed, _, let first, let pages):
            guard var stored = feeds[feed] else { break }
            for (offset, page) in pages.enumerated() {
                effects.keepsBody.append(stored.record(page, number: first + offset, bodyBudget: bodyBudget, dropping: &effects.dropBodiesThrough))
            }
            feeds[feed] = stored
        }
        return effects
    }
}

extension StoredFeed {
    /// Records page `number` (at most one past the last), keeping the bodies within `bodyBudget`
    /// by dropping the oldest first; returns whether this page's body is kept, and raises
    /// `dropping` to the last page whose body went.
    mutating func record(_ page: NewPage, number: Int, bodyBudget: Int, dropping: inout Int?) -> Bool {
        let bodyBytes = page.bodyCount ?? 0
        let keepsBody = page.body != nil && number > bodiesDroppedThrough && bodyBytes <= bodyBudget
        let record = StoredPage(token: page.token, bodyBytes: keepsBody ? bodyBytes : 0, hasBody: keepsBody)
        if number > pages.count { pages.append(record) } else { pages[number - 1] = record }
        if page.body != nil, !keepsBody, number > bodiesDroppedThrough {
            bodiesDroppedThrough = number
            dropping = number
        }
        var total = storedBodyBytes
        while total > bodyBudget, let oldest = pages.firstIndex(where: { $0.hasBody }) {
            total -= pages[oldest].bodyBytes
            bodiesDroppedThrough = max(bodiesDroppedThrough, oldest + 1)
            dropping = bodiesDroppedThrough
            for index in 0..<bodiesDroppedThrough {
                pages[index].bodyBytes = 0
                pages[index].hasBody = false
            }
        }
        return keepsBody && number > bodiesDroppedThrough
    }
}
