import FeedKit
import FeedState

/// One configured feed at run time: its subscriptions, its page cache and its one upstream.
///
/// Everything here runs on the main actor, and each piece of state has one owner: the feed owns
/// the cache (``PageCache``), what it knows of the generation's pages (``GenerationPaging``) and
/// the upstream (``UpstreamState``); each ``Subscription`` owns its own position. Only an
/// adapter's call and the encoding of its page run elsewhere, and their outcome comes back here
/// tagged with the call it answers, so a stale answer is recognised and dropped.
///
/// The invariants of SPEC §4 hold by construction of ``UpstreamState``:
/// - a call starts only from `.idle`, so no two calls to an adapter instance overlap; a call
///   that must be abandoned (refresh, reload, timeout, stop) is cancelled and *drained*: nothing
///   else starts until it has returned, or until the instance is replaced after a grace period;
/// - an answer is used only while the state still holds the call it answers;
/// - every fetch is bounded by the feed's `timeout`, on the injected clock.
///
/// Fetching is demand-driven: the feed fetches the lowest page some subscription waits for, else
/// the lowest it wants prefetched, one request at a time, so any number of subscribers at the
/// same page cause one upstream request and nothing is fetched while nobody moves.
///
/// A shared feed of a daemon in a fleet (SPEC §8) keeps this state machine: its fetch call asks
/// the ``FleetLink`` for the page (published already, else fetched here under the page's lease
/// and published, else awaited from the instance holding the lease), and its wait for a polled
/// source's new data takes turns with the other instances. What the fleet decides reaches the
/// feed as events on the main actor: a generation started anywhere (``adoptFleetGeneration(_:)``),
/// a page published anywhere (cached for the subscribers here), a consumer claimed elsewhere
/// (``takeOver(_:)``). Its consumers' cursors are the fleet's.
@MainActor
public final class Feed {
    public private(set) var settings: FeedSettings
    public var name: String { settings.name }
    private var adapter: any SourceAdapter
    /// Builds a fresh instance of the adapter, to replace one whose call never returns.
    private var makeAdapter: (@Sendable () throws -> any SourceAdapter)?
    /// The adapter of a reload that kept the feed's pages (a new `timeout`, say): taken into use
    /// as soon as no call to the current one is in flight.
    private var replacementAdapter: (any SourceAdapter)?
    private let encoder: any PageEncoder
    let logger: Logger
    /// Where consumer cursors, the generation and its pages are kept; nil runs without durable state.
    let store: StateStore?
    /// The highest generation asked of the store, so refreshes in a row each get a new one.
    private var requestedGeneration: Int
    /// Pages of the current generation sent to the store (lowered again when a write fails).
    private var pagesSentToStore = 0
    /// Set while the feed starts a new generation because a page's stored items were lost
    /// (see ``startsOverForLostPage(_:)``): nothing is fetched meanwhile.
    private var isStartingOver = false
    /// Each consumer's cursor writes in flight and waiting (see ``storeCursor(consumer:cursor:generation:completion:)``).
    private var cursorWrites: [String: CursorWrites] = [:]
    private let clock: any EngineClock
    private var retryPolicy: RetryPolicy
    /// Called whenever ``health`` changes, for systemd's STATUS line.
    var onHealthChange: (() -> Void)?
    /// Called when the feed starts a new generation, so feeds that gather it start one too.
    var onNewGeneration: (() -> Void)?

    private var paging: GenerationPaging
    private var cache = PageCache()
    private var subscriptions: [ObjectIdentifier: Subscription] = [:]
    private var upstream: UpstreamState = .idle
    /// Set when ``advanceUpstream()`` looked at every subscription and found no page missing, to
    /// what that look depended on (see ``pump(_:)``).
    private var lastFullLook: FullLook?
    private var lastCallID = 0
    private var consecutiveFailures = 0
    /// The one task that gives up calls past their deadline (see ``watchDeadlines()``).
    private var deadlineWatch: (id: Int, task: Task<Void, Never>)?

    /// The fleet this shared feed is part of (SPEC §8); nil for a feed served alone.
    private var fleet: FleetLink?
    private var membership = FleetMembership.joining
    private var isJoining = false
    /// Set once a join failed although the fleet was reachable (say, without JetStream), so that
    /// is logged once, not every second.
    private var joinFailureLogged = false
    /// Brings the pages other instances publish into this feed's cache.
    private var publishedPagesWatch: Task<Void, Never>?
    /// Refreshes of this instance on their way to the fleet, and the newest generation the fleet
    /// announced meanwhile: held back so the requester's `refreshed` carries its request's id.
    private var fleetRefreshesInFlight = 0
    private var heldBackGeneration: FleetGeneration?

    public private(set) var health: FeedHealth = .ok
    /// What the feed has done since it started, for `status` and the metrics.
    public private(set) var counters = FeedCounters()
    public var fetchedPages: Int { counters.pagesFetched }
    public var upstreamRequests: Int { counters.upstreamRequests }

    init(
        definition: FeedDefinition, store: StateStore?, encoder: any PageEncoder, logger: Logger,
        clock: any EngineClock = SystemClock(), jitter: (@Sendable () -> Double)? = nil
    ) {
        settings = definition.settings
        adapter = definition.adapter
        makeAdapter = definition.makeAdapter
        self.encoder = encoder
        self.store = store
        self.clock = clock
        self.logger = logger.forFeed(definition.settings.name)
        retryPolicy = RetryPolicy(maximumDelay: definition.settings.retryMaxDelay)
        if let jitter { retryPolicy.jitter = jitter }
        // The same generation goes on across a restart while what shapes its pages is the same
        // (SPEC §3): with its seed, and with the token of every page stored, so resuming at page
        // N costs at most one request. Otherwise a new generation starts, its consumers at 0.
        let stored = store?.feed(definition.settings.name)
        let fingerprint = definition.settings.contentFingerprint
        if let stored, stored.fingerprint == fingerprint {
            paging = GenerationPaging(
                number: stored.generation, addressing: definition.adapter.pageAddressing, wraps: definition.settings.wrap,
                seed: stored.seed ?? GenerationPaging.randomSeed(), storedTokens: stored.tokensToPageOnWith)
            pagesSentToStore = stored.pages.count
        } else {
            paging = GenerationPaging(
                number: (stored?.generation ?? 0) + 1, addressing: definition.adapter.pageAddressing, wraps: definition.settings.wrap)
        }
        requestedGeneration = paging.number
        if stored?.fingerprint == fingerprint {
            self.logger.info("continuing generation \(paging.number) (\(pagesSentToStore) pages stored)")
        } else {
            storeGeneration()
        }
    }

    public var generation: Int { paging.number }
    /// The feeds this one gathers (a `merge` feed's members).
    public var memberFeeds: [String] { adapter.memberFeeds }
    public var cachedPages: Int { cache.count }
    /// The memory the cached pages take (``Page/cost``), which `cache_bytes` bounds.
    public var cachedBytes: Int { cache.byteCount }
    public var reachedEnd: Bool { paging.lastPage != nil }
    public var subscriberCount: Int { subscriptions.count }
    public var allSubscriptions: [Subscription] { Array(subscriptions.values) }

    // MARK: Subscriptions

    /// Where a new subscription starts: after `after` if given, else after a consumer's stored
    /// cursor in the current generation, else 0. A start other than a stored cursor is moved past
    /// the pages whose stored items were lost (``startsOverForLostPage(_:)``): none of them can be
    /// served as it was, and a subscription starting there is owed nothing before.
    public func startingPoint(consumer: String?, after: Int?) -> Int {
        if after == nil, let cursor = consumer.flatMap({ storedCursor(of: $0) }) { return PageNumber.clamped(cursor) }
        return max(PageNumber.clamped(after ?? 0), storedGeneration?.bodiesDroppedThrough ?? 0)
    }

    private func storedCursor(of consumer: String) -> Int? {
        if keepsCursorsInFleet { return nil }
        return store?.cursor(feed: name, consumer: consumer).map { $0.generation == generation ? $0.cursor : 0 }
    }

