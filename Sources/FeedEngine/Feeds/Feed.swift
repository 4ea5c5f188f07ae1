import FeedKit

/// One configured feed at run time: its page cache, its single upstream fetcher and its subscriptions.
///
/// Everything here runs on the main actor, so the cache, the positions of every subscription and
/// the fetch state have one owner. Only the adapter's `fetch` and the encoding of its page run
/// elsewhere; the page comes back here tagged with the generation it was started in, and a stale
/// one is dropped.
///
/// Fetching is demand-driven: the feed fetches the lowest page that some subscription wants
/// (see ``Subscription/wantedPages(prefetch:)``) and is not cached, one request at a time, so any
/// number of subscribers at the same page cause one upstream request, and nothing is fetched while
/// nobody moves.
@MainActor
public final class Feed {
    public let settings: FeedSettings
    public var name: String { settings.name }
    let adapter: any SourceAdapter
    private let encoder: any PageEncoder
    let logger: Logger
    /// Where consumer cursors and the generation are kept; nil runs without durable state.
    let store: ConsumerStore?
    /// Called whenever ``health`` changes, for systemd's STATUS line.
    var onHealthChange: (() -> Void)?

    public private(set) var generation: Int
    private var cache: [Int: Page] = [:]
    /// How to ask the source for each feed page whose predecessor has been fetched.
    private var sourceCursors: [Int: PageRequest] = [:]
    /// The last page of a finite source, once fetched.
    private var lastPage: Int?
    /// A live source answered `notYet` for this page; `next` past it answers `end` until new data comes.
    private var caughtUpAt: Int?
    private var subscriptions: [ObjectIdentifier: Subscription] = [:]
    /// The one upstream task in progress: a fetch, a backoff before the next try, or waiting for
    /// a live source. A new fetch starts only when it is nil.
    private var upstreamTask: Task<Void, Never>?
    private var failedAttempts = 0

    public private(set) var health: FeedHealth = .ok
    public private(set) var fetchedPages = 0
    public private(set) var upstreamRequests = 0
    public internal(set) var counters = FeedCounters()

    init(definition: FeedDefinition, store: ConsumerStore?, encoder: any PageEncoder, logger: Logger) {
        settings = definition.settings
        adapter = definition.adapter
        self.encoder = encoder
        self.store = store
        self.logger = logger.forFeed(definition.settings.name)
        generation = store?.generations[definition.settings.name] ?? 1
        sourceCursors[1] = PageRequest(page: 1, token: nil, generation: generation)
    }

    public var cachedPages: Int { cache.count }
    public var reachedEnd: Bool { lastPage != nil }
    public var subscriberCount: Int { subscriptions.count }
    public var allSubscriptions: [Subscription] { Array(subscriptions.values) }

    // MARK: Subscriptions

    /// Where a new subscription starts: after `after` if given, else after a consumer's stored cursor, else 0.
    public func startingPoint(consumer: String?, after: Int?) -> Int {
        after ?? consumer.flatMap { store?.cursor(feed: name, consumer: $0) } ?? 0
    }

    /// Starts a subscription after page `after` of the current generation. A consumer's starting
    /// point is stored, and a subscription of the same consumer elsewhere is taken over. Pages
    /// flow once the caller, having announced the subscription, calls ``pump(_:)``.
    public func subscribe(output: any SubscriptionOutput, consumer: String?, after: Int, follows: Bool) throws(StoreError) -> Subscription {
        if let consumer {
            try store?.store(feed: name, consumer: consumer, cursor: after)
            for other in subscriptions.values where other.consumer == consumer {
                remove(other)
                other.send(.takenOver(feed: name, consumer: consumer))
            }
        }
        let subscription = Subscription(feed: self, output: output, consumer: consumer, after: after, follows: follows)
        subscriptions[ObjectIdentifier(subscription)] = subscription
        return subscription
    }

    /// Every consumer of this feed, connected or not, with its cursor.
    public var consumers: [(name: String, cursor: Int, connected: Bool)] {
        let connected = Dictionary(subscriptions.values.compactMap { subscription in subscription.consumer.map { ($0, subscription.cursor) } },
            uniquingKeysWith: { first, _ in first })
        var all = Dictionary(store?.consumers(of: name).map { ($0.name, $0.cursor) } ?? [], uniquingKeysWith: { first, _ in first })
        all.merge(connected) { _, live in live }
        return all.map { (name: $0.key, cursor: $0.value, connected: connected[$0.key] != nil) }.sorted { $0.name < $1.name }
    }

