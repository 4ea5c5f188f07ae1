import FeedKit
import FeedState

/// The feed carrying out what its ``FetchPlanner`` and ``UpstreamMachine`` decide: starting the
/// one call, watching its deadline, backing off, and taking its answer.
extension Feed {
    var demand: FetchPlanner.Demand { FetchPlanner.Demand(prefetch: settings.prefetch, cachePages: settings.cachePages) }
    var cacheLimits: PageCache.Limits { PageCache.Limits(pages: settings.cachePages, bytes: settings.cacheBytes) }
    var currentLook: FetchPlanner.Look {
        FetchPlanner.Look(callID: upstream.callID ?? -1, generation: generation, subscriptionCount: subscriptions.count)
    }

    func isWanted(_ number: Int) -> Bool { FetchPlanner.isWanted(number, by: subscriptions, demand: demand) }
    func isAwaited(_ number: Int) -> Bool { FetchPlanner.isAwaited(number, by: subscriptions) }

    /// Gives up cached pages while the cache is over its limits.
    func trimCache() {
        cache.trim(to: cacheLimits, wanted: isWanted)
    }

    /// Looks for upstream work once the turn of the event loop is over, after what the turn
    /// wrote: an answer delivered now (a socket line, an HTTP response libmicrohttpd sends after
    /// its callback returns, an event stream's write) leaves before a fetch starts a task and
    /// wakes a worker thread, which on a small machine competes with the client for a core. The
    /// looks of one turn are one look, made with what holds then.
    func advanceUpstreamAfterTurn() {
        guard let afterTurn else { return advanceUpstream() }
        guard !isLookPending else { return }
        isLookPending = true
        afterTurn { [weak self] in self?.handle(.turnEnded) }
    }

    /// Starts the one upstream call the feed needs next, if the upstream is free.
    func advanceUpstream() {
        guard upstream.isIdle, !isStartingOver else { return planner.forget() }
        takeReplacementAdapter()
        guard let plan = planner.plan(subscriptions, demand: demand, cache: cache, paging: paging, look: currentLook) else { return }
        switch plan {
        case .waitForNewData(let step):
            startCall(.waitForNewData(step))
        case .fetch(let step, let target, let urgent):
            guard cache.makeRoom(within: cacheLimits, urgent: urgent, wanted: isWanted, awaited: isAwaited) else { return }
            if membership.keepsPagesLocally, storedPages.lostItems(of: step.page) {
                return startOver(because: "page \(step.page): its stored items were dropped to keep within daemon.state_page_bytes, and the source cannot fetch it again as it was")
            }
            if membership.keepsPagesLocally, storedPages.keepsItems(of: step.page) { return startCall(.readStored(step)) }
            // A shared feed's pages are fetched one lease at a time; a run of a source that cannot
            // fetch its pages again is stored in one commit before any of its pages is served.
            let maxPages = !membership.isJoined
                ? FetchPlanner.runLength(from: step.page, toward: target, cache: &cache, limits: cacheLimits, paging: paging, wanted: isWanted) : 1
            startCall(.fetch(step, maxPages: maxPages))
        }
    }

    private func startCall(_ work: UpstreamMachine.Work) {
        let id = upstream.nextID()
        let startedAt = clock.now
        var deadline: ContinuousClock.Instant? = startedAt + settings.timeout
        let task: Task<Void, Never>
        switch work {
        case .fetch(let step, let maxPages):
            if maxPages > 1 { deadline = deadline.map { $0 + PageFetch.storedRunBudget } }
            task = fetchTask(step, maxPages: maxPages, call: id, startedAt: startedAt)
        case .readStored(let step):
            let (pages, wrap) = (storedPages, settings.wrap)
            task = Task { self.handle(.callReturned(id: id, .read(await pages.storedPage(step.page, wrap: wrap)))) }
        case .waitForNewData(let step):
            deadline = nil
            task = waitTask(step, call: id)
        }
        upstream.begin(UpstreamMachine.Call(id: id, work: work, task: task, deadline: deadline))
        watchDeadlines()
    }

