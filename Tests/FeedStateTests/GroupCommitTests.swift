import Dispatch
import FeedKit
import Testing
import TestSupport

@testable import FeedState

@Suite struct GroupCommitTests {
    @Test func test_many_concurrent_writes_share_fewer_transactions() async throws {
        let fixture = try StoreFixture()
        let store = try await fixture.openWithFeed(pages: 10)
        let before = store.statistics
        let writers = 500
        try await withThrowingTaskGroup(of: Void.self) { group in
            for index in 0..<writers {
                group.addTask { try await store.setCursor(feed: "f", consumer: "c\(index)", generation: 1, cursor: index % 10) }
            }
            try await group.waitForAll()
        }
        let after = store.statistics
        #expect(after.committedChanges - before.committedChanges == writers)
        #expect(after.transactions - before.transactions < writers / 2)
        #expect(after.largestGroup > 1)
        store.close()
        #expect(try fixture.open().consumers(of: "f").count == writers)
    }

    @Test func test_no_write_is_confirmed_before_its_transaction_commits() async throws {
        let fixture = try StoreFixture()
        let store = try await fixture.openWithFeed(pages: 10)
        // Hold the next COMMIT until the test has looked.
        let commit = HeldCommit(store)
        let confirmed = ConfirmationCount()
        let writes = Task {
            try await withThrowingTaskGroup(of: Void.self) { group in
                for index in 0..<50 {
                    group.addTask {
                        try await store.setCursor(feed: "f", consumer: "c\(index)", generation: 1, cursor: 5)
                        confirmed.count.withLock { $0 += 1 }
                    }
                }
                try await group.waitForAll()
            }
        }
        await commit.reached()
        // Let the other writes queue up behind the held transaction.
        try await Task.sleep(for: .milliseconds(100))
        #expect(confirmed.count.withLock { $0 } == 0)
        #expect(store.consumers(of: "f").isEmpty)
        commit.release()
        try await writes.value
        #expect(confirmed.count.withLock { $0 } == 50)
        #expect(store.consumers(of: "f").count == 50)
    }

    @Test func test_a_rejected_write_does_not_fail_the_others_in_its_group() async throws {
        let fixture = try StoreFixture()
        let store = try await fixture.openWithFeed(pages: 10)
        let results = await withTaskGroup(of: Bool.self) { group in
            for index in 0..<20 {
                group.addTask {
                    // Every fourth cursor is past the pages known and must be rejected alone.
                    (try? await store.setCursor(feed: "f", consumer: "c\(index)", generation: 1, cursor: index % 4 == 0 ? 11 : 3)) != nil
                }
            }
            return await group.reduce(into: [Bool]()) { $0.append($1) }
        }
        #expect(results.count { $0 } == 15)
        #expect(store.consumers(of: "f").count == 15)
    }

    /// The main actor's way to ack (the daemon's): no completion before the COMMIT, then every
    /// one of them, in the order the writes were queued.
    @MainActor
    @Test func test_main_actor_acks_are_answered_after_their_commit_in_the_order_queued() async throws {
        let fixture = try StoreFixture()
        let store = try await fixture.openWithFeed(pages: 10)
        let commit = HeldCommit(store)
        var answered: [Int] = []
        let writes = 150
        let allAnswered = AsyncStream<Void>.makeStream()
        for index in 0..<writes {
            store.setCursor(feed: "f", consumer: "c\(index)", generation: 1, cursor: 5) { result in
                #expect((try? result.get()) != nil)
                answered.append(index)
                if answered.count == writes { allAnswered.continuation.finish() }
            }
        }
        await commit.reached()
        // The main actor is free meanwhile: an early answer would run now.
        try await Task.sleep(for: .milliseconds(100))
        #expect(answered.isEmpty)
        #expect(store.consumers(of: "f").isEmpty)
        commit.release()
        for await _ in allAnswered.stream {}
        #expect(answered == Array(0..<writes))
        #expect(store.consumers(of: "f").count == writes)
    }