    /// Stores a consumer's starting point before it is confirmed.
    public func storeStartingPoint(consumer: String, after: Int) async throws(StoreError) {
        guard storedCursor(of: consumer) != after else { return }
        try await storeCursor(consumer: consumer, cursor: after, generation: generation)
    }

    /// Stores `cursor` as what `consumer` acknowledged in `generation`; returns once it (or a
    /// cursor asked for after it) is durable.
    func storeCursor(consumer: String, cursor: Int, generation: Int) async throws(StoreError) {
        let result = await withCheckedContinuation { (continuation: CheckedContinuation<Result<Void, StoreError>, Never>) in
            storeCursor(consumer: consumer, cursor: cursor, generation: generation) { continuation.resume(returning: $0) }
        }
        try result.get()
    }

    /// Stores `cursor` as what `consumer` acknowledged in `generation`, and calls `completion` on
    /// the main actor once it (or a cursor asked for after it) is durable, or with why not.
    ///
    /// One write per consumer is in flight at a time, so a consumer's cursors reach the disk in
    /// the order they were asked for (concurrent writes could commit in any order, and an older
    /// cursor land over a newer one). Cursors asked for meanwhile are merged into the next write,
    /// the latest winning, and share its sync; different consumers' writes share the store's.
    /// No task is made for an ack: an ack storm costs the main actor a call per ack and one
    /// batch of answers per group commit.
    func storeCursor(consumer: String, cursor: Int, generation: Int, completion: @escaping (Result<Void, StoreError>) -> Void) {
        guard keepsCursors else { return completion(.success(())) }
        cursorWrites[consumer, default: CursorWrites()].queue(cursor: cursor, generation: generation, waiter: completion)
        if cursorWrites[consumer]?.inFlight == false { startCursorWrite(for: consumer) }
    }

    private func startCursorWrite(for consumer: String) {
        guard var writes = cursorWrites[consumer], let next = writes.next else {
            cursorWrites[consumer] = nil
            return
        }
        writes.start()
        cursorWrites[consumer] = writes
        let finish: @MainActor @Sendable (Result<Void, StoreError>) -> Void = { [self] result in
            let waiters = cursorWrites[consumer]?.finish() ?? []
            for waiter in waiters { waiter(result) }
            startCursorWrite(for: consumer)
        }
        // An ack's usual case: the store already has the generation and the pages up to the
        // cursor (what ``writeCursor(consumer:cursor:generation:)`` would write first), so the
        // cursor is queued to the writer at once.
        if let store, !keepsCursorsInFleet, store.generation(feed: name) == generation,
            generation != self.generation || next.cursor <= pagesSentToStore {
            store.setCursor(feed: name, consumer: consumer, generation: generation, cursor: next.cursor, completion: finish)
            return
        }
        // Immediate: the generation and pages are queued (and their marks moved) before this
        // returns, so the acks that follow in the same turn take the way above.
        Task.immediate {
            do throws(StoreError) {
                try await writeCursor(consumer: consumer, cursor: next.cursor, generation: next.generation)
                finish(.success(()))
            } catch {
                finish(.failure(error))
            }
        }
    }

    /// Writes a cursor after the generation and the pages up to it (the store accepts no
    /// cursor past the pages it knows).
    private func writeCursor(consumer: String, cursor: Int, generation: Int) async throws(StoreError) {
        if keepsCursorsInFleet {
            return try await fleetCall { fleet throws(FleetError) in
                try await fleet.advanceCursor(feed: name, consumer: consumer, to: FleetCursor(generation: generation, page: cursor))
            }
        }
        guard let store else { return }
        if store.feed(name)?.generation != generation, generation == self.generation {
            try await store.startGeneration(feed: name, generation: generation, fingerprint: settings.contentFingerprint, seed: paging.seed)
        }
        if generation == self.generation { try await storePages(through: cursor) }
        try await store.setCursor(feed: name, consumer: consumer, generation: generation, cursor: cursor)
    }

    /// Sends the pages up to `number` that the store does not have yet, with their tokens, in
    /// one write; page `number` itself as `fetched` if given (a page just fetched, with its items).
    /// The mark moves before the write is queued, so a cursor queued after it never overtakes its
    /// pages; a failed write lowers it again, and the next call sends them again.
    private func storePages(through number: Int, fetched: NewPage? = nil) async throws(StoreError) {
        guard let store, number > pagesSentToStore else { return }
        let first = pagesSentToStore + 1
        let generation = generation
        var pages = (first...number).map { NewPage(token: paging.token(returnedBy: $0)) }
        if let fetched { pages[pages.count - 1] = fetched }
        pagesSentToStore = number
        do {
            try await store.recordPages(feed: name, generation: generation, first: first, pages: pages)
        } catch {
            if generation == self.generation { pagesSentToStore = min(pagesSentToStore, first - 1) }
            throw error
        }
    }

    /// Starts a subscription after page `after` of the current generation; a subscription of the
    /// same consumer elsewhere is taken over. Pages flow once the caller, having announced the
    /// subscription, calls ``pump(_:)``.
    public func subscribe(output: any SubscriptionOutput, consumer: String?, after: Int, follows: Bool) -> Subscription {
        let after = PageNumber.clamped(after)
        if let consumer { takeOver(consumer) }
        let subscription = Subscription(feed: self, output: output, consumer: consumer, after: after, follows: follows)
        subscriptions[ObjectIdentifier(subscription)] = subscription
        return subscription
    }

    /// Every consumer of this feed, connected or not, with its cursor.
    public var consumers: [(name: String, cursor: Int, connected: Bool)] {
        let connected = Dictionary(subscriptions.values.compactMap { subscription in subscription.consumer.map { ($0, subscription.cursor) } },
            uniquingKeysWith: { first, _ in first })
        // A shared feed's cursors are the fleet's: what the local store has of them is stale.
        let stored = (keepsCursorsInFleet ? nil : store)?.consumers(of: name).map { ($0.name, $0.cursor.generation == generation ? $0.cursor.cursor : 0) } ?? []
        var all = Dictionary(stored, uniquingKeysWith: { first, _ in first })
        all.merge(connected) { _, live in live }
        return all.map { (name: $0.key, cursor: $0.value, connected: connected[$0.key] != nil) }.sorted { $0.name < $1.name }
    }

    /// Ends this instance's subscription of `consumer`, which subscribed elsewhere.
    func takeOver(_ consumer: String) {
        for other in subscriptions.values where other.consumer == consumer {
            remove(other)
            other.send(.takenOver(feed: name, consumer: consumer))
        }
    }

    func remove(_ subscription: Subscription) {
        subscriptions[ObjectIdentifier(subscription)] = nil
        subscription.dropRequests()
    }

    /// Delivers to `subscription` every page it wants that is ready and that its connection can
    /// take, answers its `next`s with `end` past the last page, then fetches what is missing.
    public func pump(_ subscription: Subscription) {
        deliver(to: subscription)
        // Since a look at every subscription found nothing missing, no call started, no
        // generation began and no subscription came: only this one moved, so only its pages can
        // be missing. A thousand consumers stepping page by page cost a thousand looks, not a
        // million.
        if let lastFullLook, lastFullLook == currentLook, firstMissingWantedPage(of: subscription) == nil { return }
        advanceUpstream()
    }

    /// Pages are queued a window at a time and written together, so a subscriber catching up on
    /// cached pages costs one write per window, not one per page.
    private func deliver(to subscription: Subscription) {
        defer { subscription.output?.flush() }
        while subscription.wantsPage, subscriptions[ObjectIdentifier(subscription)] != nil {
            let number = subscription.position + 1
            if let lastPage = paging.lastPage, number > lastPage {
                subscription.answerEnd(at: lastPage, feedEnded: true)
                return
            }
            guard let page = cache[number] else {
                if paging.caughtUpAt == number { subscription.answerEnd(at: number - 1, feedEnded: false) }
                return
            }
            guard let output = subscription.output else { return }
            if !output.canTakePage {
                output.flush()
                guard output.canTakePage else { return }
            }
            subscription.deliver(page)
            counters.pagesDelivered += 1
        }
    }

