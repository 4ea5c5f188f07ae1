import FeedKit

/// One adapter call chain, run off the main actor together with encoding its pages, so the main
/// actor only files the outcome and neither parsing nor encoding holds up its replies.
///
/// A run asks for up to `maxPages` consecutive pages, one call at a time, each with the token
/// the previous one returned, and only while pages come fast (no call starts more than
/// ``runBudget`` after the first). Each call asks for the rest of the run
/// (``SourceAdapter/fetch(_:writtenPages:)``): an adapter that can frame several pages from one read
/// (a file) answers with them, any other with one, and an adapter that writes its items (a file)
/// hands them over as the page line holds them. Its first page, the one a subscriber may be waiting for, is
/// handed over at once (see ``RunHandOver``); the others when a page comes ``handOverInterval``
/// or more after the last hand-over, and with the run's end. So a fast source (a local file, an
/// upstream on the same host) costs a hop to the main actor per millisecond of pages, not one
/// per page, and a page waits at most for calls that started within a millisecond of the last
/// hand-over. The pages of a source that cannot
/// fetch them again, on a feed that keeps its pages, go to ``storedRun`` instead, which stores
/// them while the run fetches on and serves each once a commit holds it; their budget counts
/// only the source's time in the calls after the first (which read a whole document, say), since
/// none of those pages waits for the run's end.
struct PageFetch: Sendable {
    let adapter: any SourceAdapter
    let encoder: any PageEncoder
    let clock: any EngineClock
    let feed: String
    let generation: Int
    let step: GenerationPaging.Step
    /// How many pages the run may bring, its first included (see ``FetchPlanner/runLength(from:toward:cache:limits:paging:wanted:)``).
    let maxPages: Int
    let handOver: RunHandOver
    /// Where the pages of a source that cannot fetch them again are stored before they are
    /// served; nil when the feed keeps no pages (they are handed over as any source's are).
    let storedRun: StoredRun?
    /// Wakes the feed to take what ``handOver`` holds.
    let wake: @Sendable () -> Void
    /// The feed's `wrap`: after the source's last page it starts over, unless it is empty.
    let wrap: Bool
    /// The fleet of a shared feed that joined one: the page is fetched once for all of it.
    let fleet: FleetLink?

    /// How long a run keeps starting calls. Every call still gets the feed's whole `timeout`:
    /// the deadline of a run of several pages is its start plus `timeout` plus the larger budget,
    /// ``storedRunBudget``. Each run costs the feed's thread and the source's (libcurl's, for
    /// an HTTP source) a hand-off there and back, so a run of pages an upstream on the same host
    /// answers in a fifth of a millisecond each should be long: `perf stat` of the daemon in
    /// `feedd-bench 1 upstream` with 1 ms runs (about 5 pages) counted 0.95 context switches per
    /// page on the feed's thread, with 8 ms runs 0.3, and its CPU per page went down by a fifth.
    static let runBudget = Duration.milliseconds(6)
    /// How often a run hands over the pages it has fetched while it goes on (see ``RunHandOver``).
    static let handOverInterval = Duration.milliseconds(1)
    /// How long the source of a run of pages that are stored before they are served spends in
    /// the calls after its first before the run stops: a few commits' worth, so the feed's
    /// upstream is held for milliseconds, while a run still takes a document's pages in a handful
    /// of hand-offs. Encoding the pages is not counted: it is the daemon's work, the same however
    /// the pages are grouped into runs, while a run stopped short leaves the rest of a document
    /// waiting for the last commit of its pages before the next run starts.
    static let storedRunBudget = Duration.milliseconds(8)

    /// How a run ended: the pages not handed over before, then why it stopped, if not after a
    /// page.
    struct Run: Sendable {
        var pages: [FetchedPage] = []
        var ending: Ending?
        /// Pages this instance asked the adapter for (none for a page taken from the fleet): a
        /// call that brought several (``SourceAdapter/fetch(_:pages:)``) counts each, as the
        /// calls of one page each would have.
        var adapterCalls = 0
        /// HTTP requests those calls made (see ``HTTPRequestMeter``).
        var httpRequests = 0
    }

    /// Why a run stopped short of a page, and at which page.
    enum Ending: Sendable {
        /// A live source has nothing there yet.
        case notYet(page: Int)
        /// The source (or the store, keeping an unrepeatable page) failed.
        case failure(SourceError, page: Int)
        /// Another instance of the fleet fetches the page: its publication comes within `retryIn`,
        /// or the lease is to be asked for again then.
        case heldElsewhere(page: Int, retryIn: Duration)
        /// The fleet cannot be reached: nothing was fetched.
        case fleetUnreachable
    }

    /// The run's pages, from the source (or the fleet, for a shared feed), with the HTTP
    /// requests the adapter made for them counted.
    func run() async -> Run {
        let meter = HTTPRequestMeter()
        var run = await HTTPRequestMeter.$current.withValue(meter) { await fleet == nil ? runFromSource() : runThroughFleet() }
        run.httpRequests = meter.count
        guard let storedRun else { return run }
        // The run is over once its stored pages are served; a failed commit is where it stopped.
        if let failure = await storedRun.drained() { run.ending = .failure(failure.error, page: failure.page) }
        // The work of the pages served was counted as they were.
        let served = storedRun.served
        run.adapterCalls -= served.calls
        run.httpRequests -= served.requests
        return run
    }

