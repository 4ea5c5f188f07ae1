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
        for token in crowd { order.register(token, kind: .ordinary) }
        for token in crowd { order.add(token, events: readable) }
        order.add(1, events: readable)
        #expect(order.nextTurn().first?.token == 1)
    }

    // MARK: Brief requests first

    /// Registers `tokens` in a turn of their own, as the listener's turn does.
    private static func connect(_ tokens: [UInt64], kind: TurnOrder.Kind?, to order: inout TurnOrder) {
        order.startTurn()
        #expect(order.next() == nil)
        for token in tokens { order.register(token, kind: kind) }
    }

    @Test func a_brief_socket_goes_ahead_of_readers_served_less_lately() {
        var order = TurnOrder(now: { TestClock.start })
        let consumers = (100..<1_100).map(UInt64.init)
        Self.connect(consumers, kind: .ordinary, to: &order)
        Self.connect([7], kind: .brief, to: &order)
        order.add(7, events: readable)
        #expect(order.nextTurn().map(\.token) == [7])
        // A thousand consumers ask, then the pinger, served a turn ago, pings again.
        for token in consumers { order.add(token, events: readable) }
        order.add(7, events: readable)
        let turn = order.nextTurn().map(\.token)
        #expect(turn.first == 7, "by recency alone the ping waited behind all \(consumers.count) consumers")
        #expect(turn.count == TurnOrder.descriptorsPerTurn)
    }

    @Test func a_new_connections_first_request_is_looked_at_once() {
        var order = TurnOrder(now: { TestClock.start })
        let followers = (100..<1_100).map(UInt64.init)
        Self.connect(followers, kind: nil, to: &order)
        Self.connect([7], kind: nil, to: &order)
        var looks = 0
        for token in followers {
            order.add(token, events: readable) {
                looks += 1
                return .ordinary
            }
        }
        order.add(7, events: readable) {
            looks += 1
            return .brief
        }
        #expect(order.nextTurn().first?.token == 7, "the probe's first ping goes ahead of a thousand first subscribes")
        #expect(looks == followers.count + 1)
        // Once told, the order keeps it until the socket's turn says otherwise.
        order.add(7, events: readable) {
            looks += 1
            return .ordinary
        }
        #expect(order.nextTurn().first?.token == 7)
        #expect(looks == followers.count + 1)
    }

    @Test func a_socket_whose_input_tells_nothing_is_ordinary_and_looked_at_again() {
        var order = TurnOrder(now: { TestClock.start })
        Self.connect([1], kind: .ordinary, to: &order)
        Self.connect([7], kind: nil, to: &order)
        order.add(1, events: readable)
        order.add(7, events: readable) { nil }
        #expect(order.nextTurn().map(\.token) == [1, 7], "half a line: by recency, as ordinary")
        order.add(1, events: readable)
        order.add(7, events: readable) { .brief }
        #expect(order.nextTurn().map(\.token) == [7, 1])
    }

    @Test func what_a_sockets_turn_asked_decides_its_next_line() {
        var order = TurnOrder(now: { TestClock.start })
        Self.connect([1, 2], kind: .ordinary, to: &order)
        Self.connect([7], kind: .brief, to: &order)
        for token: UInt64 in [7, 1, 2] { order.add(token, events: readable) }
        #expect(order.nextTurn().map(\.token) == [7, 1, 2])
        // The pinger sent a `subscribe`, a consumer a `ping`.
        order.expect(7, .ordinary)
        order.expect(2, .brief)
        for token: UInt64 in [7, 1, 2] { order.add(token, events: readable) }
        #expect(order.nextTurn().map(\.token) == [2, 7, 1])
    }

    @Test func a_writing_socket_that_gets_a_brief_request_joins_the_brief_readers() {
        var order = TurnOrder(now: { TestClock.start })
        Self.connect((1...40).map(UInt64.init), kind: .ordinary, to: &order)
        Self.connect([99], kind: .brief, to: &order)
        for token: UInt64 in 1...40 { order.add(token, events: readable) }
        order.add(99, events: writable)
        order.add(99, events: readable)
        let served = order.nextTurn()
        #expect(served.first.map { [$0.token, UInt64($0.events)] } == [99, UInt64(readable | writable)])
        #expect(served.filter { $0.token == 99 }.count == 1, "its place in the writers' line is gone")
    }

    @Test func however_many_brief_sockets_are_always_ready_every_busy_one_is_served_within_as_many_turns_as_there_are() {
        var order = TurnOrder(now: { TestClock.start })
        let busy = (100..<105).map(UInt64.init)
        let brief = (1...59).map(UInt64.init)
        Self.connect(busy, kind: .ordinary, to: &order)
        Self.connect(brief, kind: .brief, to: &order)
        for token in busy + brief { order.add(token, events: readable) }
        var lastServed: [UInt64: Int] = [:]
        for turn in 1...50 {
            let chosen = order.nextTurn().map(\.token)
            #expect(chosen.filter { !brief.contains($0) }.count == 1, "one busy socket a turn, past the bounds")
            #expect(chosen.count == TurnOrder.descriptorsPerTurn + 1)
            for token in busy where chosen.contains(token) {
                if let last = lastServed[token] { #expect(turn - last == busy.count, "busy socket \(token) waited \(turn - last) turns") }
                lastServed[token] = turn
            }
            // Every socket served is ready again at once.
            for token in chosen { order.add(token, events: readable) }
        }
        #expect(lastServed.count == busy.count)
    }

    @Test func the_ordinary_reader_a_turn_owes_is_served_even_after_the_turns_time_is_spent() {
        let clock = TestClock()
        var order = TurnOrder(now: { clock.now })
        Self.connect([1, 2], kind: .ordinary, to: &order)
        Self.connect([7], kind: .brief, to: &order)
        for token: UInt64 in [1, 2, 7] { order.add(token, events: readable) }
        order.add(50, events: writable)
        order.startTurn()
        #expect(order.next()?.token == 7)
        // The thread was off its core: the brief turn took a millisecond.
        clock.advance(by: .milliseconds(1))
        #expect(order.next()?.token == 1)
        #expect(order.next()?.token == 50, "then the writers: at least one of them too")
        #expect(order.next() == nil)
        #expect(order.nextTurn().map(\.token) == [2])
    }
}