    /// Only the subscriptions that want a page are visited: when a prefetched page lands, a
    /// thousand consumers answered from the cache want none, and delivering to (and flushing)
    /// each of them held up the event loop for a quarter of a millisecond per page.
    private func pumpAll() {
        for subscription in subscriptions.values.filter(\.wantsPage) { deliver(to: subscription) }
        advanceUpstream()
    }

    // MARK: Generations and reconfiguration

    /// Pull-to-refresh: once the new generation is durable, drops every cached page, makes it
    /// current and tells every subscription, whose position goes back to 0. The `refreshed` event
    /// of `requester` (the asking connection's own subscription, if it has one) carries the
    /// request's id. `completion` gets the new generation, or why it could not be stored (then
    /// nothing changed).
    public func refresh(
        requester: Subscription? = nil, replyTo: JSONValue? = nil, completion: @escaping (Result<Int, StoreError>) -> Void = { _ in }
    ) {
        if keepsCursorsInFleet { return refreshFleet(requester: requester, replyTo: replyTo, completion: completion) }
        requestedGeneration += 1
        let newGeneration = requestedGeneration
        let seed = GenerationPaging.randomSeed()
        Task {
            if let store {
                do throws(StoreError) {
                    try await store.startGeneration(feed: name, generation: newGeneration, fingerprint: settings.contentFingerprint, seed: seed)
                } catch {
                    logger.error("cannot store generation \(newGeneration): \(error)")
                    requestedGeneration = max(generation, requestedGeneration - 1)
                    return completion(.failure(error))
                }
            }
            // A later refresh, stored first, has moved on already.
            guard newGeneration > generation, upstream.isRunning else { return completion(.success(generation)) }
            abandonCall()
            enterGeneration(newGeneration, seed: seed)
            for subscription in subscriptions.values {
                subscription.restart(generation: generation, replyTo: subscription === requester ? replyTo : nil)
            }
            pumpAll()
            completion(.success(newGeneration))
        }
    }

    /// Takes over every subscription of `old`, the feed this one replaces after a reload changed
    /// what its pages contain: the subscriptions start over at page 0 of a new generation and are
    /// told so. The old feed's adapter is discarded, never called again.
    func adoptSubscriptions(of old: Feed) {
        // A feed made after a change to its pages already follows the stored generation.
        if generation <= old.generation {
            enterGeneration(old.generation + 1, seed: GenerationPaging.randomSeed())
            storeGeneration()
        }
        for subscription in Array(old.subscriptions.values) {
            old.subscriptions[ObjectIdentifier(subscription)] = nil
            subscription.feed = self
            subscriptions[ObjectIdentifier(subscription)] = subscription
            subscription.restart(generation: generation, replyTo: nil)
        }
        old.close()
        pumpAll()
    }

    /// Applies a reload that changes how the feed is fetched but not what its pages contain
    /// (`timeout`, `poll`, `prefetch`, `retry_max_delay`, `cache_pages`, `cache_bytes`): the
    /// generation, the cache, every cursor and every subscription stay.
    func reconfigure(_ definition: FeedDefinition) {
        precondition(definition.settings.shapesSamePages(as: settings), "a change to what pages contain needs a new generation")
        settings = definition.settings
        retryPolicy.maximumDelay = settings.retryMaxDelay
        makeAdapter = definition.makeAdapter
        replacementAdapter = definition.adapter
        if case .waitingForNewData = upstream {
            // It waits on the old `poll`; look again with the new one.
            abandonCall()
        }
        if !upstream.hasCallInFlight { takeReplacementAdapter() }
        // A shorter `timeout` may put the call in flight's deadline before the watch's wake-up.
        deadlineWatch?.task.cancel()
        deadlineWatch = nil
        watchDeadlines()
        trimCache()
        pumpAll()
    }

    /// Makes `newGeneration` current and pages the source from its first page again.
    private func enterGeneration(_ newGeneration: Int, seed: String) {
        paging = GenerationPaging(number: newGeneration, addressing: adapter.pageAddressing, wraps: settings.wrap, seed: seed)
        requestedGeneration = max(requestedGeneration, newGeneration)
        pagesSentToStore = 0
        cache.removeAll()
        consecutiveFailures = 0
        onNewGeneration?()
    }

    /// Starts storing the current generation (consumers of the feed go back to 0 there); a
    /// failure is logged, and the next cursor write tries again.
    private func storeGeneration() {
        guard let store else { return }
        let (name, generation, seed, fingerprint, logger) = (name, generation, paging.seed, settings.contentFingerprint, logger)
        Task {
            do throws(StoreError) {
                try await store.startGeneration(feed: name, generation: generation, fingerprint: fingerprint, seed: seed)
            } catch {
                logger.error("cannot store generation \(generation): \(error)")
            }
        }
    }

    /// Ends every subscription and stops fetching: the feed was removed or replaced.
    func close() {
        publishedPagesWatch?.cancel()
        abandonCall()
        upstream = .stopped
        for subscription in Array(subscriptions.values) {
            remove(subscription)
            subscription.send(.removed(feed: name))
        }
        cache.removeAll()
        let adapters = [adapter] + (replacementAdapter.map { [$0] } ?? [])
        replacementAdapter = nil
        Task { for adapter in adapters { await adapter.shutdown() } }
    }

    // MARK: Choosing what to fetch

    /// How many pages ahead of its position one subscription may ask to have fetched.
    private var lookAheadLimit: Int { max(settings.cachePages / 2, 1) }

    /// The lowest page a subscription is waiting for right now that is not cached, if any.
    private func lowestMissingAwaitedPage() -> Int? {
        var lowest: Int?
        for subscription in subscriptions.values {
            guard let number = subscription.awaitedPage, cache[number] == nil, !paging.isPastEnd(number) else { continue }
            if lowest.map({ number < $0 }) ?? true { lowest = number }
        }
        return lowest
    }

    /// The lowest page some subscription wants (prefetch included) that is not cached, if any.
    private func lowestMissingWantedPage() -> Int? {
        var lowest: Int?
        for subscription in subscriptions.values {
            if let number = firstMissingWantedPage(of: subscription, below: lowest) { lowest = number }
        }
        return lowest
    }

    /// The first page below `bound` that `subscription` wants (prefetch included, so its awaited
    /// page too) and that is not cached, if any.
    private func firstMissingWantedPage(of subscription: Subscription, below bound: Int? = nil) -> Int? {
        guard let wanted = subscription.wantedPages(prefetch: settings.prefetch, limit: lookAheadLimit) else { return nil }
        for number in wanted {
            if paging.isPastEnd(number) { return nil }
            if let bound, number >= bound { return nil }
            if cache[number] == nil { return number }
        }
        return nil
    }

    /// What a look at every subscription depends on beyond the subscriptions' own positions:
    /// the pages a call brings and a cache eviction (both only under a new call, the eviction
    /// before its fetch), a new generation, a new subscription (one that replaced a removed one
    /// is looked at when it is pumped, which whoever announces it does). A reload's settings and
    /// anything else go through ``advanceUpstream()``, which forgets the last look.
    private struct FullLook: Equatable {
        let callID: Int
        let generation: Int
        let subscriptionCount: Int
    }

    private var currentLook: FullLook { FullLook(callID: lastCallID, generation: generation, subscriptionCount: subscriptions.count) }

    private func isWanted(_ number: Int) -> Bool {
        subscriptions.values.contains { $0.wantedPages(prefetch: settings.prefetch, limit: lookAheadLimit)?.contains(number) == true }
    }

    /// Whether a subscription is waiting for page `number` right now (not merely prefetching it).
    private func isAwaited(_ number: Int) -> Bool {
        subscriptions.values.contains { $0.awaitedPage == number }
    }

