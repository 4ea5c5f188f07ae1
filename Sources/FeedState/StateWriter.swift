import FeedKit
import Foundation

/// The one thread that touches `state.db` once the store is open, committing changes in groups.
///
/// Group commit: while one transaction commits (and syncs), new changes queue up; the next
/// transaction takes all of them, so a thousand consumers acking at once cost a handful of
/// syncs, not a thousand. Under load a transaction also waits out a short window after the last
/// one (``CommitPacing``), since acks that trickle in would otherwise each catch a sync of their
/// own. Each change is checked against the state as the transaction has left it so far; a
/// rejected change is answered at once and the others go ahead. If the transaction fails (disk
/// full, read-only, I/O error), it is rolled back and every change in it fails with that error.
/// Only after `COMMIT` returned are the changes applied to the mirror readers see, and only then
/// are their callers resumed.
///
/// Callers on the main actor (the event loop's thread) are answered in slices: a hop to the
/// main queue runs main-actor completions in the order the changes were queued for at most
/// ``AnswerSlicing/timePerJob``, instead of one wake-up and one resumed task per change (see
/// ``callMainActorAnswers()``).
final class StateWriter: Sendable {
    typealias Result = Swift.Result<StateSnapshot.Effects, StoreError>

    /// Who hears how a change went, and where.
    enum Completion: Sendable {
        /// Called on the writer thread (a continuation's resume, say).
        case onWriterThread(@Sendable (Result) -> Void)
        /// Called on the main actor, together with the other main-actor completions of the transaction.
        case onMainActor(@MainActor @Sendable (Result) -> Void)
    }

    enum Job: Sendable {
        case change(StateChange, Completion)
        /// Work on the connection between transactions (a page body read, a test's pragma); nil
        /// when the store is closed.
        case access(@Sendable (SQLiteConnection?) -> Void)
    }

    private struct Queue {
        var jobs: [Job] = []
        var writerIsWaiting = false
        var isClosing = false
    }

    /// How much the writer has done, for `status` and the tests of group commit.
    struct Counts: Sendable {
        var committedChanges = 0
        var transactions = 0
        var failedTransactions = 0
        var largestGroup = 0
    }

    private let queue = Locked(Queue())
    private let wakeUp = DispatchSemaphore(value: 0)
    private let finished = DispatchSemaphore(value: 0)
    let counts = Locked(Counts())
    /// Runs on the writer thread after a group's changes are written and before `COMMIT` (tests
    /// hold commits here to see that nothing is confirmed early).
    let beforeCommit = Locked<(@Sendable () -> Void)?>(nil)

    /// The committed state, which readers see; only the writer thread changes it, after a `COMMIT`.
    let mirror: Locked<StateSnapshot>
    private let pacing: CommitPacing
    private let slicing: AnswerSlicing

    /// Starts the thread, which from now on owns `connection`.
    init(connection: SQLiteConnection, snapshot: StateSnapshot, bodyBudget: Int, pacing: CommitPacing, slicing: AnswerSlicing) {
        mirror = Locked(snapshot)
        self.pacing = pacing
        self.slicing = slicing
        // The writer checkpoints (see `run`), not SQLite inside the commit that fills the log;
        // should this fail, SQLite's own checkpoints go on as before.
        try? connection.execute("PRAGMA wal_autocheckpoint = 0")
        // The connection moves to the writer thread here and nothing else keeps a reference to
        // it, so handing it over unchecked is safe.
        nonisolated(unsafe) let thread = WriterThread(connection: connection, committed: snapshot, bodyBudget: bodyBudget)
        let detached = Thread { [self] in
            run(thread)
            thread.connection.close()
            finished.signal()
        }
        detached.name = "feedd state writer"
        detached.start()
    }

    /// Queues a job; after ``close()`` a change fails at once.
    func enqueue(_ job: Job) {
        let accepted = queue.withLock { queue -> Bool? in
            guard !queue.isClosing else { return nil }
            queue.jobs.append(job)
            defer { queue.writerIsWaiting = false }
            return queue.writerIsWaiting
        }
        switch accepted {
        case nil:
            switch job {
            case .change(_, let completion): answer([(completion, .failure(StoreError(.unavailable, "the state store is closed")))])
            case .access(let body): body(nil)
            }
        case true?:
            wakeUp.signal()
        case false?:
            break
        }
    }

    /// Commits what is queued, stops the thread and closes the database; returns when it has.
    func close() {
        let wasOpen = queue.withLock { queue -> Bool in
            defer { queue.isClosing = true }
            return !queue.isClosing
        }
        guard wasOpen else { return }
        wakeUp.signal()
        finished.wait()
    }

