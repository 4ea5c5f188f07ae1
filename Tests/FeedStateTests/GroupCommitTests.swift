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
        let reachedCommit = DispatchSemaphore(value: 0)
        let mayCommit = DispatchSemaphore(value: 0)
        store.setBeforeCommit {
            reachedCommit.signal()
            mayCommit.wait()
        }
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
        await Task.detached { reachedCommit.wait() }.value
        // Let the other writes queue up behind the held transaction.
        try await Task.sleep(for: .milliseconds(100))
        #expect(confirmed.count.withLock { $0 } == 0)
        #expect(store.consumers(of: "f").isEmpty)
        store.setBeforeCommit(nil)
        mayCommit.signal()
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

/// How many writes have returned so far.
private final class ConfirmationCount: Sendable {
    let count = Locked(0)
}