    /// Starts the one upstream call the feed needs next, if the upstream is free: fetching the
    /// page a subscriber waits for, else one to prefetch, or waiting for a live source's new data.
    private func advanceUpstream() {
        lastFullLook = nil
        guard case .idle = upstream else { return }
        takeReplacementAdapter()
        let awaited = lowestMissingAwaitedPage()
        guard let wanted = awaited ?? lowestMissingWantedPage() else {
            lastFullLook = currentLook
            return
        }
        guard let step = paging.step(toward: wanted) else { return }
        if step.page == paging.caughtUpAt {
            startWaitingForNewData(page: step.page, after: step.request)
            return
        }
        guard makeRoomInCache(urgent: awaited != nil) else { return }
        if startsOverForLostPage(step.page) || startReadingStoredPage(step.page, request: step.request, jumped: step.jumped) { return }
        // A page of a source that cannot fetch it again is stored before it is served: one at a time.
        let maxPages = adapter.reproducesPages ? runLength(from: step.page, toward: wanted) : 1
        startFetch(page: step.page, request: step.request, jumped: step.jumped, maxPages: maxPages)
    }

    /// The most pages one run of calls may bring (see ``PageFetch``).
    private static let maxRunPages = 32

    /// How many pages a run starting at `first` may bring: `first` (which has room already),
    /// then those after it that are on the way to `target` or wanted, and missing, as long as
    /// the cache has room for them, on a prefetch's terms (see ``makeRoomInCache(urgent:)``).
    private func runLength(from first: Int, toward target: Int) -> Int {
        let limits = cacheLimits
        var count = 1
        while count < Self.maxRunPages {
            let number = first + count
            guard cache[number] == nil, !paging.isPastEnd(number), number <= target || isWanted(number) else { break }
            var hasRoom = true
            while hasRoom, cache.wouldExceed(limits, adding: cache.averageCost * (count + 1), pages: count + 1) {
                hasRoom = evictOne(urgent: false)
            }
            guard hasRoom else { break }
            count += 1
        }
        return count
    }

    /// Keeps the cache within `cache_pages` and `cache_bytes` before a fetch. A prefetch only
    /// ever replaces pages nobody wants, or is skipped. A page a subscriber is waiting for (or one
    /// on the way to it) may also replace prefetched pages, furthest first, and is fetched even
    /// when every cached page is awaited: the limit is then exceeded by at most one page per
    /// subscription, since refusing it would stall those subscribers for good.
    private func makeRoomInCache(urgent: Bool) -> Bool {
        let limits = cacheLimits
        while cache.wouldExceed(limits, adding: cache.averageCost) {
            guard evictOne(urgent: urgent) else { return urgent }
        }
        return true
    }

    /// Gives up cached pages while the cache is over its limits (after a page arrived, or a reload
    /// lowered them), on the same terms as a prefetch.
    private func trimCache() {
        while cache.exceeds(cacheLimits), evictOne(urgent: false) {}
    }

    private func evictOne(urgent: Bool) -> Bool {
        let numbers = cache.numbers
        if let unwanted = numbers.first(where: { !isWanted($0) }) {
            cache.remove(unwanted)
            return true
        }
        if urgent, let prefetched = numbers.last(where: { !isAwaited($0) }) {
            cache.remove(prefetched)
            return true
        }
        return false
    }

    private var cacheLimits: PageCache.Limits { PageCache.Limits(pages: settings.cachePages, bytes: settings.cacheBytes) }

    // MARK: The upstream state machine

    private func nextCallID() -> Int {
        lastCallID += 1
        return lastCallID
    }

    /// `jumped`: the page is asked for by its number alone, its predecessor never fetched.
    /// `maxPages`: how many consecutive pages the call chain may bring (see ``PageFetch``).
    private func startFetch(page number: Int, request: PageRequest, jumped: Bool, maxPages: Int) {
        let id = nextCallID()
        let handOver = RunHandOver()
        let fetch = PageFetch(
            adapter: adapter, encoder: encoder, clock: clock, feed: name, generation: generation, number: number, request: request,
            maxPages: maxPages, handOver: handOver, wake: { Task { @MainActor in self.takeHandedOver(handOver, call: id) } },
            wrap: settings.wrap, fleet: membership == .joined ? fleet : nil)
        let startedAt = clock.now
        let task = Task {
            let run = await self.keepItems(of: await fetch.run(), fetchedBy: fetch, call: id)
            self.fetchReturned(id, run: run, handOver: handOver, startedAt: startedAt)
        }
        let deadline = startedAt + settings.timeout + (maxPages > 1 ? PageFetch.runBudget : .zero)
        upstream = .fetching(AdapterCall(id: id, page: number, request: request, jumped: jumped, task: task, deadline: deadline))
        watchDeadlines()
    }

    /// The instant the call in flight is to be given up at, if any.
    private var callDeadline: ContinuousClock.Instant? {
        switch upstream {
        case .fetching(let call), .draining(let call, _): call.deadline
        case .idle, .waitingForNewData, .backingOff, .stopped: nil
        }
    }

    /// Keeps one task per feed sleeping until the deadline of the call in flight. A call that
    /// returns in time leaves it asleep, and on waking it looks at whatever call is in flight
    /// then, so a busy feed costs one timer per `timeout`, not one per fetch.
    private func watchDeadlines() {
        guard deadlineWatch == nil, callDeadline != nil else { return }
        let id = nextCallID()
        let task = Task {
            while let deadline = self.callDeadline {
                guard (try? await self.clock.sleep(until: deadline)) != nil else { break }
                self.deadlinePassed()
            }
            if self.deadlineWatch?.id == id { self.deadlineWatch = nil }
        }
        deadlineWatch = (id, task)
    }

    private func deadlinePassed() {
        switch upstream {
        case .fetching(let call) where call.deadline.map({ $0 <= clock.now }) ?? false:
            fetchTimedOut(call)
        case .draining(let call, let retryAt) where call.deadline.map({ $0 <= clock.now }) ?? false:
            discardHungAdapter(call, retryAt: retryAt)
        default:
            break
        }
    }

    /// Files the pages a run in flight has handed over so far, and hands them out.
    private func takeHandedOver(_ handOver: RunHandOver, call id: Int) {
        guard case .fetching(let call) = upstream, call.id == id else { return }
        let pages = handOver.takeAll()
        guard !pages.isEmpty else { return }
        file(pages, of: call)
        trimCache()
        pumpAll()
    }

    private func fetchReturned(_ id: Int, run: PageFetch.Run, handOver: RunHandOver, startedAt: ContinuousClock.Instant) {
        switch upstream {
        case .fetching(let call) where call.id == id:
            upstream = .idle
            counters.upstreamRequests += run.adapterCalls
            let duration = clock.now - startedAt
            counters.upstreamDuration.record(duration)
            logger.debug("page \(call.page): upstream answered \(run.adapterCalls) call(s) in \(duration.wholeMilliseconds) ms")
            file(handOver.takeAll() + run.pages, of: call)
            switch run.ending {
            case nil:
                break
            case .notYet(let page):
                paging.caughtUpAt = page
                recovered()
            case .failure(let error, let page):
                // Backing off before the pages are handed out keeps the upstream busy, so handing
                // them out starts no other call.
                fail(page: page, error: error as? SourceError ?? .transient(String(describing: error)))
            }
            trimCache()
            pumpAll()
        case .draining(let call, let retryAt) where call.id == id:
            finishDraining(call, retryAt: retryAt)
        default:
            // The answer of a call whose adapter instance was discarded: nothing waits for it.
            break
        }
    }

    /// The fetch ran past `timeout`: it is cancelled and drained, and counts as a failure.
    private func fetchTimedOut(_ call: AdapterCall) {
        call.task.cancel()
        let error = SourceError.transient("page \(call.page): no answer within \(settings.timeout.wholeMilliseconds) ms")
        let delay = recordFailure(page: call.page, error: error)
        drain(call, retryAt: clock.now + delay)
    }

