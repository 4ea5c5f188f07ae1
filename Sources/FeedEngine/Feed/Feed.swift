import FeedKit
import FeedState

/// One configured feed at run time: the main-actor shell that owns its parts and carries out what
/// they decide.
///
/// Each part owns one state and changes it only in its own methods, which return what is to be
/// done: ``SubscriptionTable`` (who reads what, each ``Subscription`` an enum of reading states),
/// ``GenerationPaging`` (how to ask for each page of the generation), ``PageCache``,
/// ``FetchPlanner`` (what to fetch next), ``UpstreamMachine`` (the one call to the adapter),
/// ``FleetMembership``, ``StoredPages`` and ``CursorLedger`` (what the state directory or the
/// fleet keeps). Everything that happens to the feed comes through ``handle(_:)`` as a
/// ``FeedInput``; only an adapter's call, the encoding of its pages and the store's writes run
/// elsewhere, and their outcomes come back as inputs tagged with the call they answer.
///
/// Every page, fetched, read from the store or published by the fleet, enters through one door,
/// ``pagesArrived(_:)``, which drops a page that answers no live request, files it in the cache
/// and wakes the subscriptions.
@MainActor
public final class Feed {
    /// The settings of its `[feeds.NAME]` table.
    public internal(set) var settings: FeedSettings
    /// The feed's name.
    public var name: String { settings.name }
    var adapter: any SourceAdapter
    /// Builds a fresh instance of the adapter, to replace one whose call never returns.
    var makeAdapter: (@Sendable () throws -> any SourceAdapter)?
    /// The adapter of a reload that kept the pages, taken into use once no call is in flight.
    var replacementAdapter: (any SourceAdapter)?
    let encoder: any PageEncoder
    /// Where its generation, pages and cursors are kept on this host; nil keeps none.
    let store: (any DurableState)?
    let logger: Logger
    let clock: any EngineClock
    /// Called whenever ``health`` changes, for systemd's STATUS line.
    var onHealthChange: (() -> Void)?
    /// Called when the feed starts a new generation, so feeds that gather it start one too.
    var onNewGeneration: (() -> Void)?
    /// Runs the feed's look for upstream work once the turn is over; nil looks at once.
    var afterTurn: TurnEnd?
    /// Whether a look is already waiting for the end of the turn.
    var isLookPending = false

    var paging: GenerationPaging
    var cache = PageCache()
    var subscriptions = SubscriptionTable()
    var planner = FetchPlanner()
    var upstream: UpstreamMachine
    var membership: FleetMembership
    let storedPages: StoredPages
    let ledger: CursorLedger
    /// The one task that gives up calls past their deadline (see ``watchDeadlines()``).
    var deadlineWatch: (id: Int, task: Task<Void, Never>)?
    /// The highest generation asked of the store, so refreshes in a row each get a new one.
    var requestedGeneration: Int
    /// The last local generation the feed served (0: none), so the next is numbered after it.
    var lastLocalGeneration = 0
    /// Set while the feed starts a new generation because a page's stored items were lost.
    var isStartingOver = false
    /// The feed that took this one's subscriptions over at a reload, for answers still on their way.
    weak var successor: Feed?

    /// How the upstream is doing, for `status` and systemd's STATUS line.
    public internal(set) var health: FeedHealth = .ok
    /// What the feed has done since it started, for `status` and the metrics.
    public internal(set) var counters = FeedCounters()

    /// `shared`: the daemon is in a fleet and the feed is shared with it (it joins once attached).
    init(
        definition: FeedDefinition, store: (any DurableState)?, encoder: any PageEncoder, logger: Logger, clock: any EngineClock,
        jitter: (@Sendable () -> Double)?, shared: Bool
    ) {
        let settings = definition.settings
        self.settings = settings
        adapter = definition.adapter
        makeAdapter = definition.makeAdapter
        self.encoder = encoder
        self.store = store
        self.clock = clock
        self.logger = logger.forFeed(settings.name)
        var retryPolicy = RetryPolicy(maximumDelay: settings.retryMaxDelay)
        if let jitter { retryPolicy.jitter = jitter }
        upstream = UpstreamMachine(retryPolicy: retryPolicy)
        let start = GenerationStart(stored: store?.feed(settings.name), definition: definition, shared: shared)
        paging = start.paging
        requestedGeneration = start.stored
        if start.paging.number > StoredFeed.maximumGeneration { lastLocalGeneration = start.paging.number }
        membership = shared ? .joining(FleetMembership.Attempt()) : .solo
        storedPages = StoredPages(
            feed: settings.name, store: store, generation: start.stored, seed: start.storedSeed, fingerprint: settings.contentFingerprint,
            logger: self.logger)
        ledger = CursorLedger(feed: settings.name, home: .nowhere, pages: storedPages, logger: self.logger)
        storedPages.token = { [unowned self] page in paging.token(returnedBy: page) }
        ledger.home = cursorHome
        if start.continues {
            self.logger.info("continuing generation \(start.stored) (\(storedPages.confirmed) pages stored)")
        } else {
            storedPages.storeGenerationSoon()
        }
    }

    /// The generation the feed serves.
    public var generation: Int { paging.number }
    /// The feeds this one gathers (a `merge` feed's members).
    public var memberFeeds: [String] { adapter.memberFeeds }
    /// Pages in the cache now.
    public var cachedPages: Int { cache.count }
    /// The memory the cached pages take (``Page/cost``), which `cache_bytes` bounds.
    public var cachedBytes: Int { cache.byteCount }
    /// Whether the source said which page is its last.
    public var reachedEnd: Bool { paging.lastPage != nil }
    /// Subscriptions now.
    public var subscriberCount: Int { subscriptions.count }
    /// Where it stands with the fleet (`joined`, `joining`, `alone`); nil if not shared.
    public var fleetState: String? { membership.label }