    func remove(_ subscription: Subscription) {
        subscriptions[ObjectIdentifier(subscription)] = nil
        subscription.pendingNexts.removeAll()
    }

    /// Delivers to `subscription` every page it wants that is ready and that its connection can
    /// take, answers its `next`s with `end` past the last page, then fetches what is missing.
    public func pump(_ subscription: Subscription) {
        deliver(to: subscription)
        fetchIfNeeded()
    }

    /// Pages are queued a window at a time and written together, so a subscriber catching up on
    /// cached pages costs one write per window, not one per page.
    private func deliver(to subscription: Subscription) {
        defer { subscription.output?.flush() }
        while subscription.wantsPage, subscriptions[ObjectIdentifier(subscription)] != nil {
            let number = subscription.position + 1
            if let lastPage, number > lastPage {
                answerEnd(subscription, at: lastPage)
                return
            }
            guard let page = cache[number] else {
                if caughtUpAt == number { answerEnd(subscription, at: number - 1) }
                return
            }
            guard let output = subscription.output else { return }
            if !output.canTakePage {
                output.flush()
                guard output.canTakePage else { return }
            }
            let replyTo = subscription.pendingNexts.first?.replyTo
            if !subscription.pendingNexts.isEmpty {
                subscription.pendingNexts[0].remaining -= 1
                if subscription.pendingNexts[0].remaining == 0 { subscription.pendingNexts.removeFirst() }
            }
            subscription.position = number
            counters.pagesDelivered += 1
            subscription.send(.page(page, replyTo: replyTo))
        }
    }

    /// Answers every outstanding `next` with `end`; a follower hears it once.
    private func answerEnd(_ subscription: Subscription, at page: Int) {
        let pending = subscription.pendingNexts
        subscription.pendingNexts.removeAll()
        for request in pending {
            subscription.send(.end(feed: name, page: page, replyTo: request.replyTo))
        }
        if subscription.follows, pending.isEmpty, !subscription.toldEnd, lastPage != nil {
            subscription.toldEnd = true
            subscription.send(.end(feed: name, page: page, replyTo: nil))
        }
    }

    // MARK: Refresh

    /// Pull-to-refresh: drops every cached page, starts a new generation and tells every
    /// subscription, whose position goes back to 0. The `refreshed` event of `requester` (the
    /// asking connection's own subscription, if it has one) carries the request's id.
    public func refresh(requester: Subscription? = nil, replyTo: JSONValue? = nil) {
        upstreamTask?.cancel()
        upstreamTask = nil
        enterGeneration(generation + 1)
        cache.removeAll()
        lastPage = nil
        caughtUpAt = nil
        failedAttempts = 0
        for subscription in subscriptions.values {
            restart(subscription, replyTo: subscription === requester ? replyTo : nil)
        }
        pumpAll()
    }

    /// Takes over every subscription of `old`, the feed this one replaces after a reload changed
    /// its config: the subscriptions start over at page 0 of a new generation and are told so.
    func adoptSubscriptions(of old: Feed) {
        enterGeneration(old.generation + 1)
        for subscription in Array(old.subscriptions.values) {
            old.subscriptions[ObjectIdentifier(subscription)] = nil
            subscription.feed = self
            subscriptions[ObjectIdentifier(subscription)] = subscription
            restart(subscription, replyTo: nil)
        }
        old.close()
        pumpAll()
    }

    /// Makes `newGeneration` current, durably (consumers of the feed go back to 0 in the store),
    /// and pages the source from its first page again.
    private func enterGeneration(_ newGeneration: Int) {
        generation = newGeneration
        do {
            try store?.startGeneration(generation, of: name)
        } catch {
            logger.error("cannot store the new generation: \(error)")
        }
        sourceCursors = [1: PageRequest(page: 1, token: nil, generation: generation)]
    }

    /// Puts `subscription` back at page 0 of the current generation and tells it so.
    private func restart(_ subscription: Subscription, replyTo: JSONValue?) {
        subscription.position = 0
        subscription.cursor = 0
        subscription.toldEnd = false
        subscription.send(.refreshed(feed: name, generation: generation, replyTo: replyTo))
    }