/// What a connection's turn asked, which the loop orders its next turn by.
struct AskedRequestsTests {
    private static func kind(of lines: [String]) -> TurnOrder.Kind? {
        var asked = AskedRequests()
        for line in lines {
            asked.read(line.utf8.count + 1)
            let request = try? RequestDecoder.decode(Array(line.utf8)[...]).get().request
            asked.asked(brief: request?.isBrief ?? false)
        }
        return asked.kind
    }

    @Test func pings_are_brief_in_either_form_and_anything_else_among_them_is_not() {
        #expect(Self.kind(of: ["ping"]) == .brief)
        #expect(Self.kind(of: [#"{"op":"ping","id":7}"#, "ping"]) == .brief)
        #expect(Self.kind(of: ["ping", "next users 3"]) == .ordinary)
        #expect(Self.kind(of: [#"{"op":"subscribe","feed":"users","follow":true}"#]) == .ordinary)
        #expect(Self.kind(of: ["pong"]) == .ordinary, "a line that decodes to no request")
    }

    @Test func only_lines_naming_a_brief_op_are_decoded_to_tell_a_new_connections_kind() {
        let brief = ["ping", "quit", #"{"op":"ping","id":7}"#, #"{"id":"a", "op": "quit"}"#]
        let ordinary = [
            #"{"op":"subscribe","feed":"users","follow":true}"#, "next users 3", #"{"op":"ack","feed":"numbers","page":12}"#,
            "status", #"{"op":"metrics"}"#,
        ]
        for line in brief + ordinary {
            let decoded = try? RequestDecoder.decode(Array(line.utf8)[...]).get().request
            #expect(decoded?.isBrief == brief.contains(line), "\(line)")
            #expect(Request.mayBeBrief(Array(line.utf8)[...]) == brief.contains(line), "\(line)")
        }
    }

    @Test func a_pipeline_of_pings_is_ordinary_and_input_without_a_request_tells_nothing() {
        #expect(Self.kind(of: Array(repeating: "ping", count: AskedRequests.briefInputBytes / 5)) == .brief)
        #expect(Self.kind(of: Array(repeating: "ping", count: AskedRequests.briefInputBytes / 5 + 1)) == .ordinary)
        var partial = AskedRequests()
        partial.read(3)
        #expect(partial.kind == nil)
    }
}
