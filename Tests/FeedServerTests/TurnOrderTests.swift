import Testing

@testable import FeedServer

/// The event loop's turns: a socket that asks rarely is served before sockets that were served
/// lately, and sockets that are always ready still all get their turn.
struct TurnOrderTests {
    private func ready(_ tokens: some Sequence<UInt64>) -> [(token: UInt64, events: UInt32)] {
        tokens.map { ($0, 1) }
    }

    @Test func a_turn_serves_every_ready_socket_when_there_are_few() {
        var order = TurnOrder()
        #expect(order.turn(of: ready([7, 3, 5])).map(\.token) == [7, 3, 5])
    }

    @Test func a_turn_serves_a_bounded_number_of_sockets_least_recently_served_first() {
        var order = TurnOrder()
        let busy = (100..<200).map(UInt64.init)
        var served: [UInt64] = []
        // A hundred sockets always ready: every one is served within ceil(100 / per turn) turns.
        let turns = (busy.count + TurnOrder.descriptorsPerTurn - 1) / TurnOrder.descriptorsPerTurn
        for _ in 0..<turns {
            let chosen = order.turn(of: ready(busy)).map(\.token)
            #expect(chosen.count == TurnOrder.descriptorsPerTurn)
            served += chosen
        }
        #expect(Set(served) == Set(busy), "no busy socket is left out")
        // A quiet socket that becomes ready goes first, ahead of the busy ones served since.
        let chosen = order.turn(of: ready(busy + [7])).map(\.token)
        #expect(chosen.first == 7)
    }

    @Test func a_socket_no_longer_watched_is_forgotten() {
        var order = TurnOrder()
        let many = (1...40).map(UInt64.init)
        _ = order.turn(of: ready(many))
        order.forget(1)
        // Forgotten, token 1 counts as never served: first in line again.
        #expect(order.turn(of: ready(many)).first?.token == 1)
    }
}