    /// Ends every subscription and stops fetching: the feed was removed or replaced.
    func close() {
        upstreamTask?.cancel()
        upstreamTask = nil
        for subscription in Array(subscriptions.values) {
            remove(subscription)
            subscription.send(.removed(feed: name))
        }
        let adapter = adapter
        Task { await adapter.shutdown() }
    }

    private func pumpAll() {
        for subscription in Array(subscriptions.values) { deliver(to: subscription) }
        fetchIfNeeded()
    }

    // MARK: Fetching

    /// The lowest page some subscription wants that is not cached, if any.
    private func lowestMissingWantedPage() -> Int? {
        var lowest: Int?
        for subscription in subscriptions.values {
            guard let wanted = subscription.wantedPages(prefetch: settings.prefetch) else { continue }
            for number in wanted {
                if let lastPage, number > lastPage { break }
                if let lowest, number >= lowest { break }
                if cache[number] == nil {
                    lowest = number
                    break
                }
            }
        }
        return lowest
    }

    private func isWanted(_ number: Int) -> Bool {
        subscriptions.values.contains { $0.wantedPages(prefetch: settings.prefetch)?.contains(number) == true }
    }

    /// The lowest page a subscription is waiting for right now that is not cached, if any.
    private func lowestMissingAwaitedPage() -> Int? {
        subscriptions.values.compactMap { subscription -> Int? in
            let number = subscription.position + 1
            guard subscription.wantsPage, cache[number] == nil, lastPage.map({ number <= $0 }) ?? true else { return nil }
            return number
        }.min()
    }

    /// Fetches one page: first one a subscriber is waiting for, else one to prefetch.
    private func fetchIfNeeded() {
        guard upstreamTask == nil else { return }
        let awaited = lowestMissingAwaitedPage()
        guard var number = awaited ?? lowestMissingWantedPage(), caughtUpAt != number else { return }
        let urgent = awaited != nil
        // Pages come in order: if the wanted page's predecessor has never been fetched, its
        // token is unknown, so fetch the first page whose token is known.
        if sourceCursors[number] == nil, let furthestKnown = sourceCursors.keys.max(), furthestKnown < number {
            number = furthestKnown
        }
        guard let request = sourceCursors[number], makeRoomInCache(urgent: urgent) else { return }
        startFetch(page: number, request: request)
    }

    /// Keeps the cache within `cache_pages`. A prefetch only ever replaces pages nobody wants, or
    /// is skipped. A page a subscriber is waiting for (or one on the way to it) may also replace
    /// prefetched pages, furthest first, and is fetched even when every cached page is awaited:
    /// the limit is then exceeded by at most one page per subscription, since refusing it would
    /// stall those subscribers for good.
    private func makeRoomInCache(urgent: Bool) -> Bool {
        while cache.count >= settings.cachePages {
            let pages = cache.keys.sorted()
            if let unwanted = pages.first(where: { !isWanted($0) }) {
                cache[unwanted] = nil
            } else if urgent, let prefetched = pages.last(where: { !isAwaited($0) }) {
                cache[prefetched] = nil
            } else {
                return urgent
            }
        }
        return true
    }

    /// Whether a subscription is waiting for page `number` right now (not merely prefetching it).
    private func isAwaited(_ number: Int) -> Bool {
        subscriptions.values.contains { $0.wantsPage && $0.position + 1 == number }
    }

    private func startFetch(page number: Int, request: PageRequest) {
        upstreamRequests += 1
        counters.upstreamRequests += 1
        let fetch = PageFetch(
            adapter: adapter, encoder: encoder, feed: name, generation: generation, number: number, request: request, wrap: settings.wrap)
        upstreamTask = Task {
            let started = ContinuousClock.now
            let result = await fetch.run()
            self.counters.upstreamDuration.record(since: started)
            self.finishFetch(fetch, result: result)
        }
    }

    private func finishFetch(_ fetch: PageFetch, result: Result<PageFetch.Outcome, any Error>) {
        let number = fetch.number
        let request = fetch.request
        guard fetch.generation == generation, !Task.isCancelled else { return }
        upstreamTask = nil
        switch result {
        case .success(.page(let page, let next)):
            store(page, next: next, request: request)
        case .success(.notYet):
            caughtUpAt = number
            recovered()
            pumpAll()
            waitForNewData(after: request, page: number)
        case .failure(let error):
            fail(page: number, error: error)
        }
    }