    private func fetchTask(_ step: GenerationPaging.Step, maxPages: Int, call id: Int, startedAt: ContinuousClock.Instant) -> Task<Void, Never> {
        let handOver = RunHandOver()
        let keepsPages = membership.keepsPagesLocally && store != nil
        let fetch = PageFetch(
            adapter: adapter, encoder: encoder, clock: clock, feed: name, generation: generation, step: step, maxPages: maxPages,
            handOver: handOver, storedRun: keepsPages ? StoredRun { pages, done in self.keep(pages, call: id, then: done) } : nil,
            wake: { Task { @MainActor in self.handle(.pagesArrived(.call(id: id, handOver.takeAll(), fromStore: false))) } },
            wrap: settings.wrap, fleet: membership.joinedLink)
        let executor = adapter.fetchExecutor
        return Task {
            let run = await withTaskExecutorPreference(executor) { await fetch.run() }
            self.handle(.pagesArrived(.call(id: id, handOver.takeAll(), fromStore: false)))
            self.handle(.callReturned(id: id, .fetched(run, startedAt: startedAt)))
        }
    }

    private func waitTask(_ step: GenerationPaging.Step, call id: Int) -> Task<Void, Never> {
        let (adapter, poll, request) = (adapter, settings.poll ?? .seconds(1), step.request)
        // A shared feed's looks are taken in turns across the fleet (SPEC §8).
        let (fleet, name, generation) = (membership.joinedLink, name, generation)
        return Task {
            // A source's looks are requests too (conditional GETs, for an HTTP source).
            let meter = HTTPRequestMeter()
            let outcome = await HTTPRequestMeter.$current.withValue(meter) {
                guard let fleet else {
                    try? await adapter.waitForNewData(after: request, pollInterval: poll)
                    return FleetLookOutcome.mayHaveMore
                }
                return (try? await fleet.awaitNewPage(feed: name, generation: generation, page: step.page) {
                    try await adapter.waitForNewData(after: request, pollInterval: poll)
                }) ?? .mayHaveMore
            }
            self.handle(.callReturned(id: id, .waited(outcome, httpRequests: meter.count)))
        }
    }

    /// For a source that cannot fetch a page again: stores the pages `call` fetched, with their
    /// tokens and items, in one commit, and serves them once it holds them, so they are served as
    /// they were after a restart or once the cache gave them up. Pages that cannot be stored (the
    /// disk is full) are not served, since after a restart they could not be served again: the
    /// run stops, and the page is fetched again with the feed's backoff while its subscribers are
    /// told why.
    private func keep(_ pages: [StoredRun.Waiting], call id: Int, then done: @escaping @MainActor (SourceError?) -> Void) {
        guard let first = pages.first, let last = pages.last, upstream.callID == id else {
            return done(.transient("the call that fetched page \(pages.first?.number ?? 0) was given up"))
        }
        var bodies: [Int: NewPage] = [:]
        for page in pages where page.number > storedPages.confirmed { bodies[page.number] = page.record }
        storedPages.record(through: last.number, bodies: bodies) { result in
            guard case .failure(let error) = result else {
                let work = pages.reduce(StoredRun.Work()) { $0 + $1.work }
                self.counters.count(adapterCalls: work.calls, httpRequests: work.requests)
                self.handle(.pagesArrived(.call(id: id, pages.map(\.fetched), fromStore: false)))
                return done(nil)
            }
            done(.transient("page \(first.number) cannot be stored, and its source cannot give it again: \(error)"))
        }
    }

    // MARK: Answers

    func callReturned(_ id: Int, _ outcome: CallOutcome) {
        // The last pages of a run enter while the call is still the one in flight; the
        // subscriptions are woken once the call is over.
        if case .fetched(let run, _) = outcome { pagesArrived(.call(id: id, run.pages, fromStore: false), waking: false) }
        if case .read(let stored?) = outcome, let call = upstream.call, call.id == id {
            let page = FetchedPage(page: stored.page, next: stored.next, request: call.work.step.request)
            pagesArrived(.call(id: id, [page], fromStore: true), waking: false)
        }
        switch upstream.returned(id, now: clock.now) {
        case .stale:
            break
        case .drained(let action):
            perform(action)
        case .answer(let call):
            answered(call, outcome)
        }
    }

    private func answered(_ call: UpstreamMachine.Call, _ outcome: CallOutcome) {
        switch outcome {
        case .fetched(let run, let startedAt):
            counters.count(adapterCalls: run.adapterCalls, httpRequests: run.httpRequests)
            let duration = clock.now - startedAt
            counters.upstreamDuration.record(duration)
            logger.debug("page \(call.work.step.page): upstream answered \(run.adapterCalls) call(s) in \(duration.wholeMilliseconds) ms")
            finish(run.ending)
        case .read(let stored):
            if stored == nil {
                startOver(because: "page \(call.work.step.page): its stored items cannot be read, and the source cannot fetch it again as it was")
            }
        case .waited(let outcome, let httpRequests):
            counters.count(adapterCalls: 0, httpRequests: httpRequests)
            if paging.caughtUpAt == call.work.step.page, case .mayHaveMore = outcome { paging.caughtUpAt = nil }
            if case .heldElsewhere(let retryIn) = outcome { return perform(upstream.awaitFleet(page: call.work.step.page, until: clock.now + retryIn)) }
        }
        wakeSubscribers()
    }

