import FeedKit
import FeedState

/// The pages of a run whose source cannot fetch them again, stored while the run fetches on, and
/// each served only once a commit holds it: after a restart, or once the cache gave it up, it is
/// served from the store as it was.
///
/// One write is in flight at a time, and the pages that come while it commits are stored together
/// by the next: so the adapter's next calls, their lines and their records overlap the commit of
/// the pages before, and the feed takes pages once per commit, not once per page. A run with
/// ``heldBytes`` waiting for the next commit waits for it before it fetches on, which bounds what
/// it holds to about twice that: those pages and the commit's. After a failed commit nothing more
/// is stored or served: the run stops there, and its source is asked for that page again with the
/// feed's backoff.
final class StoredRun: Sendable {
    /// A page waiting for its commit, with its stored record (see ``StoredPageBody``), which
    /// holds its line, not a copy of it.
    struct Waiting: Sendable {
        let fetched: FetchedPage
        let record: NewPage
        /// The adapter calls and HTTP requests made for it since the page kept before, counted
        /// once it is served (so `status` counts a page's requests by the time it has the page).
        let work: Work
        var number: Int { fetched.page.number }
        var bytes: Int { fetched.page.line.count + (record.body?.count ?? 0) }
    }

    /// Adapter calls and the HTTP requests they made.
    struct Work: Sendable {
        var calls = 0
        var requests = 0

        static func + (left: Work, right: Work) -> Work { Work(calls: left.calls + right.calls, requests: left.requests + right.requests) }
        static func - (left: Work, right: Work) -> Work { Work(calls: left.calls - right.calls, requests: left.requests - right.requests) }
    }

    /// Why pages could not be stored, and the first of them.
    struct Failure: Sendable {
        let error: SourceError
        let page: Int
    }

    /// Stores `pages` (on the main actor), serves them once they are, counting their work, and
    /// then calls `done` with nil, or with why they were not stored.
    typealias Write = @MainActor @Sendable (_ pages: [Waiting], _ done: @escaping @MainActor (SourceError?) -> Void) -> Void

    /// How many bytes of pages wait for the next commit before the run waits for one. A page's
    /// record holds its line, not a copy, so what waits is lines the feed's cache takes anyway:
    /// eight pages of 470 KB (a 1,000-item page of a blog's feed) go in one commit, not one or
    /// two, which takes most of a 20-page document's WAL syncs out of its paging. The commit in
    /// flight does not count: a run stopped by it would give the next commit a page or two, and
    /// the store a sync for them, while the run's other pages wait behind that one.
    static let heldBytes = 4 << 20

    private enum Condition {
        /// Fewer than ``heldBytes`` wait for the next commit, or nothing more will be stored.
        case room
        /// Nothing waits and nothing is being written.
        case drained
    }

    private struct State {
        var waiting: [Waiting] = []
        var isWriting = false
        /// The bytes of `waiting`.
        var waitingBytes = 0
        var failure: Failure?
        /// The work of the pages served, counted already.
        var served = Work()
        /// The run, waiting until its condition holds.
        var waiter: (condition: Condition, continuation: CheckedContinuation<Void, Never>)?

        func holds(_ condition: Condition) -> Bool {
            switch condition {
            case .room: failure != nil || waitingBytes < StoredRun.heldBytes
            case .drained: !isWriting && waiting.isEmpty
            }
        }

        /// The waiter, taken, if its condition holds now.
        mutating func wakeable() -> CheckedContinuation<Void, Never>? {
            guard let waiter, holds(waiter.condition) else { return nil }
            self.waiter = nil
            return waiter.continuation
        }
    }

    private let state = Locked(State())
    private let write: Write

    init(write: @escaping Write) {
        self.write = write
    }

    /// Whether a commit failed, so the run is to stop.
    var hasFailed: Bool { state.withLock { $0.failure != nil } }

    /// The work of the pages served, which the feed counted as it served them.
    var served: Work { state.withLock { $0.served } }

    /// Queues `fetched` for the next commit, with its record made here, off the main actor.
    func keep(_ fetched: FetchedPage, work: Work) {
        let record = StoredPageBody.record(fetched.page.published(next: fetched.next, sourcePage: fetched.request.page))
        let page = Waiting(fetched: fetched, record: record, work: work)
        let mustStart = state.withLock { state -> Bool in
            guard state.failure == nil else { return false }
            state.waiting.append(page)
            state.waitingBytes += page.bytes
            defer { state.isWriting = true }
            return !state.isWriting
        }
        if mustStart { Task { @MainActor in self.writeNext() } }
    }

    /// Returns once fewer than ``heldBytes`` wait for the next commit, or a commit failed.
    func waitForRoom() async {
        await wait(until: .room)
    }

    /// Returns once every page kept is stored and served, or dropped after a failed commit; with
    /// that failure, if one did.
    func drained() async -> Failure? {
        await wait(until: .drained)
        return state.withLock { $0.failure }
    }

    private func wait(until condition: Condition) async {
        await withCheckedContinuation { (continuation: CheckedContinuation<Void, Never>) in
            let isMet = state.withLock { state -> Bool in
                guard !state.holds(condition) else { return true }
                state.waiter = (condition, continuation)
                return false
            }
            if isMet { continuation.resume() }
        }
    }

    @MainActor
    private func writeNext() {
        let pages = state.withLock { state -> [Waiting] in
            defer {
                state.waiting = []
                state.waitingBytes = 0
            }
            if state.waiting.isEmpty { state.isWriting = false }
            return state.waiting
        }
        // Room for the run, or the run drained.
        wakeWaiter()
        guard !pages.isEmpty else { return }
        write(pages) { error in self.written(pages, error: error) }
    }

    @MainActor
    private func written(_ pages: [Waiting], error: SourceError?) {
        state.withLock { state in
            if error == nil { state.served = pages.reduce(state.served) { $0 + $1.work } }
            if let error, state.failure == nil, let first = pages.first {
                state.failure = Failure(error: error, page: first.number)
                state.waitingBytes = 0
                state.waiting = []
            }
        }
        writeNext()
    }

    private func wakeWaiter() {
        state.withLock { $0.wakeable() }?.resume()
    }
}
