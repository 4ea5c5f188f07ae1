import FeedKit
import Testing

@testable import FeedEngine

/// The ends of the event loop's turns, as the test says when they come.
@MainActor
final class ManualTurns {
    private var work: [@MainActor () -> Void] = []

    /// Whether something waits for the end of the turn.
    var isWaiting: Bool { !work.isEmpty }

    func afterTurn(_ work: @escaping @MainActor () -> Void) {
        self.work.append(work)
    }

    /// Ends the turn: runs what waited for it, and what that gives meanwhile, in order.
    func end() {
        while !work.isEmpty { work.removeFirst()() }
    }
}

/// A feed starts its fetches once the turn's answers are written (``Feed/advanceUpstreamAfterTurn()``).
@MainActor
@Suite struct TurnEndTests {
    /// The world, with a reader at page 1 and page 2 prefetched, nothing in flight.
    private func readerWithPagePrefetched() async -> (ScriptedWorld, ManualTurns, EventLog, Reader) {
        let turns = ManualTurns()
        let world = ScriptedWorld(prefetch: 1, afterTurn: turns.afterTurn)
        let (log, reader) = world.subscribe()
        reader.next(1)
        for page in 1...2 {
            turns.end()
            await world.settle()
            #expect(world.script.pendingCalls.map(\.request.page) == [page])
            world.script.answer(.page(items: 1, next: .more(token: nil)))
            await world.settle()
        }
        turns.end()
        await world.settle()
        #expect(log.pages.map(\.number) == [1])
        #expect(world.feed.cachedPages == 2 && !world.feed.upstream.hasCallInFlight)
        return (world, turns, log, reader)
    }

    @Test func a_page_answered_from_the_cache_is_delivered_before_the_prefetch_of_the_next_one_starts() async {
        let (world, turns, log, reader) = await readerWithPagePrefetched()
        // As a front's callback: the answer is in the sink when `next` returns, and is written
        // (by libmicrohttpd, after its callback) before the turn ends.
        reader.next(1)
        #expect(log.pages.map(\.number) == [1, 2])
        #expect(!world.feed.upstream.hasCallInFlight, "no fetch starts while the answer is being written")
        #expect(turns.isWaiting)
        turns.end()
        #expect(world.feed.upstream.hasCallInFlight, "the prefetch of page 3 starts once the turn is over")
        await world.settle()
        #expect(world.script.pendingCalls.map(\.request.page) == [3])
        #expect(world.script.calls.count == 3, "one upstream request per page")
    }

    @Test func a_turn_in_which_many_readers_move_makes_one_look_and_one_fetch() async {
        let (world, turns, log, reader) = await readerWithPagePrefetched()
        let others = (0..<10).map { _ in world.subscribe(after: 1).1 }
        for other in others { other.next(1) }
        reader.next(1)
        #expect(log.pages.map(\.number) == [1, 2])
        #expect(others.allSatisfy { $0.log.pages.map(\.number) == [2] })
        #expect(!world.feed.upstream.hasCallInFlight)
        turns.end()
        await world.settle()
        #expect(world.script.pendingCalls.map(\.request.page) == [3])
        #expect(world.script.overlaps.isEmpty)
    }

    @Test func a_reader_that_leaves_before_the_turn_ends_causes_no_fetch() async {
        let (world, turns, _, reader) = await readerWithPagePrefetched()
        reader.next(1)
        world.service.disconnect(reader.client)
        turns.end()
        await world.settle()
        #expect(!world.feed.upstream.hasCallInFlight, "nobody reads: nothing is prefetched")
        #expect(world.script.calls.count == 2)
    }
}
