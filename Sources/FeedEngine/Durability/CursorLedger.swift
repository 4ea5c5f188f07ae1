import FeedKit
import FeedState
import Glibc

/// Where a feed's consumer cursors live, and the only writer of them: the state directory, or
/// for a shared feed of a fleet, the fleet (SPEC §5, §8).
///
/// One write per consumer is in flight at a time, so a consumer's cursors reach the store in the
/// order they were asked for; cursors asked for meanwhile are merged into the next write, the
/// latest winning, and share its sync. A cursor is written only within the pages the store has
/// confirmed (``StoredPages``), after their records if need be, so a record that could not be
/// stored fails the cursor write that needs it as `store_failed`, and never makes the store
/// refuse it as out of range. No task is made for an ack whose pages are stored: an ack storm
/// costs the main actor a call per ack and one batch of answers per group commit.
@MainActor
final class CursorLedger {
    typealias Completion = (Result<Void, StoreError>) -> Void

    /// Where the cursors are kept now.
    enum Home {
        /// Nowhere (a daemon without a state directory): every write succeeds at once.
        case nowhere
        /// This instance's state directory.
        case local(any DurableState)
        /// The fleet the shared feed joined.
        case fleet(FleetLink)
        /// The fleet's, which this instance has not joined (or cannot reach): nothing can be stored.
        case unreachable(reason: String)
    }

    let feed: String
    var home: Home
    private let pages: StoredPages
    private let logger: Logger
    /// Each consumer that wrote a cursor or acknowledged since the daemon started, kept (until
    /// forgotten) so that an ack looks its consumer up once: an entry made and dropped per ack
    /// cost six look-ups of its name (String hashing, `perf record` of the C client's ack storm).
    private var records: [String: ConsumerRecord] = [:]

    init(feed: String, home: Home, pages: StoredPages, logger: Logger) {
        self.feed = feed
        self.home = home
        self.pages = pages
        self.logger = logger
    }

    /// Whether a consumer's cursor is kept anywhere (so its acks wait to be durable).
    var keepsCursors: Bool {
        if case .nowhere = home { false } else { true }
    }

    /// Whether the cursors are this instance's state directory's (whose page records they need).
    var recordsLocally: Bool {
        if case .local = home { true } else { false }
    }

    // MARK: Reading

    /// `consumer`'s cursor in the state directory for `generation` (0 if stored for another).
    func storedCursor(of consumer: String, generation: Int) -> Int? {
        guard case .local(let store) = home else { return nil }
        return store.cursor(feed: feed, consumer: consumer).map { $0.generation == generation ? PageNumber.clamped($0.cursor) : 0 }
    }

    /// Every consumer the state directory knows, with its stored cursor; empty for a feed whose
    /// cursors are the fleet's (what the local store has of them is stale). A cursor of another
    /// generation than the current one counts as 0.
    var storedCursors: [String: StoredCursor] {
        guard case .local(let store) = home else { return [:] }
        return store.cursors(of: feed)
    }

    /// When `consumer`'s cursor last moved by an acknowledgement that was made durable, since the
    /// daemon started (the state directory keeps no times).
    func lastAcknowledged(_ consumer: String) -> FeedTime? {
        records[consumer]?.lastAcknowledged
    }

    /// `consumer` acknowledged pages just now, durably.
    func noteAcknowledged(_ consumer: String) {
        var now = timespec()
        clock_gettime(CLOCK_REALTIME, &now)
        record(of: consumer).lastAcknowledged = FeedTime(millisecondsSinceEpoch: Int64(now.tv_sec) * 1_000 + Int64(now.tv_nsec) / 1_000_000)
    }

    private func record(of consumer: String) -> ConsumerRecord {
        if let known = records[consumer] { return known }
        let made = ConsumerRecord()
        records[consumer] = made
        return made
    }

    // MARK: Writing

