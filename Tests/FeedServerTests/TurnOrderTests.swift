import Testing

@testable import FeedServer

/// A clock the tests move by hand.
final class TestClock {
    static let start = ContinuousClock.now
    private(set) var now = TestClock.start

    func advance(by duration: Duration) { now += duration }
}

extension TurnOrder {
    /// Every socket of a turn, served all at once.
    mutating func nextTurn() -> [(token: UInt64, events: UInt32)] {
        startTurn()
        var chosen: [(token: UInt64, events: UInt32)] = []
        while let socket = next() { chosen.append(socket) }
        return chosen
    }
}

/// EPOLLIN and EPOLLOUT as the loop reports them.
private let readable: UInt32 = 1
private let writable: UInt32 = 4

/// The event loop's turns: a socket that asks rarely is served before sockets that were served
/// lately, and sockets that are always ready still all get their turn.
struct TurnOrderTests {
    @Test func a_turn_serves_every_waiting_socket_when_there_are_few_first_reported_first() {
        var order = TurnOrder(now: { TestClock.start })
        for token: UInt64 in [7, 3, 5] { order.add(token, events: 1) }
        #expect(order.nextTurn().map(\.token) == [7, 3, 5])
        #expect(order.isEmpty)
        #expect(order.nextTurn().isEmpty)
    }

    @Test func a_turn_serves_a_bounded_number_of_sockets_least_recently_served_first() {
        var order = TurnOrder(now: { TestClock.start })
        let busy = (100..<200).map(UInt64.init)
        for token in busy { order.add(token, events: 1) }
        var served: [UInt64] = []
        // A hundred sockets always ready (each served one is reported again at once): every one
        // is served within ceil(100 / per turn) turns.
        let turns = (busy.count + TurnOrder.descriptorsPerTurn - 1) / TurnOrder.descriptorsPerTurn
        for _ in 0..<turns {
            let chosen = order.nextTurn().map(\.token)
            #expect(chosen.count == TurnOrder.descriptorsPerTurn)
            served += chosen
            for token in chosen { order.add(token, events: 1) }
        }
        #expect(served.prefix(busy.count).sorted() == busy, "every busy socket served once before any is served again")
        // A quiet socket that becomes ready goes first, ahead of the busy ones served since.
        order.add(7, events: 1)
        #expect(order.nextTurn().first?.token == 7)
    }

    @Test func a_socket_reported_again_while_waiting_keeps_its_place_and_gets_both_reports() {
        var order = TurnOrder(now: { TestClock.start })
        order.add(1, events: 1)
        order.add(2, events: 1)
        order.add(1, events: 4)
        #expect(order.nextTurn().map { [$0.token, UInt64($0.events)] } == [[1, 5], [2, 1]])
    }

    @Test func a_socket_no_longer_watched_is_forgotten() {
        var order = TurnOrder(now: { TestClock.start })
        let many = (1...40).map(UInt64.init)
        for token in many { order.add(token, events: 1) }
        order.forget(20)
        var served: [UInt64] = []
        while !order.isEmpty { served += order.nextTurn().map(\.token) }
        #expect(!served.contains(20), "a socket forgotten while it waited is not served")
        #expect(served.count == many.count - 1)
    }

    // MARK: Sockets that only write, and time

    @Test func sockets_that_only_write_are_served_after_the_readers_for_a_bounded_time() {
        let clock = TestClock()
        var order = TurnOrder(now: { clock.now })
        let followers = (100..<1_100).map(UInt64.init)
        for token in followers { order.add(token, events: writable) }
        order.add(7, events: readable)
        order.startTurn()
        #expect(order.next()?.token == 7, "the request goes first, ahead of a thousand writes")
        var written = 0
        while let socket = order.next() {
            #expect(socket.events == writable)
            written += 1
            clock.advance(by: .microseconds(50))
        }
        #expect(written == Int(TurnOrder.timePerTurn / .microseconds(50)), "writes stop once the turn's time is spent")
        // A ping reported now waits for no more than that: it is first in the next turn.
        order.add(8, events: readable)
        order.startTurn()
        #expect(order.next()?.token == 8)
    }

    @Test func a_turn_serves_at_least_one_writing_socket_however_long_it_takes() {
        let clock = TestClock()
        var order = TurnOrder(now: { clock.now })
        for token: UInt64 in [1, 2, 3] { order.add(token, events: writable) }
        var turns = 0
        while !order.isEmpty {
            order.startTurn()
            var served = 0
            while order.next() != nil {
                served += 1
                clock.advance(by: .milliseconds(5))
            }
            #expect(served == 1)
            turns += 1
        }
        #expect(turns == 3)
    }

    @Test func readers_stop_once_the_turns_time_is_spent_and_the_rest_go_first_next_turn() {
        let clock = TestClock()
        var order = TurnOrder(now: { clock.now })
        for token: UInt64 in 1...10 { order.add(token, events: readable) }
        order.add(50, events: writable)
        order.startTurn()
        var first: [UInt64] = []
        while let socket = order.next(), socket.events == readable {
            first.append(socket.token)
            clock.advance(by: .microseconds(100))
        }
        #expect(first == [1, 2], "two readers of 100 µs fill a turn's 200 µs; then the writer had its turn")
        #expect(order.nextTurn().map(\.token) == [3, 4, 5, 6, 7, 8, 9, 10])
    }

    @Test func a_socket_that_only_writes_is_served_once_a_turn() {
        var order = TurnOrder(now: { TestClock.start })
        for token: UInt64 in [1, 2] { order.add(token, events: writable) }
        order.startTurn()
        var served: [UInt64] = []
        while let socket = order.next() {
            served.append(socket.token)
            // Its write left output, and it asks for another turn at once.
            order.add(socket.token, events: writable)
        }
        #expect(served == [1, 2])
        #expect(order.nextTurn().map(\.token) == [1, 2])
    }

    @Test func a_writing_socket_that_gets_a_request_joins_the_readers() {
        var order = TurnOrder(now: { TestClock.start })
        for token: UInt64 in 1...40 { order.add(token, events: readable) }
        order.add(99, events: writable)
        order.add(99, events: readable)
        let served = order.nextTurn()
        #expect(served.count == TurnOrder.descriptorsPerTurn, "readers only: the writer became one")
        #expect(!served.contains { $0.token == 99 })
        var rest: [(token: UInt64, events: UInt32)] = []
        while !order.isEmpty { rest += order.nextTurn() }
        #expect(rest.filter { $0.token == 99 }.map(\.events) == [readable | writable], "served once, with both reports")
    }

    @Test func a_new_connection_waits_behind_a_client_that_was_waiting() {
        var order = TurnOrder(now: { TestClock.start })
        order.add(1, events: readable)
        #expect(order.nextTurn().map(\.token) == [1])
        // A crowd connects in a later turn (the listener's), and asks before the probe does.
        order.startTurn()
        #expect(order.next() == nil)
        let crowd = (100..<400).map(UInt64.init)
        for token in crowd { order.register(token) }
        for token in crowd { order.add(token, events: readable) }
        order.add(1, events: readable)
        #expect(order.nextTurn().first?.token == 1)
    }
}
