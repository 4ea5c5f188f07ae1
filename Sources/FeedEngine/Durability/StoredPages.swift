import FeedKit
import FeedState

/// What the state directory holds of a feed's current generation, and the only writer of it:
/// the generation itself, the record of each page (the token it returned, which pages on after a
/// restart), and the items of pages whose source cannot fetch them again.
///
/// Page records are written one write at a time, in order: records asked for while one is in
/// flight are merged into the next write, so records never reach the store out of order and a
/// failed write is simply written again by the next one. ``confirmed`` counts only what the
/// store confirmed; a cursor is stored only within it (``CursorLedger``), so a record that could
/// not be stored (a full disk) never makes the store refuse a cursor as out of range.
@MainActor
final class StoredPages {
    typealias Completion = (Result<Void, StoreError>) -> Void

    let feed: String
    private let store: (any DurableState)?
    private let logger: Logger
    /// The token page N returned, for its record (the feed's ``GenerationPaging`` knows them).
    var token: (Int) -> String? = { _ in nil }

    /// The generation this is about, and whether the store holds it (a failed start is written again
    /// before the next record).
    private(set) var generation: Int
    private(set) var seed: String
    private var fingerprint: String
    private var generationIsStored: Bool
    /// Pages of the generation whose records are durable.
    private(set) var confirmed: Int
    /// What the store said of the generation's pages after the last write: which keep their items.
    private var snapshot: StoredFeed?

    /// The waiters of the write in flight (nil: none in flight), and the page it goes up to.
    private var inFlight: [Completion]?
    private var inFlightThrough = 0
    /// What the next write is to cover, and who waits for it.
    private var queued: (through: Int, bodies: [Int: NewPage], waiters: [Completion])?

    init(feed: String, store: (any DurableState)?, generation: Int, seed: String, fingerprint: String, logger: Logger) {
        self.feed = feed
        self.store = store
        self.logger = logger
        self.generation = generation
        self.seed = seed
        self.fingerprint = fingerprint
        let stored = store?.feed(feed)
        let isStored = stored.map { $0.generation == generation && $0.fingerprint == fingerprint } ?? false
        generationIsStored = isStored
        snapshot = isStored ? stored : nil
        confirmed = isStored ? stored?.pages.count ?? 0 : 0
    }

    /// Whether there is a store to write to.
    var isKept: Bool { store != nil }

    /// Pages up to this number lost their stored items to `daemon.state_page_bytes`.
    var bodiesDroppedThrough: Int { snapshot?.bodiesDroppedThrough ?? 0 }

    /// Whether the store holds the items of page `number`, so it is read from there, not fetched.
    func keepsItems(of number: Int) -> Bool { snapshot?.keepsItems(of: number) ?? false }

    /// Whether page `number` had its items stored and lost them: its source cannot give them again.
    func lostItems(of number: Int) -> Bool { snapshot?.lostItems(of: number) ?? false }

    // MARK: The generation

    /// Makes `number` the stored generation of the feed (every stored cursor of the feed goes back
    /// to 0); throws, changing nothing, if the store refuses it. ``adopt(_:seed:fingerprint:)``
    /// then makes it the one this is about.
    func store(generation number: Int, seed: String, fingerprint: String) async throws(StoreError) {
        try await store?.startGeneration(feed: feed, generation: number, fingerprint: fingerprint, seed: seed)
    }

    /// Makes `number` the generation this is about; unless the store holds it already, it is
    /// written before its first record (or with ``storeGenerationSoon()``).
    func adopt(_ number: Int, seed: String, fingerprint: String) {
        let stored = store?.feed(feed).map { $0.generation == number && $0.fingerprint == fingerprint && $0.seed == seed } ?? false
        generation = number
        self.seed = seed
        self.fingerprint = fingerprint
        generationIsStored = stored
        confirmed = 0
        snapshot = stored ? StoredFeed(generation: number, fingerprint: fingerprint, seed: seed, pages: [], bodiesDroppedThrough: 0) : nil
        let orphans = (inFlight ?? []) + (queued?.waiters ?? [])
        queued = nil
        // The write in flight belongs to the old generation; its answer is ignored when it comes.
        if inFlight != nil { inFlight = [] }
        for waiter in orphans { waiter(.failure(.unavailable("feed \(feed) started generation \(number) meanwhile"))) }
    }