    /// A large group's answers are called in slices of bounded time, each a main-queue job of its
    /// own, so main-actor work (the event loop's sockets) queued while they are answered waits for
    /// one slice, not for all of them; and they are still called in the order the writes were queued.
    @MainActor
    @Test func test_a_large_groups_answers_are_called_in_slices_of_bounded_time_in_order() async throws {
        let fixture = try StoreFixture()
        // Each answer takes 20 µs of this clock: a slice of 50 µs calls three.
        let clock = Locked(ContinuousClock.now)
        var options = StateStore.Options()
        options.answerSlicing = AnswerSlicing(timePerJob: .microseconds(50)) { clock.withLock { $0 } }
        let store = try await fixture.openWithFeed(pages: 10, options: options)
        let commit = HeldCommit(store)
        // A first write whose commit is held: the writes queued meanwhile make one group.
        var answered: [Int] = []
        // How many answers each main-queue job called: other work queued during a job (an answer
        // queues it) runs right after that job, and notes how many answers came before it.
        var slices: [Int] = []
        var sliceMarkQueued = false
        func answer(_ index: Int) {
            answered.append(index)
            clock.withLock { $0 += .microseconds(20) }
            guard !sliceMarkQueued else { return }
            sliceMarkQueued = true
            DispatchQueue.main.async {
                MainActor.assumeIsolated {
                    slices.append(answered.count - slices.reduce(0, +))
                    sliceMarkQueued = false
                }
            }
        }
        store.setCursor(feed: "f", consumer: "first", generation: 1, cursor: 5) { _ in answer(-1) }
        await commit.reached()
        let writes = 48
        let allAnswered = AsyncStream<Void>.makeStream()
        for index in 0..<writes {
            store.setCursor(feed: "f", consumer: "c\(index)", generation: 1, cursor: 5) { _ in
                answer(index)
                if index == writes - 1 { DispatchQueue.main.async { allAnswered.continuation.finish() } }
            }
        }
        commit.release()
        for await _ in allAnswered.stream {}
        #expect(store.statistics.largestGroup == writes, "the writes queued behind the held commit made one group")
        #expect(answered == [-1] + Array(0..<writes))
        #expect(slices.reduce(0, +) == writes + 1)
        #expect(slices.allSatisfy { $0 <= 3 }, "answers a job called: \(slices)")
        #expect(slices.count >= (writes + 1) / 3, "answers a job called: \(slices)")
    }

    @MainActor
    @Test func test_a_failed_commit_answers_every_main_actor_ack_with_its_error_and_stores_none() async throws {
        let fixture = try StoreFixture()
        let store = try await fixture.openWithFeed(pages: 10)
        // Writes fail as on a read-only file.
        try await store.executeOnWriter("PRAGMA query_only = 1")
        var failures: [StoreError] = []
        let writes = 20
        let allAnswered = AsyncStream<Void>.makeStream()
        for index in 0..<writes {
            store.setCursor(feed: "f", consumer: "c\(index)", generation: 1, cursor: 3) { result in
                if case .failure(let error) = result { failures.append(error) }
                if failures.count == writes { allAnswered.continuation.finish() }
            }
        }
        for await _ in allAnswered.stream {}
        #expect(failures.count == writes)
        #expect(store.consumers(of: "f").isEmpty)
        try await store.executeOnWriter("PRAGMA query_only = 0")
        store.close()
        #expect(try fixture.open().consumers(of: "f").isEmpty)
    }

    /// Prints acks per second with 1,000 concurrent writers (a figure for BENCHMARKS.md).
    @Test func test_measure_acks_per_second_with_1000_concurrent_writers() async throws {
        let fixture = try StoreFixture()
        let store = try await fixture.openWithFeed(pages: 1000)
        let clock = ContinuousClock()
        let before = store.statistics
        let rounds = 20
        let elapsed = try await clock.measure {
            try await withThrowingTaskGroup(of: Void.self) { group in
                for consumer in 0..<1000 {
                    group.addTask {
                        for round in 1...rounds { try await store.setCursor(feed: "f", consumer: "c\(consumer)", generation: 1, cursor: round) }
                    }
                }
                try await group.waitForAll()
            }
        }
        let after = store.statistics
        let seconds = Double(elapsed.components.seconds) + Double(elapsed.components.attoseconds) / 1e18
        let acks = after.committedChanges - before.committedChanges
        print("FeedState: \(acks) acks from 1000 concurrent writers in \(Int(seconds * 1000)) ms = \(Int(Double(acks) / seconds)) acks/s, \(after.transactions - before.transactions) transactions (largest group \(after.largestGroup))")
        #expect(acks == 1000 * rounds)
    }
}

/// Holds a store's next COMMIT (on the writer thread, after the group's changes are written)
/// until ``release()``.
struct HeldCommit {
    private let store: StateStore
    private let reachedCommit = DispatchSemaphore(value: 0)
    private let mayCommit = DispatchSemaphore(value: 0)

    init(_ store: StateStore) {
        self.store = store
        store.setBeforeCommit { [reachedCommit, mayCommit] in
            reachedCommit.signal()
            mayCommit.wait()
        }
    }

    /// Returns once the writer is holding a COMMIT.
    func reached() async {
        await Task.detached { [reachedCommit] in reachedCommit.wait() }.value
    }

    /// Lets the held COMMIT and every later one go ahead.
    func release() {
        store.setBeforeCommit(nil)
        mayCommit.signal()
    }
}

/// How many writes have returned so far.
private final class ConfirmationCount: Sendable {
    let count = Locked(0)
}