    private func startWaitingForNewData(page number: Int, after request: PageRequest) {
        let id = nextCallID()
        let adapter = adapter
        let poll = settings.poll ?? .seconds(1)
        // A shared feed's looks are taken in turns across the fleet (SPEC §8).
        let (fleet, name, generation) = (membership == .joined ? fleet : nil, name, generation)
        let task = Task {
            if let fleet {
                try? await fleet.awaitNewPage(feed: name, generation: generation, page: number) {
                    try await adapter.waitForNewData(after: request, pollInterval: poll)
                }
            } else {
                try? await adapter.waitForNewData(after: request, pollInterval: poll)
            }
            self.waitReturned(id)
        }
        upstream = .waitingForNewData(AdapterCall(id: id, page: number, request: request, jumped: false, task: task, deadline: nil))
    }

    private func waitReturned(_ id: Int) {
        switch upstream {
        case .waitingForNewData(let call) where call.id == id:
            upstream = .idle
            if paging.caughtUpAt == call.page { paging.caughtUpAt = nil }
            advanceUpstream()
        case .draining(let call, let retryAt) where call.id == id:
            finishDraining(call, retryAt: retryAt)
        default:
            break
        }
    }

    /// Stops using the call in flight, if any, because the feed moved on (refresh, reload, stop):
    /// it is cancelled and drained. A pending retry is dropped: the next call starts afresh.
    private func abandonCall() {
        switch upstream {
        case .fetching(let call), .waitingForNewData(let call):
            call.task.cancel()
            drain(call, retryAt: nil)
        case .draining(let call, _):
            drain(call, retryAt: nil)
        case .backingOff(_, let timer):
            timer.cancel()
            upstream = .idle
        case .idle, .stopped:
            break
        }
    }

    /// Waits for `call` to return before anything else is asked of the adapter. If it has not
    /// returned one `timeout` later, the adapter instance is discarded and a fresh one used.
    private func drain(_ call: AdapterCall, retryAt: ContinuousClock.Instant?) {
        var drained = call
        drained.deadline = clock.now + settings.timeout
        upstream = .draining(drained, retryAt: retryAt)
        watchDeadlines()
    }

    private func finishDraining(_ call: AdapterCall, retryAt: ContinuousClock.Instant?) {
        upstream = .idle
        if let retryAt, retryAt > clock.now { backOff(until: retryAt) }
        advanceUpstream()
    }

    private func discardHungAdapter(_ call: AdapterCall, retryAt: ContinuousClock.Instant?) {
        guard let makeAdapter else {
            logger.warning("the adapter has not returned from a call abandoned \(settings.timeout.wholeMilliseconds) ms ago; still waiting for it")
            return
        }
        do {
            let fresh = try makeAdapter()
            logger.warning("the adapter has not returned from a call abandoned \(settings.timeout.wholeMilliseconds) ms ago; replacing it")
            let hung = adapter
            adapter = fresh
            Task { await hung.shutdown() }
            upstream = .idle
            if let retryAt, retryAt > clock.now { backOff(until: retryAt) }
            advanceUpstream()
        } catch {
            logger.error("cannot replace a hung adapter: \(error)")
        }
    }

    private func backOff(until deadline: ContinuousClock.Instant) {
        let id = nextCallID()
        let timer = Task {
            guard (try? await self.clock.sleep(until: deadline)) != nil else { return }
            self.backOffEnded(id)
        }
        upstream = .backingOff(id: id, timer: timer)
    }

    private func backOffEnded(_ id: Int) {
        guard case .backingOff(let current, _) = upstream, current == id else { return }
        upstream = .idle
        advanceUpstream()
    }

    private func takeReplacementAdapter() {
        guard let replacement = replacementAdapter, !upstream.hasCallInFlight else { return }
        replacementAdapter = nil
        let previous = adapter
        adapter = replacement
        Task { await previous.shutdown() }
    }

    // MARK: Outcomes

    /// Files pages `call` fetched: what each says of the pages after it, and the page in the cache.
    /// `fromStore`: the page was read from the state directory (``startReadingStoredPage(_:request:jumped:)``), not fetched.
    private func file(_ pages: [FetchedPage], of call: AdapterCall, fromStore: Bool = false) {
        for fetched in pages {
            let page = fetched.page
            if !fromStore { counters.pagesFetched += 1 }
            // Only the run's first page can have been asked for by its number alone.
            let jumped = call.jumped && page.number == call.page
            paging.record(page: page.number, request: fetched.request, next: fetched.next, isEmpty: page.itemCount == 0, jumped: jumped)
            if !paging.isPastEnd(page.number) { cache.insert(page) }
        }
        if !pages.isEmpty { recovered() }
    }

    private func fail(page number: Int, error: SourceError) {
        let delay = recordFailure(page: number, error: error)
        backOff(until: clock.now + delay)
    }

    /// Counts a failure, tells the subscribers waiting for the page, and returns how long to
    /// wait before trying again.
    private func recordFailure(page number: Int, error: SourceError) -> Duration {
        consecutiveFailures = min(consecutiveFailures + 1, 1_000)
        counters.upstreamErrors += 1
        let delay = retryPolicy.delay(after: error, failures: consecutiveFailures)
        setHealth(FeedHealth(state: error.kind == .rejected ? .failing : .retrying, lastError: error.message))
        logger.warning("page \(number): \(error.message); retrying in \(delay.wholeMilliseconds) ms")
        for subscription in subscriptions.values where subscription.awaitedPage == number {
            subscription.send(.upstreamFailing(feed: name, message: error.message, retryIn: delay, replyTo: subscription.oldestReplyTo))
        }
        return delay
    }

    private func recovered() {
        consecutiveFailures = 0
        setHealth(.ok)
    }

    private func setHealth(_ newHealth: FeedHealth) {
        guard newHealth != health else { return }
        if health.state != .ok, newHealth.state == .ok { logger.notice("upstream recovered") }
        health = newHealth
        onHealthChange?()
    }
}

// MARK: - Pages kept in the store (sources that cannot fetch a page again)

extension Feed {
    /// What the store holds of the current generation, for a feed whose pages it may keep; nil for
    /// a shared feed of a fleet (the fleet's stream keeps its pages), or before the store has it.
    private var storedGeneration: StoredFeed? {
        guard fleet == nil, let stored = store?.feed(name), stored.generation == generation else { return nil }
        return stored
    }

    /// For a source that cannot fetch a page again (``SourceAdapter/reproducesPages`` false): stores
    /// the page `call` fetched, with its token and items, before anyone is sent it, so that it is
    /// served as it was after a restart or once the cache gave it up. Returns the fetch's outcome,
    /// which a page that cannot be stored (the disk is full) turns into a failure: the page is not
    /// served, since after a restart it could not be served again, and the fetch is retried with
    /// the feed's backoff while its subscribers are told why.
    fileprivate func keepItems(of run: PageFetch.Run, fetchedBy fetch: PageFetch, call id: Int) async -> PageFetch.Run {
        guard !fetch.adapter.reproducesPages, let store, fleet == nil, let fetched = run.pages.first, run.pages.count == 1,
            case .fetching(let call) = upstream, call.id == id, fetched.page.number > pagesSentToStore
        else { return run }
        let (page, next) = (fetched.page, fetched.next)
        let stored = FleetPage(
            feed: name, generation: generation, number: page.number, line: page.publishedLine, itemCount: page.itemCount, next: next,
            sourcePage: fetched.request.page)
        do throws(StoreError) {
            if store.feed(name)?.generation != generation {
                try await store.startGeneration(feed: name, generation: generation, fingerprint: settings.contentFingerprint, seed: paging.seed)
            }
            guard generation == fetch.generation else { return run }
            try await storePages(through: page.number, fetched: NewPage(token: next.token, body: StoredPageBody.encode(stored)))
        } catch {
            var unserved = run
            unserved.pages = []
            unserved.ending = .failure(
                SourceError.transient("page \(page.number) cannot be stored, and its source cannot give it again: \(error)"), page: page.number)
            return unserved
        }
        return run
    }

