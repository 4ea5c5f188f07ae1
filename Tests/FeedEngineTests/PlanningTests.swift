import FeedKit
import Testing

@testable import FeedEngine

/// ``FetchPlanner``, ``GenerationPaging`` and ``PageCache``'s eviction alone.
@MainActor
@Suite struct PlanningTests {
    let demand = FetchPlanner.Demand(prefetch: 2, cachePages: 8)
    let look = FetchPlanner.Look(callID: 1, generation: 1, subscriptionCount: 2)

    func page(_ number: Int, bytes: Int = 0) -> Page {
        Page(feed: "f", generation: 1, number: number, items: [], isLast: false, encoder: DescribingEncoder(bytesPerItem: bytes))
    }

    func table(_ readers: [(position: Int, asks: Int)]) -> SubscriptionTable {
        var table = SubscriptionTable()
        for (index, reader) in readers.enumerated() {
            let subscription = Subscription(client: ClientID(value: index), sink: nil, consumer: nil, follows: false, after: reader.position)
            if reader.asks > 0 { subscription.ask(reader.asks, replyTo: nil) }
            _ = table.add(subscription)
        }
        return table
    }

    func paging(direct: Bool = true) -> GenerationPaging {
        GenerationPaging(number: 1, addressing: direct ? .direct : .sequential, wraps: false, seed: "s")
    }

    @Test func a_page_someone_waits_for_comes_before_any_prefetch() {
        var planner = FetchPlanner()
        let subscriptions = table([(position: 0, asks: 0), (position: 10, asks: 1)])
        guard case .fetch(let step, let target, let urgent) = planner.plan(subscriptions, demand: demand, cache: PageCache(), paging: paging(), look: look)
        else {
            Issue.record("nothing planned")
            return
        }
        #expect(step.page == 11 && target == 11 && urgent && step.jumped, "page 11 is awaited; page 1 only prefetched")
    }

    @Test func with_nothing_missing_the_next_look_is_skipped_until_something_it_depends_on_changes() {
        var planner = FetchPlanner()
        var cache = PageCache()
        for number in 1...2 { cache.insert(page(number)) }
        let subscriptions = table([(position: 0, asks: 0)])
        let plan = planner.plan(subscriptions, demand: demand, cache: cache, paging: paging(), look: look)
        #expect(plan == nil)
        let moved = subscriptions.all.first!
        #expect(planner.canSkip(after: moved, look: look, demand: demand, cache: cache, paging: paging()))
        #expect(!planner.canSkip(after: moved, look: FetchPlanner.Look(callID: 2, generation: 1, subscriptionCount: 2), demand: demand, cache: cache, paging: paging()))
        let ahead = Subscription(client: moved.client, sink: nil, consumer: nil, follows: false, after: 0)
        ahead.ask(1, replyTo: nil)
        _ = ahead.deliver(page(1))
        #expect(!planner.canSkip(after: ahead, look: look, demand: demand, cache: cache, paging: paging()), "its own missing page counts")
        planner.forget()
        #expect(!planner.canSkip(after: moved, look: look, demand: demand, cache: cache, paging: paging()))
    }

    @Test func a_live_sources_newest_page_is_waited_for_not_fetched() {
        var planner = FetchPlanner()
        var paging = paging(direct: false)
        paging.record(page: 1, request: PageRequest(page: 1, token: nil, generation: 1, seed: "s"), next: .later(token: "t"), isEmpty: false, jumped: false)
        var cache = PageCache()
        cache.insert(page(1))
        guard case .waitForNewData(let step) = planner.plan(table([(position: 1, asks: 1)]), demand: demand, cache: cache, paging: paging, look: look)
        else {
            Issue.record("page 2 was not waited for")
            return
        }
        #expect(step.page == 2 && step.request.token == "t")
    }

    @Test func a_run_brings_the_pages_on_the_way_and_those_wanted_while_the_cache_has_room() {
        var cache = PageCache()
        let limits = PageCache.Limits(pages: 4, bytes: 1 << 20)
        let subscriptions = table([(position: 0, asks: 6)])
        let wanted = { FetchPlanner.isWanted($0, by: subscriptions, demand: demand) }
        let run = FetchPlanner.runLength(from: 1, toward: 1, cache: &cache, limits: limits, paging: paging(), wanted: wanted)
        #expect(run == 4, "the cache's four pages")
        cache.insert(page(3))
        let shorter = FetchPlanner.runLength(from: 1, toward: 6, cache: &cache, limits: limits, paging: paging(), wanted: wanted)
        #expect(shorter == 2, "up to a cached page")
    }

    @Test func a_prefetch_replaces_only_unwanted_pages_and_an_awaited_page_may_replace_prefetched_ones() {
        var cache = PageCache()
        for number in 1...4 { cache.insert(page(number)) }
        let limits = PageCache.Limits(pages: 4, bytes: 1 << 20)
        let everythingWanted = cache.makeRoom(within: limits, urgent: false, wanted: { _ in true }, awaited: { _ in false })
        #expect(!everythingWanted && cache.count == 4, "a prefetch is skipped")
        let room = cache.makeRoom(within: limits, urgent: true, wanted: { _ in true }, awaited: { $0 == 1 })
        #expect(room)
        #expect(cache.numbers == [1, 2, 3], "the furthest prefetched page gave way")
        let over = cache.makeRoom(within: PageCache.Limits(pages: 3, bytes: 1 << 20), urgent: true, wanted: { _ in true }, awaited: { _ in true })
        #expect(over)
        #expect(cache.count == 3, "every page awaited: the fetch goes ahead, one over")
        cache.trim(to: PageCache.Limits(pages: 1, bytes: 1 << 20), wanted: { $0 == 2 })
        #expect(cache.numbers == [2])
    }

    @Test func the_tokens_a_store_keeps_are_known_for_pages_fetched_or_addressable() {
        var sequential = paging(direct: false)
        #expect(sequential.knowsTokens(through: 0) && !sequential.knowsTokens(through: 1))
        sequential.record(page: 1, request: PageRequest(page: 1, token: nil, generation: 1, seed: "s"), next: .end, isEmpty: false, jumped: false)
        #expect(sequential.knowsTokens(through: 1), "the last page's record holds no token, and is known")
        #expect(paging(direct: true).knowsTokens(through: 49_000))
    }
}