    /// Where `consumer`, subscribing now, starts, once durable: after `after` if given (stored as
    /// its cursor), else after its stored cursor; `floor` is where a start other than the stored
    /// cursor goes at least. For a fleet's consumer, the consumer is claimed first (taken over
    /// from another instance) and its fleet-wide cursor read. A start past the pages whose records
    /// can be written yet (`recordable`) moves the consumer at once and is stored with its first ack.
    func start(consumer: String, after: Int?, floor: Int, generation: Int, recordable: (Int) -> Bool) async throws(StoreError) -> Int {
        switch home {
        case .nowhere:
            return max(PageNumber.clamped(after ?? 0), floor)
        case .unreachable(let reason):
            throw StoreError.unavailable(reason)
        case .local:
            if after == nil, let stored = storedCursor(of: consumer, generation: generation) { return stored }
            let start = max(PageNumber.clamped(after ?? 0), floor)
            if storedCursor(of: consumer, generation: generation) != start, recordable(start) {
                try await write(consumer: consumer, cursor: start, generation: generation)
            }
            return start
        case .fleet(let fleet):
            return try await fleetCall { () async throws(FleetError) in
                try await fleet.claimConsumer(feed: feed, consumer: consumer)
                if let after {
                    try await fleet.advanceCursor(feed: feed, consumer: consumer, to: FleetCursor(generation: generation, page: after))
                    return PageNumber.clamped(after)
                }
                guard let cursor = try await fleet.cursor(feed: feed, consumer: consumer), cursor.generation == generation else { return 0 }
                return PageNumber.clamped(cursor.page)
            }
        }
    }

    /// ``write(consumer:cursor:generation:completion:)`` for a caller that waits.
    func write(consumer: String, cursor: Int, generation: Int) async throws(StoreError) {
        let result = await withCheckedContinuation { (continuation: CheckedContinuation<Result<Void, StoreError>, Never>) in
            write(consumer: consumer, cursor: cursor, generation: generation) { continuation.resume(returning: $0) }
        }
        try result.get()
    }

    /// Stores `cursor` as what `consumer` acknowledged in `generation`, and calls `completion` on
    /// the main actor once it (or a cursor asked for after it) is durable, or with why not. A
    /// cursor of a generation the feed has left is moot (the new one put every cursor at 0): it
    /// succeeds without a write.
    func write(consumer: String, cursor: Int, generation: Int, completion: @escaping Completion) {
        if case .nowhere = home { return completion(.success(())) }
        let entry = record(of: consumer)
        entry.writes.queue(cursor: cursor, generation: generation, waiter: completion)
        startWrite(for: consumer, of: entry)
    }

    private func startWrite(for consumer: String, of record: ConsumerRecord) {
        guard !record.writes.inFlight, let next = record.writes.next else { return }
        record.writes.start()
        let finish: StoreCompletion = { [self] result in
            let waiters = record.writes.finish()
            startWrite(for: consumer, of: record)
            waiters.call(with: result)
        }
        switch home {
        case .nowhere:
            finish(.success(()))
        case .unreachable(let reason):
            finish(.failure(.unavailable(reason)))
        case .fleet(let fleet):
            // A local generation's cursor, asked for while the feed served alone and queued behind
            // a write then in flight, is moot once the feed has joined again: the fleet never uses
            // that number, and a cursor stored under it would hide the consumer's fleet cursor.
            guard next.generation <= StoredFeed.maximumGeneration else { return finish(.success(())) }
            Task { @MainActor in
                do throws(StoreError) {
                    try await fleetCall { () async throws(FleetError) in
                        try await fleet.advanceCursor(feed: feed, consumer: consumer, to: FleetCursor(generation: next.generation, page: next.cursor))
                    }
                    finish(.success(()))
                } catch {
                    finish(.failure(error))
                }
            }
        case .local(let store):
            writeLocally(next, of: consumer, to: store, finish: finish)
        }
    }

    /// What the store calls once a write is durable, or with why not.
    private typealias StoreCompletion = @MainActor @Sendable (Result<Void, StoreError>) -> Void

