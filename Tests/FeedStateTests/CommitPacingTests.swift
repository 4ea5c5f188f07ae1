import Dispatch
import FeedKit
import Testing
import TestSupport

@testable import FeedState

/// ``CommitPacing``: after a busy transaction the next one waits out the window and takes in
/// what comes meanwhile; changes that come one at a time never wait. The window is held by the
/// test, not timed.
@Suite(.timeLimit(.minutes(1))) struct CommitPacingTests {
    /// The writer's pacing waits here until the test opens it.
    final class Gate: Sendable {
        let reached = DispatchSemaphore(value: 0)
        let opened = DispatchSemaphore(value: 0)
        let waits = Locked(0)

        var pacing: CommitPacing {
            CommitPacing(window: .seconds(60), busyGroup: 3) { [self] _ in
                waits.withLock { $0 += 1 }
                reached.signal()
                opened.wait()
            }
        }

        /// Whether the writer came to wait within `seconds`.
        func writerWaits(within seconds: Int = 10) async -> Bool {
            await Task.detached { [reached] in reached.wait(timeout: .now() + .seconds(seconds)) == .success }.value
        }
    }

    func openStore(_ fixture: StoreFixture, gate: Gate) async throws -> StateStore {
        var options = StateStore.Options()
        options.commitPacing = gate.pacing
        let store = try fixture.open(options: options)
        try await store.startGeneration(feed: "f", generation: 1, fingerprint: "shape-1", seed: "s1")
        for page in 1...10 { try await store.recordPage(feed: "f", generation: 1, page: page, token: "t\(page + 1)", body: nil) }
        return store
    }

    @Test func test_changes_made_one_at_a_time_never_wait_for_the_window() async throws {
        let fixture = try StoreFixture()
        let gate = Gate()
        let store = try await openStore(fixture, gate: gate)
        for cursor in 1...10 { try await store.setCursor(feed: "f", consumer: "dora", generation: 1, cursor: cursor) }
        #expect(gate.waits.withLock { $0 } == 0)
        #expect(store.cursor(feed: "f", consumer: "dora")?.cursor == 10)
    }

    @MainActor
    @Test func test_after_a_busy_group_the_next_transaction_takes_in_what_comes_within_the_window() async throws {
        let fixture = try StoreFixture()
        let gate = Gate()
        let store = try await openStore(fixture, gate: gate)
        // A busy group: three writes queued behind a held commit.
        let commit = HeldCommit(store)
        let busy = AsyncStream<Void>.makeStream()
        var busyAnswers = 0
        for index in 0...3 {
            store.setCursor(feed: "f", consumer: "busy\(index)", generation: 1, cursor: 1) { _ in
                busyAnswers += 1
                if busyAnswers == 4 { busy.continuation.finish() }
            }
            if index == 0 { await commit.reached() }
        }
        commit.release()
        for await _ in busy.stream {}
        let transactionsBefore = store.statistics.transactions

        var answered: [String] = []
        let all = AsyncStream<Void>.makeStream()
        func write(_ consumer: String) {
            store.setCursor(feed: "f", consumer: consumer, generation: 1, cursor: 2) { result in
                if case .success = result { answered.append(consumer) }
                if answered.count == 4 { all.continuation.finish() }
            }
        }
        write("a")
        #expect(await gate.writerWaits(), "the write after a busy group did not wait for the window")
        for consumer in ["b", "c", "d"] { write(consumer) }
        #expect(answered.isEmpty, "nothing is answered before its commit")
        gate.opened.signal()
        for await _ in all.stream {}
        #expect(answered == ["a", "b", "c", "d"])
        #expect(store.statistics.transactions - transactionsBefore == 1, "the writes within the window made one group")
        #expect(["a", "b", "c", "d"].allSatisfy { store.cursor(feed: "f", consumer: $0)?.cursor == 2 })
    }
}