    private func run(_ thread: WriterThread) {
        // When the last transaction ended, if it carried a storm's group.
        var busyCommitEnded: ContinuousClock.Instant?
        while true {
            let (jobs, closing) = takeJobs()
            if jobs.isEmpty {
                if closing { return }
                // Checkpoints once nothing has come for a while: not between the commits of a run.
                if wakeUp.wait(timeout: .now() + Self.idleBeforeCheckpoint) == .timedOut {
                    thread.connection.boundWriteAheadLog()
                    wakeUp.wait()
                }
                continue
            }
            var changes = perform(jobs, on: thread)
            guard !changes.isEmpty else { continue }
            if let ended = busyCommitEnded, !closing, ContinuousClock.now < ended + pacing.window {
                pacing.wait(ended + pacing.window)
                changes += perform(takeJobs().jobs, on: thread)
            }
            commit(changes, on: thread)
            busyCommitEnded = changes.count >= pacing.busyGroup ? .now : nil
        }
    }

    /// How long the writer waits for more changes before it checkpoints a write-ahead log over
    /// ``SQLiteConnection/writeAheadLogLimit``: longer than a run's pages take between two
    /// commits, short enough that the log is cut back soon after a burst.
    static let idleBeforeCheckpoint = DispatchTimeInterval.milliseconds(100)

    private func takeJobs() -> (jobs: [Job], closing: Bool) {
        queue.withLock { queue in
            let jobs = queue.jobs
            queue.jobs.removeAll(keepingCapacity: true)
            queue.writerIsWaiting = jobs.isEmpty && !queue.isClosing
            return (jobs, queue.isClosing)
        }
    }

    /// Runs the accesses among `jobs` now; returns the changes, for the next transaction.
    private func perform(_ jobs: [Job], on thread: WriterThread) -> [(StateChange, Completion)] {
        var changes: [(StateChange, Completion)] = []
        for job in jobs {
            switch job {
            case .change(let change, let completion):
                changes.append((change, completion))
            case .access(let body):
                body(thread.connection)
            }
        }
        return changes
    }

    private func commit(_ changes: [(StateChange, Completion)], on thread: WriterThread) {
        var results: [Result] = []
        results.reserveCapacity(changes.count)
        do throws(StoreError) {
            try thread.connection.execute("BEGIN IMMEDIATE")
            for (change, _) in changes {
                do {
                    try thread.committed.validate(change)
                } catch {
                    results.append(.failure(error))
                    continue
                }
                let effects = thread.committed.apply(change, bodyBudget: thread.bodyBudget)
                try thread.connection.write(change, effects: effects)
                results.append(.success(effects))
            }
            beforeCommit.withLock { $0 }?()
            try thread.connection.execute("COMMIT")
        } catch {
            if thread.connection.inTransaction { try? thread.connection.execute("ROLLBACK") }
            thread.committed = mirror.withLock { $0 }
            results = results.map { result in result.flatMap { _ in .failure(error) } }
            results += Array(repeating: .failure(error), count: changes.count - results.count)
            counts.withLock { $0.failedTransactions += 1 }
            answer(zip(changes.lazy.map(\.1), results))
            return
        }
        mirror.withLock { mirror in
            for ((change, _), result) in zip(changes, results) where (try? result.get()) != nil {
                _ = mirror.apply(change, bodyBudget: thread.bodyBudget)
            }
        }
        let confirmed = results.count { (try? $0.get()) != nil }
        counts.withLock { counts in
            counts.committedChanges += confirmed
            counts.transactions += 1
            counts.largestGroup = max(counts.largestGroup, changes.count)
        }
        answer(zip(changes.lazy.map(\.1), results))
        // After the answers: the checkpoint's syncs hold up only the next transaction.
        thread.connection.boundWriteAheadLog(over: SQLiteConnection.busyWriteAheadLogLimit)
    }

    /// Calls the writer-thread completions now, in order, and queues the main-actor ones for
    /// ``callMainActorAnswers()``.
    private func answer(_ outcomes: some Sequence<(Completion, Result)>) {
        var onMainActor: [MainActorAnswers.Answer] = []
        for (completion, result) in outcomes {
            switch completion {
            case .onWriterThread(let body): body(result)
            case .onMainActor(let body): onMainActor.append((body, result))
            }
        }
        guard !onMainActor.isEmpty else { return }
        let mustSchedule = mainActorAnswers.withLock { answers in
            answers.append(contentsOf: onMainActor)
            defer { answers.isScheduled = true }
            return !answers.isScheduled
        }
        if mustSchedule { callMainActorAnswers() }
    }

    /// Main-actor completions not called yet, oldest first, and whether a job to call them is queued.
    private let mainActorAnswers = Locked(MainActorAnswers())