    /// The usual case of an ack: the store has the pages up to the cursor, so the cursor is
    /// queued to the writer at once, `finish` itself its completion (no closure is made for it);
    /// else after their records.
    private func writeLocally(_ next: (cursor: Int, generation: Int), of consumer: String, to store: any DurableState, finish: @escaping StoreCompletion) {
        guard next.generation == pages.generation else { return finish(.success(())) }
        if next.cursor <= pages.confirmed, pages.isGenerationStored {
            return store.setCursor(feed: feed, consumer: consumer, generation: next.generation, cursor: next.cursor, completion: finish)
        }
        pages.record(through: next.cursor) { [pages, feed] result in
            switch result {
            case .success where next.generation == pages.generation:
                store.setCursor(feed: feed, consumer: consumer, generation: next.generation, cursor: next.cursor, completion: finish)
            case .success: finish(.success(()))
            case .failure(let error): finish(.failure(error))
            }
        }
    }

    /// Forgets `consumer`'s cursor: the fleet's first (a consumer forgotten here only would resume
    /// from it), then this instance's. False if neither had one.
    func forget(consumer: String, in store: (any DurableState)?) async throws(StoreError) -> Bool {
        var forgotten = false
        switch home {
        case .unreachable(let reason):
            throw StoreError.unavailable(reason)
        case .fleet(let fleet):
            try await fleetCall { () async throws(FleetError) in try await fleet.forgetCursor(feed: feed, consumer: consumer) }
            forgotten = true
        case .nowhere, .local:
            break
        }
        if let store { forgotten = try await store.forget(feed: feed, consumer: consumer) || forgotten }
        if let record = records[consumer] {
            record.lastAcknowledged = nil
            if record.writes.isIdle { records[consumer] = nil }
        }
        return forgotten
    }

    /// Forgets `consumer`'s cursor of `feed`, a feed not running (removed from the configuration).
    static func forget(consumer: String, of feed: String, in store: any DurableState) async throws(StoreError) -> Bool {
        try await store.forget(feed: feed, consumer: consumer)
    }

    /// Runs `body` against the fleet, its failure told as the store's.
    private func fleetCall<Value>(_ body: () async throws(FleetError) -> Value) async throws(StoreError) -> Value {
        do {
            return try await body()
        } catch {
            throw StoreError.unavailable(error.description)
        }
    }
}

/// What the ledger keeps of one consumer.
@MainActor
private final class ConsumerRecord {
    var writes = CursorWrites()
    var lastAcknowledged: FeedTime?
}

/// One consumer's cursor writes: the one in flight with everyone waiting for it, and the cursor
/// to write next with everyone waiting for that.
private struct CursorWrites {
    private(set) var inFlight = false
    private(set) var next: (cursor: Int, generation: Int)?
    private var waiters = Waiters()
    private var inFlightWaiters = Waiters()

    /// Who waits for a write: nearly always one ack, kept without an array (an array made and
    /// freed per ack showed in `perf record` of the C client's ack storm).
    struct Waiters {
        private var first: CursorLedger.Completion?
        private var more: [CursorLedger.Completion] = []

        mutating func append(_ waiter: @escaping CursorLedger.Completion) {
            if first == nil { first = waiter } else { more.append(waiter) }
        }

        /// Calls each, in the order they came.
        func call(with result: Result<Void, StoreError>) {
            first?(result)
            for waiter in more { waiter(result) }
        }
    }

    /// Nothing in flight, nothing to write.
    var isIdle: Bool { !inFlight && next == nil }

    mutating func queue(cursor: Int, generation: Int, waiter: @escaping CursorLedger.Completion) {
        // A later generation's cursor replaces an earlier one's; within one, the furthest wins.
        if let current = next, current.generation == generation, current.cursor > cursor {
            waiters.append(waiter)
            return
        }
        next = (cursor, generation)
        waiters.append(waiter)
    }

    /// The next cursor goes out: its waiters now wait for the write in flight.
    mutating func start() {
        inFlight = true
        next = nil
        inFlightWaiters = waiters
        waiters = Waiters()
    }

    /// The write in flight is done: returns who waited for it.
    mutating func finish() -> Waiters {
        inFlight = false
        defer { inFlightWaiters = Waiters() }
        return inFlightWaiters
    }
}
