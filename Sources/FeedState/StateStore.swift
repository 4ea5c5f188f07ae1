import FeedKit
import Glibc

/// feedd's durable state: per feed its generation, content fingerprint, seed and the pages of
/// the generation (their continuation tokens, and within a budget their items); per consumer
/// its generation and cursor. It lives in `<state_dir>/state.db`, an SQLite database in WAL mode,
/// and the directory is locked for as long as the store is open.
///
/// Reads are synchronous and come from an in-memory mirror of what is committed. Writes are
/// `async`: each is queued to one writer thread (never the caller's), committed together with
/// whatever else was queued meanwhile, and returns only once its transaction is durable. A write
/// that throws changed nothing, on disk or in the mirror. Writes are queued before the caller
/// first suspends (they run on the caller's actor until then), so writes made one after the other
/// from one actor are committed in that order.
///
/// ```swift
/// let store = try StateStore(directory: "/var/lib/feedd", logger: logger)
/// try await store.startGeneration(feed: "users", generation: 1, fingerprint: "9f…", seed: "a1b2")
/// try await store.recordPage(feed: "users", generation: 1, page: 1, token: "2", body: nil)
/// try await store.setCursor(feed: "users", consumer: "dora", generation: 1, cursor: 1)
/// store.cursor(feed: "users", consumer: "dora")   // StoredCursor(generation: 1, cursor: 1)
/// ```
public final class StateStore: Sendable {
    /// Limits of the store.
    public struct Options: Sendable {
        /// The most bytes of page items kept per feed (`daemon.state_page_bytes`); past it the
        /// oldest pages of the generation lose their items first (their tokens stay), and
        /// ``StoredFeed/bodiesDroppedThrough`` says which.
        public var pageBodyBudget: Int

        /// How the writer gathers groups under load (tests hold it).
        var commitPacing = CommitPacing.standard
        /// How the main-actor answers of a commit are sliced into main-queue jobs (tests time it).
        var answerSlicing = AnswerSlicing.standard

        public init(pageBodyBudget: Int = Self.defaultPageBodyBudget) {
            self.pageBodyBudget = pageBodyBudget
        }

        /// 16 MiB per feed.
        public static let defaultPageBodyBudget = 16 << 20
    }

    /// What the writer has done since the store opened.
    public struct Statistics: Sendable {
        /// Changes confirmed durable.
        public let committedChanges: Int
        /// Transactions committed (each one sync of the write-ahead log).
        public let transactions: Int
        /// Transactions that failed and were rolled back.
        public let failedTransactions: Int
        /// The most changes one transaction carried.
        public let largestGroup: Int
    }

    /// The file name of the database inside the state directory.
    public static let databaseName = "state.db"

    public let directory: String
    public var databasePath: String { "\(directory)/\(Self.databaseName)" }
    private let lock: StateDirectoryLock
    private let writer: StateWriter

    /// Locks `directory` (creating it if needed), opens or creates `state.db`, checks its
    /// integrity and loads it. A database that is empty, damaged or of an unknown schema is an
    /// error (``StoreError/Kind/damaged``), unless the directory holds no database yet; rows that
    /// contradict the rest (a cursor outside its generation's pages, say) are logged and removed.
    public init(directory: String, options: Options = Options(), logger: Logger) throws(StoreError) {
        self.directory = directory
        lock = try StateDirectoryLock(directory: directory)
        let path = "\(directory)/\(Self.databaseName)"
        if try StateFiles.isMissing(path) { try StateFiles.createDatabase(at: path) }
        // The writer's commits carry page bodies of up to megabytes; `configureForState` makes
        // every commit sync, which gathering the log's writes needs.
        let connection = try SQLiteConnection(path: path, create: false, gathersLogWrites: true)
        try connection.configureForState()
        if let problems = try connection.integrityProblems() {
            throw StoreError(.damaged, "\(path) is damaged: \(problems.prefix(3).joined(separator: "; "))", advice: StoreError.repairAdvice)
        }
        try StateFiles.checkSchema(of: connection)
        let (snapshot, rejected) = try connection.loadSnapshot()
        for problem in rejected { logger.error("\(path): rejected \(problem)") }
        if !rejected.isEmpty {
            // Left out of the state either way; a full disk only postpones deleting them.
            do throws(StoreError) {
                try connection.removeRowsOutside(snapshot)
            } catch {
                logger.error("\(path): the rejected rows stay in the file for now: \(error)")
            }
        }
        writer = StateWriter(connection: connection, snapshot: snapshot, bodyBudget: options.pageBodyBudget, pacing: options.commitPacing, slicing: options.answerSlicing)
    }

    deinit {
        close()
    }

    /// Commits what is queued, closes the database and releases the directory (also done on deinit).
    public func close() {
        writer.close()
        lock.release()
    }

    // MARK: Reads, from the mirror

    /// A feed's generation, fingerprint, seed and pages, if any generation is stored.
    public func feed(_ name: String) -> StoredFeed? {
        writer.mirror.withLock { $0.feeds[name] }
    }

    /// A feed's stored generation, if any; cheaper than ``feed(_:)``, which copies its pages.
    public func generation(feed name: String) -> Int? {
        writer.mirror.withLock { $0.feeds[name]?.generation }
    }

    /// Every feed with stored state, by name.
    public var feedNames: [String] {
        writer.mirror.withLock { $0.feeds.keys.sorted() }
    }

    /// A consumer's stored cursor on `feed`, if it has one.
    public func cursor(feed: String, consumer: String) -> StoredCursor? {
        writer.mirror.withLock { $0.consumers[feed]?[consumer] }
    }

