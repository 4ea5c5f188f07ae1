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

    /// The stored pages' bodies together, in bytes.
    public var storedBodyBytes: Int { pages.reduce(0) { $0 + $1.bodyBytes } }
}

/// One fetched page of a generation.
public struct StoredPage: Sendable, Equatable {
    /// The continuation token the source returned with this page (what fetches the page after it).
    public var token: String?
    /// The size of the page's stored items, 0 if none are stored (read them with ``StateStore/pageBody(feed:generation:page:)``).
    public var bodyBytes: Int
    /// Whether the page's items themselves are stored.
    public var hasBody: Bool
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
    case recordPage(feed: String, generation: Int, page: Int, token: String?, body: [UInt8]?)
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
            guard generation >= 1 else { throw StoreError(.rejected, "feed \(feed): generation \(generation) is not a positive number") }
            guard let stored = feeds[feed] else { return }
            if generation < stored.generation {
                throw StoreError(.rejected, "feed \(feed): generation \(generation) would go back from \(stored.generation)")
            }
            if generation == stored.generation, fingerprint != stored.fingerprint || seed != stored.seed {
                throw StoreError(.rejected, "feed \(feed): generation \(generation) is already stored with other contents; a change needs a new generation")
            }
        case .recordPage(let feed, let generation, let page, _, _):
            let stored = try current(feed, generation: generation, for: "page \(page)")
            guard page >= 1, page <= stored.pages.count + 1 else {
                throw StoreError(.rejected, "feed \(feed): page \(page) of generation \(generation) would leave a gap after page \(stored.pages.count)")
            }
        }
    }

    private func current(_ feed: String, generation: Int, for what: String) throws(StoreError) -> StoredFeed {
        guard let stored = feeds[feed] else {
            throw StoreError(.rejected, "feed \(feed): no generation is stored, so \(what) cannot be")
        }
        guard stored.generation == generation else {
            throw StoreError(.rejected, "feed \(feed): \(what) belongs to generation \(generation), but the current one is \(stored.generation)")
        }
        return stored
    }

    /// What applying a change did, beyond the change itself, that the database must repeat.
    struct Effects: Sendable {
        /// A generation was started (false when the same one was stored again).
        var startedGeneration = false
        /// Bodies of pages up to this number are dropped to keep within the budget.
        var dropBodiesThrough: Int?
        /// Whether the page's body is kept (false when the budget leaves no room for it).
        var keepsBody = false
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
        case .recordPage(let feed, _, let page, let token, let body):
            guard var stored = feeds[feed] else { break }
            let bodyBytes = body?.count ?? 0
            effects.keepsBody = body != nil && page > stored.bodiesDroppedThrough && bodyBytes <= bodyBudget
            let record = StoredPage(token: token, bodyBytes: effects.keepsBody ? bodyBytes : 0, hasBody: effects.keepsBody)
            if page > stored.pages.count { stored.pages.append(record) } else { stored.pages[page - 1] = record }
            if body != nil, !effects.keepsBody, page > stored.bodiesDroppedThrough {
                stored.bodiesDroppedThrough = page
                effects.dropBodiesThrough = page
            }
            var total = stored.storedBodyBytes
            while total > bodyBudget, let oldest = stored.pages.firstIndex(where: { $0.hasBody }) {
                total -= stored.pages[oldest].bodyBytes
                stored.bodiesDroppedThrough = max(stored.bodiesDroppedThrough, oldest + 1)
                effects.dropBodiesThrough = stored.bodiesDroppedThrough
                for index in 0..<stored.bodiesDroppedThrough {
                    stored.pages[index].bodyBytes = 0
                    stored.pages[index].hasBody = false
                }
            }
            feeds[feed] = stored
        }
        return effects
    }
}
