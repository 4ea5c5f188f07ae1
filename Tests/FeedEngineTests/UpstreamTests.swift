import FeedKit
import Testing

@testable import FeedEngine

/// A feed over a scripted source whose every fetch waits for the test, on a clock the test moves.
@MainActor
final class ScriptedWorld {
    let script: FetchScript
    let clock: ManualClock
    let directory: FeedDirectory
    let service: FeedService
    /// The feed's durable state, when the world keeps any.
    let store: MemoryState?
    var settings: FeedSettings
    /// Whether the source reaches any page in one call (`.direct`), else only the page after the last.
    let direct: Bool
    /// Whether the source can fetch a page again (else its pages are stored before they are served).
    let reproducesPages: Bool

    init(
        prefetch: Int = 0, timeout: Duration = .seconds(1), honoursCancellation: Bool = true, bytesPerItem: Int = 0,
        encoder: (any PageEncoder)? = nil, store: MemoryState? = nil, clusterName: String? = nil, clock: ManualClock = ManualClock(),
        seededItems: Bool = false, reproducesPages: Bool = true, direct: Bool = false, afterTurn: TurnEnd? = nil
    ) {
        script = FetchScript(honoursCancellation: honoursCancellation, seededItems: seededItems)
        self.reproducesPages = reproducesPages
        self.direct = direct
        self.clock = clock
        self.store = store
        settings = FeedSettings(name: "scripted", source: "scripted", prefetch: prefetch)
        settings.timeout = timeout
        settings.retryMaxDelay = .seconds(2)
        settings.cachePages = 8
        directory = FeedDirectory(
            store: store, encoder: encoder ?? DescribingEncoder(bytesPerItem: bytesPerItem), logger: Logger(sink: NoLog()), clock: clock)
        directory.jitter = { 1.0 }
        directory.clusterName = clusterName
        directory.afterTurn = afterTurn
        service = FeedService(directory: directory, limits: FeedService.Limits(subscriptionsPerClient: 256), logger: Logger(sink: NoLog()))
        apply()
    }

    var feed: Feed { directory["scripted"]! }

    func definition() -> FeedDefinition {
        let script = script
        let (addressing, reproduces): (PageAddressing, Bool) = (direct ? .direct : .sequential, reproducesPages)
        let make: @Sendable () -> any SourceAdapter = {
            var adapter = script.makeAdapter()
            adapter.pageAddressing = addressing
            adapter.reproducesPages = reproduces
            return adapter
        }
        return FeedDefinition(settings: settings, adapter: make(), makeAdapter: make)
    }

    func apply() {
        directory.apply([definition()])
    }

    func subscribe(after: Int = 0, follows: Bool = false, consumer: String? = nil) -> (EventLog, Reader) {
        let reader = service.reader(of: "scripted", consumer: consumer, after: after, follows: follows)
        return (reader.log, reader)
    }

    func settle() async {
        await FeedEngineTests.settle { [self] in
            "\(script.calls.count) \(script.pendingCalls.count) \(clock.sleeperCount) \(script.newDataWaiterCount) \(feed.counters.pagesFetched) \(feed.generation) \(store?.writesInFlight ?? 0) \(store?.committed.count ?? 0)"
        }
    }
}