    /// Reads page `number` from the store instead of asking the source, if the store keeps its
    /// items; returns whether it does. The read takes the upstream's place in ``UpstreamState``, so
    /// it is bounded by `timeout` and its answer is dropped if the feed moved on meanwhile.
    private func startReadingStoredPage(_ number: Int, request: PageRequest, jumped: Bool) -> Bool {
        guard let store, let stored = storedGeneration, stored.keepsItems(of: number) else { return false }
        let id = nextCallID()
        let (name, generation, wrap) = (name, generation, settings.wrap)
        let task = Task {
            let body = try? await store.pageBody(feed: name, generation: generation, page: number)
            self.storedPageRead(id, body.flatMap { StoredPageBody.decode($0, feed: name, generation: generation, number: number, wrap: wrap) })
        }
        upstream = .fetching(AdapterCall(id: id, page: number, request: request, jumped: jumped, task: task, deadline: clock.now + settings.timeout))
        watchDeadlines()
        return true
    }

    private func storedPageRead(_ id: Int, _ stored: (page: Page, next: NextPage)?) {
        switch upstream {
        case .fetching(let call) where call.id == id:
            upstream = .idle
            guard let stored else {
                startOver(because: "page \(call.page): its stored items cannot be read, and the source cannot fetch it again as it was")
                return
            }
            file([FetchedPage(page: stored.page, next: stored.next, request: call.request)], of: call, fromStore: true)
            trimCache()
            pumpAll()
        case .draining(let call, let retryAt) where call.id == id:
            finishDraining(call, retryAt: retryAt)
        default:
            break
        }
    }

    /// A page whose items the store dropped to keep within `daemon.state_page_bytes`, of a source
    /// that cannot fetch it again, cannot be served as it was: fetching it again could leave out
    /// items a consumer was sent and never acknowledged. So the feed starts a new generation
    /// (``startOver(because:)``). Returns whether it does, or is doing so already (then nothing is
    /// fetched meanwhile).
    private func startsOverForLostPage(_ number: Int) -> Bool {
        if isStartingOver { return true }
        guard let stored = storedGeneration, stored.lostItems(of: number) else { return false }
        startOver(
            because: "page \(number): its stored items were dropped to keep within daemon.state_page_bytes, and the source cannot fetch it again as it was")
        return true
    }

    /// Starts a new generation, as a `refresh` does, with every consumer back at 0 (SPEC §3:
    /// duplicates, never a gap), since a page of this one cannot be served as it was.
    private func startOver(because reason: String) {
        guard !isStartingOver else { return }
        isStartingOver = true
        logger.warning("\(reason); starting a new generation with every consumer at 0")
        refresh { result in
            Task {
                // The store refused the new generation (a full disk, say): try again in a while.
                if case .failure = result { try? await self.clock.sleep(until: self.clock.now + .seconds(1)) }
                self.isStartingOver = false
                self.pumpAll()
            }
        }
    }
}

// MARK: - The fleet (SPEC §8)

extension Feed {
    /// Whether consumers' cursors are the fleet's: a shared feed of a daemon in a fleet, unless
    /// the fleet serves another definition of it. Then the fleet must be reached for every
    /// consumer operation (they answer `store_failed` meanwhile).
    public var keepsCursorsInFleet: Bool { fleet != nil && membership != .alone }

    /// Where this feed stands with the fleet, for `status`: `joined`, `joining` (served alone
    /// until the fleet answers) or `alone` (the fleet serves another definition); nil if not shared.
    public var fleetState: String? {
        guard fleet != nil else { return nil }
        return switch membership {
        case .joining: "joining"
        case .joined: "joined"
        case .alone: "alone"
        }
    }

    /// Whether consumers' cursors are kept anywhere (the fleet, or the local store).
    public var keepsCursors: Bool { keepsCursorsInFleet || store != nil }

    /// Makes this shared feed part of `fleet`: it joins the fleet's generation as soon as the
    /// fleet can be reached, and serves alone until then. A feed that gathers others (`merge`)
    /// is computed on each instance from its members (SPEC §8), which are shared themselves.
    func attach(to fleet: FleetLink) {
        guard settings.shared, memberFeeds.isEmpty, self.fleet == nil else { return }
        self.fleet = fleet
        joinFleet()
    }

    /// Asks the fleet for its generation of the feed, again every second until it answers.
    private func joinFleet() {
        guard let fleet, membership == .joining, !isJoining, upstream.isRunning else { return }
        isJoining = true
        let (name, fingerprint, number, seed) = (name, settings.contentFingerprint, generation, paging.seed)
        Task {
            do throws(FleetError) {
                let generation = try await fleet.join(feed: name, fingerprint: fingerprint, generation: number, seed: seed)
                isJoining = false
                joined(generation)
            } catch {
                isJoining = false
                if fleet.isConnected, !joinFailureLogged {
                    joinFailureLogged = true
                    logger.warning("cannot join the fleet \"\(fleet.name)\" yet, serving alone and trying again every second: \(error)")
                }
                try? await clock.sleep(until: clock.now + .seconds(1))
                joinFleet()
            }
        }
    }

    private func joined(_ fleetGeneration: FleetGeneration) {
        guard let fleet, membership == .joining, upstream.isRunning else { return }
        guard fleetGeneration.fingerprint == settings.contentFingerprint else {
            membership = .alone
            logger.warning(
                "serving this feed alone: the fleet \"\(fleet.name)\" serves another definition of it "
                    + "(its source, options or wrap differ; fingerprint \(fleetGeneration.fingerprint), here \(settings.contentFingerprint))")
            return
        }
        membership = .joined
        logger.notice("joined the fleet \"\(fleet.name)\" at generation \(fleetGeneration.number)")
        publishedPagesWatch = Task {
            for await page in fleet.publishedPages(of: name) { self.receivePublished(page) }
        }
        enter(fleetGeneration, replyTo: nil, requester: nil)
    }

    /// A generation the fleet started (a refresh on any instance): every subscription restarts
    /// in it, as after a local refresh.
    func adoptFleetGeneration(_ fleetGeneration: FleetGeneration) {
        guard membership == .joined, fleetGeneration.number > generation else { return }
        guard fleetRefreshesInFlight == 0 else {
            if fleetGeneration.number > heldBackGeneration?.number ?? 0 { heldBackGeneration = fleetGeneration }
            return
        }
        enter(fleetGeneration, replyTo: nil, requester: nil)
    }

    private func enter(_ fleetGeneration: FleetGeneration, replyTo: JSONValue?, requester: Subscription?) {
        guard fleetGeneration.fingerprint == settings.contentFingerprint,
            fleetGeneration.number != generation || fleetGeneration.seed != paging.seed
        else { return }
        abandonCall()
        enterGeneration(fleetGeneration.number, seed: fleetGeneration.seed)
        for subscription in subscriptions.values {
            subscription.restart(generation: generation, replyTo: subscription === requester ? replyTo : nil)
        }
        pumpAll()
    }

    /// `refresh` of a shared feed: the fleet's next generation, which every instance adopts.
    private func refreshFleet(requester: Subscription?, replyTo: JSONValue?, completion: @escaping (Result<Int, StoreError>) -> Void) {
        let (name, seed, fingerprint, current) = (name, GenerationPaging.randomSeed(), settings.contentFingerprint, generation)
        fleetRefreshesInFlight += 1
        Task {
            let outcome: Result<FleetGeneration, StoreError>
            do throws(StoreError) {
                outcome = .success(
                    try await fleetCall { fleet throws(FleetError) in
                        try await fleet.refresh(feed: name, replacing: current, seed: seed, fingerprint: fingerprint)
                    })
            } catch {
                outcome = .failure(error)
            }
            fleetRefreshesInFlight -= 1
            if case .success(let fleetGeneration) = outcome, fleetGeneration.number > generation {
                enter(fleetGeneration, replyTo: replyTo, requester: requester)
            }
            if fleetRefreshesInFlight == 0, let held = heldBackGeneration {
                heldBackGeneration = nil
                adoptFleetGeneration(held)
            }
            switch outcome {
            case .success: completion(.success(generation))
            case .failure(let error):
                logger.error("cannot start a new generation in the fleet: \(error)")
                completion(.failure(error))
            }
        }
    }