    /// Why a run stopped short of a page: a live source's "not yet", a failure, the fleet.
    private func finish(_ ending: PageFetch.Ending?) {
        switch ending {
        case nil:
            break
        case .notYet(let page):
            paging.caughtUpAt = page
            recovered()
        case .failure(let error, let page):
            // Backing off before the pages are handed out keeps the upstream busy, so handing
            // them out starts no other call.
            let (delay, action) = upstream.backOff(after: error, now: clock.now)
            reportFailure(page: page, error: error, retryIn: delay)
            perform(action)
        case .heldElsewhere(let page, let retryIn):
            perform(upstream.awaitFleet(page: page, until: clock.now + retryIn))
        case .fleetUnreachable:
            performFleet(membership.fleetUnreachable())
        }
    }

    func perform(_ action: UpstreamMachine.Action) {
        switch action {
        case .none:
            break
        case .lookForWork:
            advanceUpstream()
        case .startTimer(let id, let until):
            Task {
                guard (try? await self.clock.sleep(until: until)) != nil else { return }
                self.handle(.timer(id: id))
            }
        case .replaceAdapter:
            replaceHungAdapter()
        }
    }

    // MARK: Deadlines

    /// Keeps one task per feed sleeping until the deadline of the call in flight. A call that
    /// returns in time leaves it asleep, and on waking it looks at whatever call is in flight
    /// then, so a busy feed costs one timer per `timeout`, not one per fetch.
    func watchDeadlines() {
        guard deadlineWatch == nil, upstream.deadline != nil else { return }
        let id = upstream.nextID()
        let task = Task {
            while let deadline = self.upstream.deadline {
                guard (try? await self.clock.sleep(until: deadline)) != nil else { break }
                self.handle(.deadline)
            }
            if self.deadlineWatch?.id == id { self.deadlineWatch = nil }
        }
        deadlineWatch = (id, task)
    }

    func deadlinePassed() {
        let (timedOut, action) = upstream.deadlinePassed(now: clock.now, timeout: settings.timeout)
        if let (call, error, delay) = timedOut { reportFailure(page: call.work.step.page, error: error, retryIn: delay) }
        perform(action)
    }

    private func replaceHungAdapter() {
        let abandoned = "the adapter has not returned from a call abandoned \(settings.timeout.wholeMilliseconds) ms ago"
        guard let makeAdapter else {
            logger.warning("\(abandoned); still waiting for it")
            return upstream.waitForHungCall()
        }
        do {
            let fresh = try makeAdapter()
            logger.warning("\(abandoned); replacing it")
            let hung = adapter
            adapter = fresh
            Task { await hung.shutdown() }
            perform(upstream.adapterReplaced(now: clock.now))
        } catch {
            logger.error("cannot replace a hung adapter: \(error)")
            upstream.waitForHungCall()
        }
    }

    func takeReplacementAdapter() {
        guard let replacement = replacementAdapter, !upstream.hasCallInFlight else { return }
        replacementAdapter = nil
        let previous = adapter
        adapter = replacement
        Task { await previous.shutdown() }
    }

    // MARK: Health

    /// Counts a failure and tells the subscribers waiting for the page.
    func reportFailure(page number: Int, error: SourceError, retryIn delay: Duration) {
        counters.upstreamErrors += 1
        setHealth(FeedHealth(state: error.kind == .rejected ? .failing : .retrying, lastError: error.message))
        logger.warning("page \(number): \(error.message); retrying in \(delay.wholeMilliseconds) ms")
        let waiting = subscriptions.all.filter { $0.awaitedPage == number }
        for subscription in waiting {
            subscription.sink?.receive(.upstreamFailing(feed: name, message: error.message, retryIn: delay, replyTo: subscription.oldestReplyTo))
        }
    }

    func recovered() {
        upstream.recovered()
        setHealth(.ok)
    }

    private func setHealth(_ newHealth: FeedHealth) {
        guard newHealth != health else { return }
        if health.state != .ok, newHealth.state == .ok { logger.notice("upstream recovered") }
        health = newHealth
        onHealthChange?()
    }
}