    /// For a shared feed: the page the fleet published, else fetched here under its lease and
    /// published (see ``FleetLink/obtainPage(feed:generation:page:fetch:)``). A shared feed's run
    /// is one page: each page has its own lease.
    private func runThroughFleet() async -> Run {
        guard let fleet else { return await runFromSource() }
        var run = Run()
        let fetchedHere = Locked<Page?>(nil)
        do {
            let outcome = try await fleet.obtainPage(feed: feed, generation: generation, page: step.page) {
                guard case .page(let page, let next) = try await askSource(step.request, page: step.page) else { return nil }
                fetchedHere.withLock { $0 = page }
                return page.published(next: next, sourcePage: step.request.page)
            }
            switch outcome {
            case .page(let published, let here):
                run.adapterCalls = here ? 1 : 0
                // The page fetched here, unless another instance's was first: the fleet keeps one.
                let own = fetchedHere.withLock { $0 }.flatMap { $0.line === published.line ? $0 : nil }
                guard let page = own ?? Page(published, wrap: wrap) else {
                    run.ending = .failure(.transient("the fleet's page \(step.page) of generation \(generation) is not a page line"), page: step.page)
                    return run
                }
                run.pages = [FetchedPage(page: page, next: published.next, request: step.request)]
            case .notYet:
                run.adapterCalls = 1
                run.ending = .notYet(page: step.page)
            case .heldElsewhere(let retryIn):
                run.ending = .heldElsewhere(page: step.page, retryIn: retryIn)
            case .unreachable:
                run.ending = .fleetUnreachable
            }
        } catch {
            // What `obtainPage` throws is the adapter's failure, or the end of a wait (cancelled).
            run.adapterCalls = error is CancellationError ? 0 : 1
            run.ending = .failure(SourceError.from(error), page: step.page)
        }
        return run
    }

    private func runFromSource() async -> Run {
        var run = Run()
        let started = clock.now
        var handedOver = started
        // The source's time in the calls after the first (see ``storedRunBudget``).
        var laterCalls = Duration.zero
        var kept = StoredRun.Work()
        var request = step.request
        while true {
            let results: [WrittenFetchResult]
            do {
                let called = clock.now
                results = try await adapter.fetch(request, writtenPages: maxPages - run.adapterCalls)
                if run.adapterCalls > 0 { laterCalls += clock.now - called }
                guard !results.isEmpty else { throw SourceError.transient("the adapter answered a call for page \(request.page) with no page") }
            } catch {
                run.ending = .failure(SourceError.from(error), page: step.page + run.adapterCalls)
                run.adapterCalls += 1
                return run
            }
            // The pages of one call, each taken as if it had been a call of its own.
            for (index, result) in results.enumerated() {
                let number = step.page + run.adapterCalls
                run.adapterCalls += 1
                switch answer(result, to: request, page: number) {
                case .notYet:
                    run.ending = .notYet(page: number)
                    return run
                case .page(let page, let next):
                    let fetched = FetchedPage(page: page, next: next, request: request)
                    // Asked after the call: an exec plugin says whether it reproduces pages once configured.
                    let storedRun = adapter.reproducesPages ? nil : storedRun
                    let callsOn = index < results.count - 1
                        || (storedRun == nil ? clock.now - started < Self.runBudget : laterCalls < Self.storedRunBudget) && !Task.isCancelled
                    let work = StoredRun.Work(calls: run.adapterCalls, requests: HTTPRequestMeter.current?.count ?? 0)
                    defer { kept = work }
                    // Only `more` says for sure which request comes next (see GenerationPaging.record).
                    guard case .more(let token) = next, run.adapterCalls < maxPages, callsOn else {
                        if let storedRun { storedRun.keep(fetched, work: work - kept) } else { run.pages.append(fetched) }
                        return run
                    }
                    if let storedRun {
                        storedRun.keep(fetched, work: work - kept)
                        await storedRun.waitForRoom()
                        if storedRun.hasFailed { return run }
                    } else {
                        handOver.put(fetched)
                        if run.adapterCalls == 1 || clock.now - handedOver >= Self.handOverInterval {
                            handedOver = clock.now
                            wake()
                        }
                    }
                    request = PageRequest(page: request.page + 1, token: token, generation: generation, seed: request.seed)
                }
            }
        }
    }

    private enum Answer {
        case page(Page, next: NextPage)
        case notYet
    }

    private func askSource(_ request: PageRequest, page number: Int) async throws -> Answer {
        answer(WrittenFetchResult(try await adapter.fetch(request)), to: request, page: number)
    }

    /// What the source gave, with its page encoded.
    private func answer(_ result: WrittenFetchResult, to request: PageRequest, page number: Int) -> Answer {
        switch result {
        case .notYet:
            return .notYet
        case .page(let items, let next):
            let isLast = Page.isLast(next: next, wrap: wrap, isEmpty: items.count == 0, sourcePage: request.page)
            let page = Page(feed: feed, generation: generation, number: number, items: items, isLast: isLast, encoder: encoder)
            return .page(page, next: next)
        }
    }
}

/// A page a run fetched (or the store or the fleet gave), with the request it answered and what
/// it said of the next.
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

extension SourceError {
    /// What a fetch threw, as a source error (anything else reads as a transient failure).
    static func from(_ error: any Error) -> SourceError {
        error as? SourceError ?? .transient(String(describing: error))
    }
}