    /// Calls the queued main-actor completions in order, in main-queue jobs of at most
    /// ``AnswerSlicing/timePerJob`` each (at least one completion a job). Between two jobs the
    /// event loop serves its sockets, so the answers to a large group (a thousand acks, several
    /// milliseconds of writes) never hold up another client's request for longer than one job.
    private func callMainActorAnswers() {
        DispatchQueue.main.async { [self] in
            MainActor.assumeIsolated {
                let started = slicing.now()
                while let (body, result) = mainActorAnswers.withLock({ $0.takeFirst() }) {
                    body(result)
                    if slicing.now() - started >= slicing.timePerJob { break }
                }
                let more = mainActorAnswers.withLock { answers in
                    answers.isScheduled = !answers.isEmpty
                    return answers.isScheduled
                }
                if more { callMainActorAnswers() }
            }
        }
    }
}

/// The main-actor completions of committed changes that ``StateWriter/callMainActorAnswers()`` has
/// yet to call, oldest first: the writer appends a transaction's at the back, the main-queue jobs
/// take them one by one from the front.
///
/// Taken from the front by moving a start index, not by `removeFirst`, which moves every answer
/// left each time: a storm's group of a few hundred answers cost the main thread the square of
/// that (4% of its samples, `perf record` of the C client's ack storm).
private struct MainActorAnswers {
    typealias Answer = (body: @MainActor @Sendable (StateWriter.Result) -> Void, result: StateWriter.Result)

    private var answers: [Answer] = []
    private var start = 0
    /// Whether a job to call them is queued on the main queue.
    var isScheduled = false

    var isEmpty: Bool { start == answers.count }

    mutating func append(contentsOf more: [Answer]) {
        answers.append(contentsOf: more)
    }

    /// Takes the answer at the front, if any.
    mutating func takeFirst() -> Answer? {
        guard start < answers.count else { return nil }
        let taken = answers[start]
        start += 1
        if start == answers.count {
            answers.removeAll(keepingCapacity: true)
            start = 0
        } else if start >= 256, start * 2 >= answers.count {
            // The writer keeps adding while the main thread catches up: the answers already
            // called go, at a cost of at most one move of each one left.
            answers.removeFirst(start)
            start = 0
        }
        return taken
    }
}

/// How the writer gathers a group under load. A transaction that follows, within ``window``,
/// one that carried at least ``busyGroup`` changes waits out the window first and takes in what
/// comes meanwhile: an ack storm then pays a sync (and a write of each page of the consumers'
/// table it touches) per window, rather than one per handful of acks that arrived while the last
/// sync ran. Changes that come one or two at a time never wait, so a lone consumer acking page
/// after page is answered as soon as each commit is durable.
struct CommitPacing: Sendable {
    /// How long after a busy transaction the next one starts at the earliest.
    var window: Duration
    /// The fewest changes a transaction carries for the next one to wait.
    var busyGroup: Int
    /// Blocks the writer thread until the instant given (a test holds it instead).
    var wait: @Sendable (ContinuousClock.Instant) -> Void

    /// 2 ms: a storm's group then carries about a hundred acks, and an ack waits far less for
    /// it than for its turn among a thousand consumers.
    static let standard = CommitPacing(window: .milliseconds(2), busyGroup: 3) { deadline in
        let left = deadline - .now
        if left > .zero { usleep(UInt32(left / .microseconds(1))) }
    }
}

/// How long one main-queue job goes on calling the main-actor answers of committed changes
/// (``StateWriter/callMainActorAnswers()``), and the clock it is timed on (a test's own).
///
/// Bounded by time, not by count: an answer costs from a `sendmsg` of an ack line (some 7 µs) to
/// a page written behind it. Sixteen answers a job took 0.11 ms of the main thread at p50 and
/// 0.31 ms at p99 during the C client's ack storm, and such jobs were a quarter of the time of the
/// `ping`s over 1 ms (instrumented build, `ping-fanout`): a `ping` reported meanwhile waits for
/// the job its turn comes after. (Earlier, 64 a job held a `next` up for half a millisecond, and
/// 16 halved the median `next` at no cost the pairs could show.)
struct AnswerSlicing: Sendable {
    var timePerJob: Duration
    var now: @Sendable () -> ContinuousClock.Instant

    /// 50 µs: some seven acks' answers a job.
    static let standard = AnswerSlicing(timePerJob: .microseconds(50)) { .now }
}

/// What only the writer thread touches: the connection, and the state as committed so far plus
/// the changes of the transaction in progress (reset from the mirror when one fails).
private final class WriterThread {
    let connection: SQLiteConnection
    var committed: StateSnapshot
    let bodyBudget: Int

    init(connection: SQLiteConnection, committed: StateSnapshot, bodyBudget: Int) {
        self.connection = connection
        self.committed = committed
        self.bodyBudget = bodyBudget
    }
}
