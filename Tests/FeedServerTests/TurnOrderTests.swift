import Testing

@testable import FeedServer

/// The event loop's turns: a socket that asks rarely is served before sockets that were served
/// lately, and sockets that are always ready still all get their turn.
struct TurnOrderTests {
    @Test func a_turn_serves_every_waiting_socket_when_there_are_few_first_reported_first() {
        var order = TurnOrder()
        for token: UInt64 in [7, 3, 5] { order.add(token, events: 1) }
        #expect(order.nextTurn().map(\.token) == [7, 3, 5])
        #expect(order.isEmpty)
        #expect(order.nextTurn().isEmpty)
    }

    @Test func a_turn_serves_a_bounded_number_of_sockets_least_recently_served_first() {
        var order = TurnOrder()
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
        var order = TurnOrder()
        order.add(1, events: 1)
        order.add(2, events: 1)
        order.add(1, events: 4)
        #expect(order.nextTurn().map { [$0.token, UInt64($0.events)] } == [[1, 5], [2, 1]])
    }

    @Test func a_socket_no_longer_watched_is_forgotten() {
        var order = TurnOrder()
        let many = (1...40).map(UInt64.init)
        for token in many { order.add(token, events: 1) }
        order.forget(20)
        var served: [UInt64] = []
        while !order.isEmpty { served += order.nextTurn().map(\.token) }
        #expect(!served.contains(20), "a socket forgotten while it waited is not served")
        #expect(served.count == many.count - 1)
    }
}
