import FeedKit

@testable import FeedEngine
@testable import FeedState

/// Durable state in memory, with FeedState's own rules (``StateSnapshot``), whose writes a test
/// can make fail as a full disk fails them: a failed write changes nothing and says why.
final class MemoryState: DurableState, Sendable {
    /// Which writes fail.
    struct Faults: Sendable {
        var cursors = false
        var pages = false
        var generations = false
        var forgets = false

        static let none = Faults()
        static let all = Faults(cursors: true, pages: true, generations: true, forgets: true)
    }

    private struct State {
        var snapshot = StateSnapshot()
        var faults = Faults.none
        var writesInFlight = 0
        var writes: [String] = []
        var holdsPageWrites = false
        var heldPageWrites: [CheckedContinuation<Void, Never>] = []
    }

    private let state = Locked(State())

    var faults: Faults {
        get { state.withLock { $0.faults } }
        set { state.withLock { $0.faults = newValue } }
    }

    /// While true, page writes wait in flight, as a slow disk holds a commit; set false, they go on.
    var holdsPageWrites: Bool {
        get { state.withLock { $0.holdsPageWrites } }
        set {
            let released = state.withLock { state in
                state.holdsPageWrites = newValue
                defer { if !newValue { state.heldPageWrites = [] } }
                return newValue ? [] : state.heldPageWrites
            }
            for write in released { write.resume() }
        }
    }

    /// Writes asked for and not answered yet (for a test's settling).
    var writesInFlight: Int { state.withLock { $0.writesInFlight } }
    /// Every write committed, described, in order.
    var committed: [String] { state.withLock { $0.writes } }

    func feed(_ name: String) -> StoredFeed? { state.withLock { $0.snapshot.feeds[name] } }

    func cursor(feed: String, consumer: String) -> StoredCursor? { state.withLock { $0.snapshot.consumers[feed]?[consumer] } }

    func cursors(of feed: String) -> [String: StoredCursor] {
        state.withLock { $0.snapshot.consumers[feed] ?? [:] }
    }

    @MainActor
    func setCursor(
        feed: String, consumer: String, generation: Int, cursor: Int, completion: @escaping @MainActor @Sendable (Result<Void, StoreError>) -> Void
    ) {
        let change = StateChange.setCursor(feed: feed, consumer: consumer, generation: generation, cursor: cursor)
        begin()
        Task { @MainActor in completion(self.commit(change, failing: \.cursors).map { _ in () }) }
    }

    nonisolated(nonsending) func forget(feed: String, consumer: String) async throws(StoreError) -> Bool {
        try await perform(.forget(feed: feed, consumer: consumer), failing: \.forgets).forgotten
    }

    nonisolated(nonsending) func startGeneration(feed: String, generation: Int, fingerprint: String, seed: String?) async throws(StoreError) {
        _ = try await perform(.startGeneration(feed: feed, generation: generation, fingerprint: fingerprint, seed: seed), failing: \.generations)
    }

    nonisolated(nonsending) func recordPages(feed: String, generation: Int, first: Int, pages: [NewPage]) async throws(StoreError) {
        await withCheckedContinuation { (write: CheckedContinuation<Void, Never>) in
            let held = state.withLock { state in
                if state.holdsPageWrites { state.heldPageWrites.append(write) }
                return state.holdsPageWrites
            }
            if !held { write.resume() }
        }
        _ = try await perform(.recordPages(feed: feed, generation: generation, first: first, pages: pages), failing: \.pages)
    }

    nonisolated(nonsending) func pageBody(feed: String, generation: Int, page: Int) async throws(StoreError) -> [UInt8]? {
        nil
    }

    // MARK: Helpers

    private func begin() {
        state.withLock { $0.writesInFlight += 1 }
    }

    /// Answers after a hop, as the real store answers from its writer thread.
    nonisolated(nonsending) private func perform(_ change: StateChange, failing fault: KeyPath<Faults, Bool>) async throws(StoreError) -> StateSnapshot.Effects {
        begin()
        await Task.yield()
        return try commit(change, failing: fault).get()
    }

    private func commit(_ change: StateChange, failing fault: KeyPath<Faults, Bool>) -> Result<StateSnapshot.Effects, StoreError> {
        state.withLock { state in
            state.writesInFlight -= 1
            if state.faults[keyPath: fault] { return .failure(StoreError(.unavailable, "cannot write state.db: the disk is full (in memory)")) }
            do throws(StoreError) {
                try state.snapshot.validate(change)
            } catch {
                return .failure(error)
            }
            state.writes.append("\(change)")
            return .success(state.snapshot.apply(change, bodyBudget: 1 << 20))
        }
    }
}