    private func store(_ page: Page, next: NextPage, request: PageRequest) {
        let number = page.number
        fetchedPages += 1
        counters.pagesFetched += 1
        if caughtUpAt == number { caughtUpAt = nil }
        switch next {
        case .more(let token):
            sourceCursors[number + 1] = PageRequest(page: request.page + 1, token: token, generation: generation)
        case .end where !page.isLast:
            sourceCursors[number + 1] = PageRequest(page: 1, token: nil, generation: generation)
        case .end:
            lastPage = number
        }
        cache[number] = page
        recovered()
        pumpAll()
    }

    private func waitForNewData(after request: PageRequest, page number: Int) {
        let adapter = adapter
        let poll = settings.poll ?? .seconds(1)
        let generation = generation
        upstreamTask = Task {
            try? await adapter.waitForNewData(after: request, pollInterval: poll)
            guard generation == self.generation, !Task.isCancelled else { return }
            self.upstreamTask = nil
            if self.caughtUpAt == number { self.caughtUpAt = nil }
            self.fetchIfNeeded()
        }
    }

    // MARK: Upstream failures

    private func fail(page number: Int, error: any Error) {
        let sourceError = error as? SourceError ?? .transient(String(describing: error))
        failedAttempts += 1
        counters.upstreamErrors += 1
        let delay = retryDelay(for: sourceError)
        let state: FeedHealth.State = sourceError.kind == .rejected ? .failing : .retrying
        setHealth(FeedHealth(state: state, lastError: sourceError.message))
        logger.warning("page \(number): \(sourceError.message); retrying in \(delay.wholeMilliseconds) ms")
        for subscription in subscriptions.values where subscription.wantsPage && subscription.position + 1 == number {
            subscription.send(.upstreamFailing(
                feed: name, message: sourceError.message, retryIn: delay, replyTo: subscription.pendingNexts.first?.replyTo))
        }
        let generation = generation
        upstreamTask = Task {
            try? await Task.sleep(for: delay)
            guard generation == self.generation, !Task.isCancelled else { return }
            self.upstreamTask = nil
            self.fetchIfNeeded()
        }
    }

    /// Exponential backoff with jitter for transient failures, the slowest rate for rejections,
    /// and never sooner than the upstream's `Retry-After`, even past `retry_max_delay`.
    private func retryDelay(for error: SourceError) -> Duration {
        let maximum = settings.retryMaxDelay
        var delay: Duration
        if error.kind == .rejected {
            delay = maximum
        } else {
            let exponential = Duration.milliseconds(250) * (1 << min(failedAttempts - 1, 20))
            let capped = min(exponential, maximum)
            delay = capped * Double.random(in: 0.5...1.0)
        }
        if let retryAfter = error.retryAfter { delay = max(delay, retryAfter) }
        return delay
    }

    private func recovered() {
        failedAttempts = 0
        setHealth(.ok)
    }

    private func setHealth(_ newHealth: FeedHealth) {
        guard newHealth != health else { return }
        if health.state != .ok, newHealth.state == .ok { logger.notice("upstream recovered") }
        health = newHealth
        onHealthChange?()
    }
}

/// One upstream request, run off the main actor together with encoding its page, so the main
/// actor only files the outcome and neither parsing nor encoding holds up its replies.
private struct PageFetch: Sendable {
    let adapter: any SourceAdapter
    let encoder: any PageEncoder
    let feed: String
    let generation: Int
    let number: Int
    let request: PageRequest
    /// The feed's `wrap`: after the source's last page it starts over, unless it is empty.
    let wrap: Bool

    enum Outcome {
        case page(Page, next: NextPage)
        case notYet
    }

    func run() async -> Result<Outcome, any Error> {
        do {
            switch try await adapter.fetch(request) {
            case .notYet:
                return .success(.notYet)
            case .page(let items, let next):
                let startsOver = wrap && !(items.isEmpty && request.page == 1)
                let isLast = next == .end && !startsOver
                let page = Page(feed: feed, generation: generation, number: number, items: items, isLast: isLast, encoder: encoder)
                return .success(.page(page, next: next))
            }
        } catch {
            return .failure(error)
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