    /// A page some instance published: cached for the subscribers here, and the feed pages on
    /// from it as if it had fetched it.
    private func receivePublished(_ published: FleetPage) {
        guard membership == .joined, published.generation == generation, cache[published.number] == nil,
            !paging.isPastEnd(published.number), let page = Page(published: published, wrap: settings.wrap)
        else { return }
        // On a sequential source the page can only be filed where the feed knows how it was asked
        // for; past a gap it is only cached, and filed when the feed reaches it.
        if let step = paging.step(toward: published.number), step.page == published.number {
            paging.record(page: page.number, request: step.request, next: published.next, isEmpty: page.itemCount == 0, jumped: step.jumped)
        }
        // A fetch of this page under way here, waiting for this very publication, is woken by
        // the fleet link and returns it in a moment; its subscribers need not wait for that.
        cache.insert(page)
        // The fleet got past whatever this instance was retrying.
        recovered()
        trimCache()
        pumpAll()
    }

    /// Where a consumer subscribing now starts, once durable (SPEC §5, §8): for a feed whose
    /// cursors are the fleet's, the consumer is claimed (taken over from another instance) and
    /// starts after `after`, or else after its fleet-wide cursor; otherwise after `start`, stored.
    public func confirmConsumer(_ consumer: String, after: Int?, start: Int) async throws(StoreError) -> Int {
        guard keepsCursorsInFleet else {
            try await storeStartingPoint(consumer: consumer, after: start)
            return start
        }
        return try await fleetCall { fleet throws(FleetError) in
            try await fleet.claimConsumer(feed: name, consumer: consumer)
            if let after {
                try await fleet.advanceCursor(feed: name, consumer: consumer, to: FleetCursor(generation: generation, page: after))
                return PageNumber.clamped(after)
            }
            guard let cursor = try await fleet.cursor(feed: name, consumer: consumer), cursor.generation == generation else { return 0 }
            return PageNumber.clamped(cursor.page)
        }
    }

    /// Forgets `consumer`'s fleet-wide cursor.
    public func forgetFleetCursor(_ consumer: String) async throws(StoreError) {
        try await fleetCall { fleet throws(FleetError) in try await fleet.forgetCursor(feed: name, consumer: consumer) }
    }

    /// Runs `body` with the fleet the feed has joined; fails as the store would while it has not.
    private func fleetCall<Value>(_ body: (FleetLink) async throws(FleetError) -> Value) async throws(StoreError) -> Value {
        guard let fleet else { throw StoreError.unavailable("feed \(name) is not shared") }
        guard membership == .joined else {
            throw StoreError.unavailable("feed \(name) has not joined the fleet \"\(fleet.name)\" yet: it cannot be reached")
        }
        do {
            return try await body(fleet)
        } catch {
            throw StoreError.unavailable(error.description)
        }
    }
}

/// One consumer's cursor writes: the one in flight with everyone waiting for it, and the cursor
/// to write next with everyone waiting for that.
private struct CursorWrites {
    private(set) var inFlight = false
    private(set) var next: (cursor: Int, generation: Int)?
    private var waiters: [(Result<Void, StoreError>) -> Void] = []
    private var inFlightWaiters: [(Result<Void, StoreError>) -> Void] = []

    mutating func queue(cursor: Int, generation: Int, waiter: @escaping (Result<Void, StoreError>) -> Void) {
        next = (cursor, generation)
        waiters.append(waiter)
    }

    /// The next cursor goes out: its waiters now wait for the write in flight.
    mutating func start() {
        inFlight = true
        next = nil
        inFlightWaiters = waiters
        waiters = []
    }

    /// The write in flight is done: returns who waited for it.
    mutating func finish() -> [(Result<Void, StoreError>) -> Void] {
        inFlight = false
        defer { inFlightWaiters = [] }
        return inFlightWaiters
    }
}

/// The one thing a feed's upstream is doing. A call to the adapter starts only from `idle`.
private enum UpstreamState {
    /// Nothing in progress: the next call may start.
    case idle
    /// A fetch whose answer the feed is waiting for.
    case fetching(AdapterCall)
    /// A live source had nothing past its last page; the adapter is waiting for new data.
    case waitingForNewData(AdapterCall)
    /// A call the feed no longer wants an answer from (refresh, reload, timeout), still running:
    /// nothing else is asked of the adapter until it returns. `retryAt`: when the next fetch may
    /// start, if the call was abandoned as a failure.
    case draining(AdapterCall, retryAt: ContinuousClock.Instant?)
    /// The last fetch failed; the next one waits for the timer.
    case backingOff(id: Int, timer: Task<Void, Never>)
    /// The feed was closed.
    case stopped

    /// False once the feed is closed.
    var isRunning: Bool {
        if case .stopped = self { false } else { true }
    }

    var hasCallInFlight: Bool {
        switch self {
        case .fetching, .waitingForNewData, .draining: true
        case .idle, .backingOff, .stopped: false
        }
    }
}

/// A call to the adapter in flight, and when it is given up.
private struct AdapterCall {
    let id: Int
    /// The feed page it is for.
    let page: Int
    let request: PageRequest
    /// Asked for by number alone (see ``GenerationPaging/step(toward:)``).
    let jumped: Bool
    let task: Task<Void, Never>
    /// A fetch's timeout, or when a drained call's adapter instance is replaced; nil while
    /// waiting for new data, which the adapter bounds by the poll interval.
    var deadline: ContinuousClock.Instant?
}

/// What a feed knows of its current generation's pages: how to ask the source for each, and
/// where the feed ends (for good, or for now on a live source).
struct GenerationPaging {
    let number: Int
    /// The generation's ``PageRequest/seed``.
    let seed: String
    private let addressing: PageAddressing
    private let wraps: Bool
    /// How to ask for pages whose predecessor has been fetched (and page 1). For a directly
    /// addressable source only the one after the furthest fetched is kept: any other is built
    /// from its number.
    private var requests: [Int: PageRequest] = [:]
    /// The highest page whose request is known; on a sequential source every page up to it is.
    private var furthestKnown = 1
    /// The last page, once a source that ends has said so.
    private(set) var lastPage: Int?
    /// A live source said page N does not exist yet; `next` past N − 1 answers `end` until it does.
    var caughtUpAt: Int?

    /// `storedTokens[k − 1]`: the token page k returned, as the store kept it, so the pages
    /// after it can be asked for again after a restart (a `wrap` feed starts from page 1: its
    /// feed page numbers do not say which source page comes next).
    init(number: Int, addressing: PageAddressing, wraps: Bool, seed: String = GenerationPaging.randomSeed(), storedTokens: [String?] = []) {
        self.number = number
        self.seed = seed
        self.addressing = addressing
        self.wraps = wraps
        requests[1] = PageRequest(page: 1, token: nil, generation: number, seed: seed)
        guard !wraps, addressing == .sequential else { return }
        for (index, token) in storedTokens.enumerated() where index + 2 <= PageNumber.maximum {
            requests[index + 2] = PageRequest(page: index + 2, token: token, generation: number, seed: seed)
        }
        furthestKnown = storedTokens.count + 1
    }

    /// The token page `page` returned, if the feed still knows it (a directly addressable
    /// source needs none: its pages are asked for by number).
    func token(returnedBy page: Int) -> String? {
        requests[page + 1]?.token
    }

    static func randomSeed() -> String {
        String(UInt64.random(in: 0...UInt64.max), radix: 16)
    }

    func isPastEnd(_ page: Int) -> Bool {
        lastPage.map { page > $0 } ?? false
    }