    /// Writes the generation now, in the background (a failure is logged; the next write retries).
    func storeGenerationSoon() {
        guard store != nil, !generationIsStored else { return }
        Task { @MainActor in
            do throws(StoreError) {
                try await ensureGeneration()
            } catch {
                logger.error("cannot store generation \(generation): \(error)")
            }
        }
    }

    private func ensureGeneration() async throws(StoreError) {
        guard let store, !generationIsStored else { return }
        let number = generation
        try await store.startGeneration(feed: feed, generation: number, fingerprint: fingerprint, seed: seed)
        if number == generation {
            generationIsStored = true
            if snapshot == nil { snapshot = StoredFeed(generation: number, fingerprint: fingerprint, seed: seed, pages: [], bodiesDroppedThrough: 0) }
        }
    }

    // MARK: Pages

    /// Makes the records of pages up to `number` durable, then calls `completion` (at once if they
    /// are). `bodies`: the records with their items of pages whose source cannot fetch them again.
    func record(through number: Int, bodies: [Int: NewPage] = [:], completion: @escaping Completion) {
        guard store != nil else { return completion(.success(())) }
        guard number > confirmed || !generationIsStored else { return completion(.success(())) }
        var next = queued ?? (through: 0, bodies: [:], waiters: [])
        next.through = max(next.through, number)
        next.bodies.merge(bodies) { _, new in new }
        next.waiters.append(completion)
        queued = next
        if inFlight == nil { startWrite() }
    }

    /// Starts making the records up to `number` durable, unless a write covers them already: done
    /// as a consumer is sent a page, so that its ack seldom waits for the page's record.
    func recordAhead(through number: Int) {
        guard store != nil, number > max(confirmed, inFlight == nil ? 0 : inFlightThrough, queued?.through ?? 0) else { return }
        record(through: number) { _ in }
    }

    /// ``record(through:bodies:completion:)`` for a caller that waits.
    func record(through number: Int, bodies: [Int: NewPage] = [:]) async throws(StoreError) {
        let result = await withCheckedContinuation { (continuation: CheckedContinuation<Result<Void, StoreError>, Never>) in
            record(through: number, bodies: bodies) { continuation.resume(returning: $0) }
        }
        try result.get()
    }

    /// Whether the store holds the generation (a cursor of it may be written straight away).
    var isGenerationStored: Bool { generationIsStored }

    private func startWrite() {
        guard let store, let next = queued else { return }
        queued = nil
        let first = confirmed + 1
        inFlight = next.waiters
        inFlightThrough = next.through
        let generation = generation
        // Nothing but the generation itself when the pages are in already.
        let pages = first <= next.through ? (first...next.through).map { number in next.bodies[number] ?? NewPage(token: token(number)) } : []
        let keepsItems = !next.bodies.isEmpty
        Task { @MainActor in
            var result = Result<Void, StoreError>.success(())
            do throws(StoreError) {
                try await ensureGeneration()
                if !pages.isEmpty { try await store.recordPages(feed: feed, generation: generation, first: first, pages: pages) }
            } catch {
                result = .failure(error)
            }
            finishWrite(result, generation: generation, through: next.through, keepsItems: keepsItems)
        }
    }

    private func finishWrite(_ result: Result<Void, StoreError>, generation: Int, through: Int, keepsItems: Bool) {
        let waiters = inFlight ?? []
        inFlight = nil
        if case .success = result, generation == self.generation {
            confirmed = max(confirmed, through)
            // Only pages with items change what the budget kept: read it back for those.
            if keepsItems, let stored = store?.feed(feed), stored.generation == generation { snapshot = stored }
        }
        for waiter in waiters { waiter(result) }
        startWrite()
    }

    /// The page `number` as stored with its items, with what its source said of the page after
    /// it; nil if the store does not have it or it is not a stored page.
    func storedPage(_ number: Int, wrap: Bool) async -> (page: Page, next: NextPage)? {
        guard let store else { return nil }
        let (feed, generation) = (feed, generation)
        let body = try? await store.pageBody(feed: feed, generation: generation, page: number)
        return body.flatMap { StoredPageBody.decode($0, feed: feed, generation: generation, number: number, wrap: wrap) }
    }
}
