import FeedKit
import Testing

@testable import FeedEngine

/// A source of `pageCount` pages of two items each (`P-1`, `P-2` on page P) that answers a call
/// for a run of pages with up to `pagesPerCall` of them, the way the file adapter does, and whose
/// page `failing` cannot be read the first two times it is asked for (in the middle of a run,
/// then alone).
struct RunSource: SourceAdapter {
    static let sourceName = "runs"

    /// What each call asked for: its first page, its token, and how many pages.
    final class Calls: Sendable {
        struct Call: Equatable {
            let page: Int
            let token: String?
            let maxPages: Int
        }

        private let state = Locked((calls: [Call](), failures: 0))

        var all: [Call] { state.withLock { $0.calls } }

        fileprivate func record(_ request: PageRequest, maxPages: Int) {
            state.withLock { $0.calls.append(Call(page: request.page, token: request.token, maxPages: maxPages)) }
        }

        /// True the first two times.
        fileprivate func failsNow() -> Bool {
            state.withLock { state in
                state.failures += 1
                return state.failures <= 2
            }
        }
    }

    let calls: Calls
    let pageCount: Int
    let pagesPerCall: Int
    let failing: Int?

    init(calls: Calls, pageCount: Int, pagesPerCall: Int, failing: Int? = nil) {
        self.calls = calls
        self.pageCount = pageCount
        self.pagesPerCall = pagesPerCall
        self.failing = failing
    }

    init(options: AdapterOptions, context: AdapterContext) throws {
        fatalError("made by the test")
    }

    func fetch(_ request: PageRequest) async throws -> FetchResult {
        calls.record(request, maxPages: 1)
        return try page(request)
    }

    func fetch(_ request: PageRequest, pages maxPages: Int) async throws -> [FetchResult] {
        calls.record(request, maxPages: maxPages)
        var pages: [FetchResult] = []
        var request = request
        while pages.count < min(maxPages, pagesPerCall) {
            do {
                pages.append(try page(request))
            } catch {
                if pages.isEmpty { throw error }
                break
            }
            guard case .page(_, next: .more(let token)) = pages[pages.count - 1] else { break }
            request = PageRequest(page: request.page + 1, token: token, generation: request.generation, seed: request.seed)
        }
        return pages
    }

    private func page(_ request: PageRequest) throws -> FetchResult {
        guard request.token == (request.page == 1 ? nil : "after-\(request.page - 1)") else {
            throw SourceError.rejected("page \(request.page) asked for with token \(request.token ?? "nil")")
        }
        if request.page == failing, calls.failsNow() { throw SourceError.transient("page \(request.page) cannot be read") }
        let items = (1...2).map { Item(id: "\(request.page)-\($0)", data: .integer(Int64($0))) }
        return .page(items, next: request.page < pageCount ? .more(token: "after-\(request.page)") : .end)
    }
}

@MainActor
@Suite(.timeLimit(.minutes(1))) struct AdapterRunTests {
    let clock = ManualClock()
    let directory: FeedDirectory
    let service: FeedService

    init() {
        directory = FeedDirectory(store: nil, encoder: DescribingEncoder(), logger: Logger(sink: NoLog()), clock: clock)
        directory.jitter = { 1.0 }
        service = FeedService(directory: directory, limits: FeedService.Limits(subscriptionsPerClient: 256), logger: Logger(sink: NoLog()))
    }

    func feed(_ source: RunSource) -> Feed {
        var settings = FeedSettings(name: "runs", source: "runs", prefetch: 0)
        settings.cachePages = 64
        settings.retryMaxDelay = .seconds(2)
        directory.apply([FeedDefinition(settings: settings, adapter: source)])
        return directory["runs"]!
    }

    func settle(_ feed: Feed, _ calls: RunSource.Calls) async {
        await FeedEngineTests.settle { "\(calls.all.count) \(feed.counters.pagesFetched) \(clock.sleeperCount)" }
    }

    /// A reader far behind: each call asks for the rest of the run, the adapter answers with
    /// as many pages as it frames at once, and they reach the reader as pages fetched one a call
    /// would: in order, each with its own items, and counted one upstream request a page.
    @Test func a_run_of_pages_comes_from_calls_that_each_bring_several() async {
        let calls = RunSource.Calls()
        let feed = feed(RunSource(calls: calls, pageCount: 10, pagesPerCall: 4))
        let reader = service.reader(of: "runs")
        reader.next(10)
        await settle(feed, calls)
        #expect(calls.all == [.init(page: 1, token: nil, maxPages: 10), .init(page: 5, token: "after-4", maxPages: 6), .init(page: 9, token: "after-8", maxPages: 2)])
        #expect(reader.log.pages.map(\.number) == Array(1...10))
        #expect(reader.log.pages.map(\.items) == (1...10).map { ["\($0)-1", "\($0)-2"] })
        #expect(reader.log.ends == 0)
        #expect(feed.counters.upstreamRequests == 10)
        #expect(feed.counters.fetches == 10)
        #expect(feed.paging.isPastEnd(11))
    }

    /// A page that cannot be read in the middle of a call's run ends the run before it; the
    /// next call starts at that page and fails it alone, so the failure is reported for exactly
    /// that page, after the pages before it were delivered, and the page is asked for again
    /// after the backoff.
    @Test func a_page_that_fails_in_the_middle_of_a_run_fails_alone_and_is_retried() async {
        let calls = RunSource.Calls()
        let feed = feed(RunSource(calls: calls, pageCount: 10, pagesPerCall: 4, failing: 3))
        let reader = service.reader(of: "runs")
        reader.next(10)
        await settle(feed, calls)
        #expect(calls.all == [.init(page: 1, token: nil, maxPages: 10), .init(page: 3, token: "after-2", maxPages: 8)])
        #expect(reader.log.pages.map(\.number) == [1, 2])
        let failures = reader.log.events.compactMap { event -> String? in
            if case .upstreamFailing(_, let message, _, _) = event { message } else { nil }
        }
        #expect(failures == ["page 3 cannot be read"])
        #expect(feed.counters.upstreamErrors == 1)
        clock.advance(by: .seconds(3))
        await settle(feed, calls)
        #expect(calls.all.dropFirst(2) == [.init(page: 3, token: "after-2", maxPages: 8), .init(page: 7, token: "after-6", maxPages: 4)])
        #expect(reader.log.pages.map(\.number) == Array(1...10))
        #expect(reader.log.pages.map(\.items) == (1...10).map { ["\($0)-1", "\($0)-2"] })
        #expect(feed.counters.upstreamRequests == 11, "ten pages and the failed call")
    }
}