    /// Where consumers' cursors are kept, as the membership says.
    var cursorHome: CursorLedger.Home {
        if membership.isShared {
            if let link = membership.joinedLink { return .fleet(link) }
            return .unreachable(reason: "feed \(name) has not joined its fleet yet: it cannot be reached")
        }
        guard let store else { return .nowhere }
        return .local(store)
    }

    // MARK: Inputs

    /// Applies one input; see ``FeedInput``.
    func handle(_ input: FeedInput) {
        switch input {
        case .subscribe(let client, let consumer, let after, let follows, let answer):
            subscribe(client, consumer: consumer, after: after, follows: follows, answer: answer)
        case .next(let client, let count, let replyTo, let subscribed, let answer):
            next(client, count: count, replyTo: replyTo, subscribed: subscribed, answer: answer)
        case .acknowledge(let client, let page, let answer):
            guard let subscription = subscriptions[client] else {
                return answer(.failure(ServiceError(.badRequest, "not subscribed to \"\(name)\"; subscribe or next first", feed: name)))
            }
            acknowledge(subscription, through: page) { [name] result in
                answer(result.mapError { .storeFailed("the cursor could not be stored", $0, feed: name) })
            }
        case .unsubscribe(let client):
            remove(client)
        case .resume(let client):
            if subscriptions[client]?.wantsPage == true { pump(client) }
        case .refresh(let requester, let replyTo, let answer):
            refresh(requester: requester, replyTo: replyTo, answer: answer)
        case .pagesArrived(let pages):
            pagesArrived(pages)
        case .callReturned(let id, let outcome):
            callReturned(id, outcome)
        case .deadline:
            deadlinePassed()
        case .timer(let id):
            perform(upstream.timerFired(id))
        case .fleet(let input):
            handleFleet(input)
        case .turnEnded:
            isLookPending = false
            advanceUpstream()
        case .reload(let definition):
            reconfigure(definition)
        }
    }

    // MARK: The one door for pages

    /// Every page comes in here. A page of a call is used only while that call is the one in
    /// flight; a page of the fleet only if it is of the generation served and not cached yet.
    /// Each is filed (what it says of the pages after it, then the cache), and the subscriptions
    /// that want a page are woken.
    func pagesArrived(_ arriving: ArrivingPages, waking: Bool = true) {
        switch arriving {
        case .call(let id, let pages, let fromStore):
            guard !pages.isEmpty, upstream.callID == id, let call = upstream.call else { return }
            let step = call.work.step
            for fetched in pages {
                // Only the run's first page can have been asked for by its number alone.
                let jumped = step.jumped && fetched.page.number == step.page
                file(fetched.page, request: fetched.request, next: fetched.next, jumped: jumped)
            }
            if !fromStore { counters.pagesFetched += pages.count }
        case .fleet(let published):
            guard membership.isJoined, published.generation == generation, cache[published.number] == nil,
                !paging.isPastEnd(published.number), let page = Page(published, wrap: settings.wrap)
            else { return }
            // On a sequential source the page is filed only where the feed knows how it was asked
            // for; past a gap it is only cached, and filed when the feed reaches it.
            if let step = paging.step(toward: page.number), step.page == page.number {
                file(page, request: step.request, next: published.next, jumped: step.jumped)
            } else {
                cache.insert(page)
            }
            perform(upstream.fleetPageArrived(page.number))
        }
        recovered()
        trimCache()
        if waking { wakeSubscribers() }
    }

    private func file(_ page: Page, request: PageRequest, next: NextPage, jumped: Bool) {
        paging.record(page: page.number, request: request, next: next, isEmpty: page.itemCount == 0, jumped: jumped)
        if !paging.isPastEnd(page.number) { cache.insert(page) }
    }
}

/// Where a feed's generation starts when the feed is made: the stored one goes on while what
/// shapes its pages is the same (SPEC §3), with its seed and the token of every page stored, so
/// resuming at page N costs at most one request; otherwise a new one starts, its consumers at 0.
/// A shared feed keeps the stored one for the day it is served as this instance's own, and
/// serves a new local generation until it joins (see ``FleetMembership``).
private struct GenerationStart {
    /// What the feed serves.
    let paging: GenerationPaging
    /// The store's generation of the feed, and its seed.
    let stored: Int
    let storedSeed: String
    /// Whether the stored generation goes on (else it is to be written).
    let continues: Bool

    init(stored: StoredFeed?, definition: FeedDefinition, shared: Bool) {
        let settings = definition.settings
        let (addressing, wraps) = (definition.adapter.pageAddressing, settings.wrap)
        let storedNumber = stored.map { min(max($0.generation, 0), StoredFeed.maximumGeneration) } ?? 0
        let storedPaging: GenerationPaging
        if let stored, stored.fingerprint == settings.contentFingerprint {
            storedPaging = GenerationPaging(
                number: storedNumber, addressing: addressing, wraps: wraps, seed: stored.seed ?? GenerationPaging.randomSeed(),
                storedTokens: stored.tokensToPageOnWith)
            continues = true
        } else {
            storedPaging = GenerationPaging(number: min(storedNumber + 1, StoredFeed.maximumGeneration), addressing: addressing, wraps: wraps)
            continues = false
        }
        self.stored = storedPaging.number
        storedSeed = storedPaging.seed
        guard shared else {
            paging = storedPaging
            return
        }
        let local = FleetMembership.localGeneration(after: 0)
        paging = GenerationPaging(number: local, addressing: addressing, wraps: wraps)
    }
}