    /// The fetch that brings the feed closer to `page`: that page itself where its request is
    /// known or can be built (`jumped`: built from its number, no page before it fetched), else
    /// (on a sequential source) the first page not yet fetched.
    func step(toward page: Int) -> (page: Int, request: PageRequest, jumped: Bool)? {
        if let request = requests[page] { return (page, request, false) }
        if addressing == .direct, !wraps {
            return (page, PageRequest(page: page, token: nil, generation: number, seed: seed), true)
        }
        guard furthestKnown < page, let request = requests[furthestKnown] else { return nil }
        return (furthestKnown, request, false)
    }

    /// Files what a fetch of `page` said about the pages after it.
    mutating func record(page: Int, request: PageRequest, next: NextPage, isEmpty: Bool, jumped: Bool) {
        if caughtUpAt == page { caughtUpAt = nil }
        let following: PageRequest?
        switch next {
        case .more(let token):
            following = PageRequest(page: request.page + 1, token: token, generation: number, seed: seed)
        case .later(let token):
            following = PageRequest(page: request.page + 1, token: token, generation: number, seed: seed)
            caughtUpAt = page + 1
        case .end where wraps && !(isEmpty && request.page == 1):
            following = PageRequest(page: 1, token: nil, generation: number, seed: seed)
        case .end:
            following = nil
            // A page jumped to past the source's end comes back empty: the feed ends before it.
            // Otherwise this page is the last.
            let endsBefore = isEmpty && jumped && page > 1
            let last = endsBefore ? page - 1 : page
            lastPage = min(lastPage ?? last, last)
        }
        if addressing == .direct, !wraps { requests[page] = nil }
        if let following, page < PageNumber.maximum {
            requests[page + 1] = following
            furthestKnown = max(furthestKnown, page + 1)
        }
    }
}

/// One adapter call chain, run off the main actor together with encoding its pages, so the main
/// actor only files the outcome and neither parsing nor encoding holds up its replies.
///
/// A run asks for up to `maxPages` consecutive pages, one call at a time, each with the token
/// the previous one returned, and only while pages come fast (no call starts more than
/// ``runBudget`` after the first). Its first page, the one a subscriber may be waiting for, is
/// handed over at once (see ``RunHandOver``); the others come with the run's end. So a fast
/// source (a local file) costs two hops to the main actor per run, not one per page, and a page
/// waits at most for calls that started within the budget.
private struct PageFetch: Sendable {
    let adapter: any SourceAdapter
    let encoder: any PageEncoder
    let clock: any EngineClock
    let feed: String
    let generation: Int
    let number: Int
    let request: PageRequest
    /// How many pages the run may bring: `number` and the wanted, missing pages right after it
    /// (see ``Feed/runLength(from:toward:)``).
    let maxPages: Int
    let handOver: RunHandOver
    /// Wakes the feed to take what ``handOver`` holds.
    let wake: @Sendable () -> Void
    /// The feed's `wrap`: after the source's last page it starts over, unless it is empty.
    let wrap: Bool
    /// The fleet of a shared feed that joined one: the page is fetched once for all of it.
    let fleet: FleetLink?

    /// How long a run keeps starting calls. Every call still gets the feed's whole `timeout`:
    /// the run's deadline is its start plus this plus `timeout`.
    static let runBudget = Duration.milliseconds(1)

    /// How a run ended: the pages not handed over before (each with the request it answered),
    /// then why it stopped, if not after a page (a live source's "not yet", or a failure).
    struct Run {
        var pages: [FetchedPage] = []
        var ending: Ending?
        /// Calls this instance made to the adapter (none for a page taken from the fleet).
        var adapterCalls = 0
    }

    /// Why a run stopped short of a page, and at which page.
    enum Ending {
        case notYet(page: Int)
        case failure(any Error, page: Int)
    }

    /// For a shared feed: the page the fleet published, else fetched here under its lease and
    /// published, else the one its holder publishes (see ``FleetLink/obtainPage(feed:generation:page:fetch:)``);
    /// fetched here alone while the fleet cannot be reached. A shared feed's run is one page:
    /// each page has its own lease.
    func run() async -> Run {
        guard let fleet else { return await runFromSource() }
        var run = Run()
        do {
            let outcome = try await fleet.obtainPage(feed: feed, generation: generation, page: number) {
                guard case .page(let page, let next) = try await askSource(request, page: number) else { return nil }
                return FleetPage(
                    feed: feed, generation: generation, number: number, line: page.publishedLine, itemCount: page.itemCount, next: next,
                    sourcePage: request.page)
            }
            switch outcome {
            case .page(let published, let fetchedHere):
                run.adapterCalls = fetchedHere ? 1 : 0
                guard let page = Page(published: published, wrap: wrap) else {
                    run.ending = .failure(SourceError.transient("the fleet's page \(number) of generation \(generation) is not a page line"), page: number)
                    return run
                }
                run.pages = [FetchedPage(page: page, next: published.next, request: request)]
            case .notYet:
                run.adapterCalls = 1
                run.ending = .notYet(page: number)
            case .unreachable:
                return await runFromSource()
            }
        } catch {
            // What `obtainPage` throws is the adapter's failure, or the end of a wait (cancelled).
            run.adapterCalls = error is CancellationError ? 0 : 1
            run.ending = .failure(error, page: number)
        }
        return run
    }

    private func runFromSource() async -> Run {
        var run = Run()
        let started = clock.now
        var request = request
        while true {
            let number = number + run.adapterCalls
            run.adapterCalls += 1
            do {
                switch try await askSource(request, page: number) {
                case .notYet:
                    run.ending = .notYet(page: number)
                    return run
                case .page(let page, let next):
                    let fetched = FetchedPage(page: page, next: next, request: request)
                    // Only `more` says for sure which request comes next (see GenerationPaging.record).
                    guard case .more(let token) = next, run.adapterCalls < maxPages, !Task.isCancelled,
                        clock.now - started < Self.runBudget
                    else {
                        run.pages.append(fetched)
                        return run
                    }
                    handOver.put(fetched)
                    if run.adapterCalls == 1 { wake() }
                    request = PageRequest(page: request.page + 1, token: token, generation: generation, seed: request.seed)
                }
            } catch {
                run.ending = .failure(error, page: number)
                return run
            }
        }
    }

    private enum Answer {
        case page(Page, next: NextPage)
        case notYet
    }

    private func askSource(_ request: PageRequest, page number: Int) async throws -> Answer {
        switch try await adapter.fetch(request) {
        case .notYet:
            return .notYet
        case .page(let items, let next):
            let isLast = Page.isLast(next: next, wrap: wrap, isEmpty: items.isEmpty, sourcePage: request.page)
            let page = Page(feed: feed, generation: generation, number: number, items: items, isLast: isLast, encoder: encoder)
            return .page(page, next: next)
        }
    }
}

/// A page a run fetched, with the request it answered and what it said of the next.
struct FetchedPage: Sendable {
    let page: Page
    let next: NextPage
    let request: PageRequest
}

/// The pages a run in flight has fetched that its feed has not taken yet.
final class RunHandOver: Sendable {
    private let pages = Locked([FetchedPage]())

    func put(_ page: FetchedPage) {
        pages.withLock { $0.append(page) }
    }

    /// Everything handed over so far, in order.
    func takeAll() -> [FetchedPage] {
        pages.withLock { pages in
            defer { pages = [] }
            return pages
        }
    }
}

/// How a feed's upstream is doing, for `status` and systemd's STATUS line.
public struct FeedHealth: Sendable, Equatable {
    public enum State: String, Sendable {
        case ok, retrying, failing
    }

    public var state: State
    /// What the last failure was, while the feed is not ok.
    public var lastError: String?

    public static let ok = FeedHealth(state: .ok, lastError: nil)
}

/// Where a shared feed stands with the fleet of its daemon.
private enum FleetMembership {
    /// Not joined yet (the fleet was not reached so far): served alone meanwhile.
    case joining
    /// Serving the fleet's generation, sharing its pages and cursors.
    case joined
    /// The fleet serves another definition of the feed: this instance serves it alone.
    case alone
}