    /// Every consumer of `feed` with its cursor, sorted by name.
    public func consumers(of feed: String) -> [(name: String, cursor: StoredCursor)] {
        cursors(of: feed).map { ($0.key, $0.value) }.sorted { $0.name < $1.name }
    }

    /// Every consumer of `feed` with its cursor, by name: the mirror's own dictionary, shared
    /// (copy on write), so reading it costs the lock and no copy.
    public func cursors(of feed: String) -> [String: StoredCursor] {
        writer.mirror.withLock { $0.consumers[feed] ?? [:] }
    }

    /// What the writer has done so far.
    public var statistics: Statistics {
        let counts = writer.counts.withLock { $0 }
        return Statistics(
            committedChanges: counts.committedChanges, transactions: counts.transactions,
            failedTransactions: counts.failedTransactions, largestGroup: counts.largestGroup)
    }

    // MARK: Writes, durable when they return

    /// Stores `cursor` as the last page `consumer` acknowledged in `generation` of `feed`, which
    /// must be the feed's current generation, with `cursor` within its known pages.
    nonisolated(nonsending) public func setCursor(feed: String, consumer: String, generation: Int, cursor: Int) async throws(StoreError) {
        _ = try await perform(.setCursor(feed: feed, consumer: consumer, generation: generation, cursor: cursor))
    }

    /// ``setCursor(feed:consumer:generation:cursor:)`` for a caller on the main actor that acks
    /// at a high rate: no task and no suspension. The write is queued before this returns, so it
    /// commits after every write queued before it; `completion` runs on the main actor once the
    /// cursor is durable, or with why it was not stored. The completions of one transaction run
    /// together in one main-queue job, in the order their writes were queued.
    @MainActor
    public func setCursor(
        feed: String, consumer: String, generation: Int, cursor: Int, completion: @escaping @MainActor @Sendable (Result<Void, StoreError>) -> Void
    ) {
        let change = StateChange.setCursor(feed: feed, consumer: consumer, generation: generation, cursor: cursor)
        writer.enqueue(.change(change, .onMainActor { result in completion(result.map { _ in () }) }))
    }

    /// Deletes a consumer's cursor; false if it had none.
    @discardableResult
    nonisolated(nonsending) public func forget(feed: String, consumer: String) async throws(StoreError) -> Bool {
        try await perform(.forget(feed: feed, consumer: consumer)).forgotten
    }

    /// Makes `generation` the feed's current one, with the fingerprint of what shapes its pages
    /// and the seed it started with. Its stored pages are dropped and every consumer of the feed
    /// goes back to 0, in the same transaction. A generation lower than the stored one is
    /// rejected; the stored one again is accepted only with the same fingerprint and seed.
    nonisolated(nonsending) public func startGeneration(feed: String, generation: Int, fingerprint: String, seed: String?) async throws(StoreError) {
        _ = try await perform(.startGeneration(feed: feed, generation: generation, fingerprint: fingerprint, seed: seed))
    }

    /// Records page `page` of the feed's current `generation`: the continuation token that
    /// fetches the page after it, and, for a source that cannot fetch the same page again, its
    /// items (`body`, kept within ``Options/pageBodyBudget``). Pages are recorded in order;
    /// recording one again replaces it.
    nonisolated(nonsending) public func recordPage(feed: String, generation: Int, page: Int, token: String?, body: [UInt8]?) async throws(StoreError) {
        try await recordPages(feed: feed, generation: generation, first: page, pages: [NewPage(token: token, body: body)])
    }

    /// Records pages `first`, `first + 1`, … in one change, so they are stored in order or not at all.
    nonisolated(nonsending) public func recordPages(feed: String, generation: Int, first: Int, pages: [NewPage]) async throws(StoreError) {
        guard !pages.isEmpty else { return }
        _ = try await perform(.recordPages(feed: feed, generation: generation, first: first, pages: pages))
    }

    /// The items stored with a page, if they were kept; read on the writer thread.
    nonisolated(nonsending) public func pageBody(feed: String, generation: Int, page: Int) async throws(StoreError) -> [UInt8]? {
        try await onWriterThread { connection throws(StoreError) in
            try connection.pageBody(feed: feed, generation: generation, page: page)
        }
    }

    nonisolated(nonsending) private func perform(_ change: StateChange) async throws(StoreError) -> StateSnapshot.Effects {
        let writer = writer
        return try await withCheckedContinuation { continuation in
            writer.enqueue(.change(change, .onWriterThread { continuation.resume(returning: $0) }))
        }.get()
    }

    /// Runs `body` on the writer thread between transactions.
    nonisolated(nonsending) func onWriterThread<Value: Sendable>(_ body: @escaping @Sendable (SQLiteConnection) throws(StoreError) -> Value) async throws(StoreError) -> Value {
        let writer = writer
        return try await withCheckedContinuation { (continuation: CheckedContinuation<Result<Value, StoreError>, Never>) in
            writer.enqueue(.access { connection in
                guard let connection else { return continuation.resume(returning: .failure(StoreError(.unavailable, "the state store is closed"))) }
                do throws(StoreError) {
                    continuation.resume(returning: .success(try body(connection)))
                } catch {
                    continuation.resume(returning: .failure(error))
                }
            })
        }.get()
    }

    /// Runs on the writer thread before each `COMMIT` (tests hold commits back with it).
    func setBeforeCommit(_ hook: (@Sendable () -> Void)?) {
        writer.beforeCommit.withLock { $0 = hook }
    }
}