@MainActor
@Suite(.timeLimit(.minutes(1))) struct UpstreamTests {
    /// Issue 12, defect 1, below the server: the abandoned fetch is drained before the new
    /// generation's first fetch starts, and its answer is dropped.
    @Test(arguments: [true, false])
    func a_refresh_during_a_fetch_waits_for_it_and_never_overlaps(cancellable: Bool) async {
        let world = ScriptedWorld(honoursCancellation: cancellable)
        let (log, subscription) = world.subscribe()
        subscription.next(1)
        await world.settle()
        #expect(world.script.pendingCalls.map(\.request.page) == [1])
        world.directory.refresh("scripted")
        await world.settle()
        if !cancellable {
            #expect(world.script.calls.count == 1, "nothing else is asked while the abandoned fetch runs")
            world.script.answer(.page(items: 2, next: .more(token: "stale")))
            await world.settle()
        }
        #expect(world.script.calls.count == 2)
        #expect(world.script.calls.last?.request == PageRequest(page: 1, token: nil, generation: 2, seed: world.script.calls.last!.request.seed))
        world.script.answer(.page(items: 2, next: .more(token: nil)))
        await world.settle()
        #expect(log.pages.map { [$0.generation, $0.number, $0.itemCount] } == [[2, 1, 2]])
        #expect(log.pages.map(\.firstItem) == ["1-1"])
        #expect(world.script.overlaps.isEmpty)
    }

    @Test func a_hung_fetch_is_bounded_by_timeout_and_its_adapter_replaced() async {
        let world = ScriptedWorld(timeout: .seconds(1), honoursCancellation: false)
        let (log, subscription) = world.subscribe()
        subscription.next(1)
        await world.settle()
        world.clock.advance(by: .milliseconds(1_001))
        await world.settle()
        #expect(log.events.contains { if case .upstreamFailing = $0 { true } else { false } }, "the waiting subscriber hears of it")
        #expect(world.script.calls.count == 1, "the timed-out call still runs: nothing else starts beside it")
        world.clock.advance(by: .milliseconds(1_001))
        await world.settle()
        #expect(world.script.calls.map(\.instance) == [1, 2], "a fresh instance takes over once the hung one is given up")
        world.script.answer(.page(items: 1, next: .more(token: nil)), call: 2)
        await world.settle()
        #expect(log.pages.map(\.firstItem) == ["1-1"])
        world.script.answer(.page(items: 9, next: .more(token: nil)), call: 1)
        await world.settle()
        #expect(log.pages.count == 1, "the hung instance's late answer is dropped")
        #expect(world.script.overlaps.isEmpty)
    }

    @Test func a_failure_is_retried_after_the_backoff_on_the_injected_clock() async {
        let world = ScriptedWorld()
        let (log, subscription) = world.subscribe()
        subscription.next(1)
        await world.settle()
        world.script.answer(.failure(.transient("boom")))
        await world.settle()
        world.clock.advance(by: .milliseconds(249))
        await world.settle()
        #expect(world.script.calls.count == 1, "the first retry waits 250 ms")
        world.clock.advance(by: .milliseconds(2))
        await world.settle()
        #expect(world.script.calls.count == 2)
        world.script.answer(.failure(.transient("boom")))
        await world.settle()
        world.clock.advance(by: .milliseconds(499))
        await world.settle()
        #expect(world.script.calls.count == 2, "the second waits 500 ms")
        world.clock.advance(by: .milliseconds(2))
        await world.settle()
        world.script.answer(.page(items: 1, next: .more(token: nil)))
        await world.settle()
        #expect(log.pages.map(\.number) == [1])
    }

    /// Issue 12, defect 2.
    @Test func a_reload_that_keeps_what_pages_contain_keeps_generation_cursors_and_subscribers() async {
        let world = ScriptedWorld(prefetch: 1)
        let (log, subscription) = world.subscribe()
        subscription.next(2)
        for _ in 1...3 {
            await world.settle()
            world.script.answer(.page(items: 1, next: .more(token: nil)))
        }
        await world.settle()
        let feed = world.feed
        world.settings.timeout = .seconds(3)
        world.settings.poll = .seconds(5)
        world.settings.prefetch = 2
        world.settings.retryMaxDelay = .seconds(9)
        world.settings.cachePages = 20
        world.settings.cacheBytes = 1 << 20
        world.apply()
        await world.settle()
        #expect(world.feed === feed && feed.generation == 1 && feed.settings.timeout == .seconds(3))
        #expect(feed.subscriptions[subscription.client.clientID]?.position == 2)
        #expect(!log.events.contains { if case .refreshed = $0 { true } else { false } })
        #expect(feed.cachedPages == 3, "the cache stays too")

        world.settings.options = ["v": 2]
        world.apply()
        await world.settle()
        #expect(world.feed !== feed && world.feed.generation == 2 && world.feed.subscriptions[subscription.client.clientID] != nil)
        #expect(log.events.contains { if case .refreshed(_, 2, _) = $0 { true } else { false } }, "a change to the pages starts a generation")
    }

    /// Issue 12, defect 3: a polled source at its newest page is asked again only after waiting.
    @Test func a_source_that_says_later_is_asked_again_only_after_new_data() async {
        let world = ScriptedWorld(prefetch: 2)
        let (log, subscription) = world.subscribe(follows: true)
        _ = subscription
        await world.settle()
        world.script.answer(.page(items: 1, next: .later(token: "recheck")))
        await world.settle()
        #expect(world.script.calls.count == 1, "no second fetch at once")
        #expect(world.script.newDataWaiterCount == 1)
        world.script.signalNewData()
        await world.settle()
        #expect(world.script.calls.map(\.request.token) == [nil, "recheck"])
        world.script.answer(.page(items: 1, next: .more(token: nil)))
        await world.settle()
        #expect(log.pages.map(\.number) == [1, 2])
    }

    /// Issue 12, defect 4: catching up is pipelined. The pages a reader wants next come from one
    /// chain of calls to a source that answers fast, still one call at a time, each with the token
    /// the page before returned; the page asked for first is handed out before the chain ends.
    @Test func consecutive_wanted_pages_come_from_one_run_of_calls_one_at_a_time() async {
        let world = ScriptedWorld()
        let (log, subscription) = world.subscribe()
        subscription.next(4)
        await world.settle()
        world.script.answer(.page(items: 1, next: .more(token: "after-1")))
        await world.settle()
        #expect(log.pages.map(\.number) == [1], "the first page does not wait for the rest of the run")
        #expect(world.script.pendingCalls.map(\.request.page) == [2])
        for page in 2...4 {
            world.script.answer(.page(items: 1, next: .more(token: "after-\(page)")))
            await world.settle()
        }
        #expect(log.pages.map(\.number) == [1, 2, 3, 4])
        #expect(world.script.calls.map(\.request.token) == [nil, "after-1", "after-2", "after-3"])
        #expect(world.script.overlaps.isEmpty)
        #expect(world.feed.counters.upstreamRequests == 4)
    }

    /// Issue 12, defect 4, below the server.
    @Test func reaching_page_n_of_a_directly_addressable_source_costs_one_fetch() async {
        let world = ScriptedWorld(direct: true)
        let (log, subscription) = world.subscribe(after: 49_000)
        subscription.next(2)
        await world.settle()
        world.script.answer(.page(items: 1, next: .more(token: "t")))
        await world.settle()
        world.script.answer(.page(items: 1, next: .more(token: nil)))
        await world.settle()
        #expect(world.script.calls.map(\.request.page) == [49_001, 49_002])
        #expect(world.script.calls.map(\.request.token) == [nil, "t"])
        #expect(log.pages.map(\.firstItem) == ["49001-1", "49002-1"])
    }

    /// Issue 12, defect 5: `cache_bytes` bounds what the cached pages take, whoever reads.
    @Test func cached_pages_stay_within_cache_bytes() async {
        let world = ScriptedWorld(prefetch: 0, bytesPerItem: 1_000)
        world.settings.cacheBytes = 10_000
        world.apply()
        let (log, subscription) = world.subscribe()
        for _ in 1...12 {
            subscription.next(1)
            await world.settle()
            world.script.answer(.page(items: 3, next: .more(token: nil)))
            await world.settle()
            #expect(world.feed.cachedBytes <= 10_000, "\(world.feed.cachedBytes) bytes cached")
        }
        #expect(log.pages.map(\.number) == Array(1...12))
    }
}
