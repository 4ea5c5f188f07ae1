import Glibc

/// `feedd state check` and `feedd state repair`: what an administrator runs when the daemon
/// refuses to start because its state is damaged.
public enum StateMaintenance {
    /// What ``check(directory:)`` found.
    public struct CheckReport: Sendable {
        public let databasePath: String
        /// Problems that make the daemon refuse the store (empty when it would open it).
        public let problems: [String]
        /// Rows the daemon would reject at start, with why.
        public let rejectedRows: [String]
        public let feeds: Int
        public let pages: Int
        public let pageBodies: Int
        public let consumers: Int
        /// No database yet: the daemon will create one.
        public let isNew: Bool

        /// Whether the daemon would open this store.
        public var isHealthy: Bool { problems.isEmpty }
    }

    /// What ``repair(directory:)`` did.
    public struct RepairReport: Sendable {
        public let databasePath: String
        /// Where the damaged files were kept, byte for byte.
        public let keptAs: [String]
        public let feeds: Int
        public let pages: Int
        public let consumers: Int
        /// Rows salvaged from the damaged file but left out because they contradict the rest.
        public let rejectedRows: [String]
        /// Why some rows could not be read at all (empty when every row was read).
        public let unreadable: [String]
    }

    /// Checks the integrity of `<directory>/state.db` and counts what it holds, and lists every row
    /// the daemon would reject (a number out of range, a cursor outside its pages, …). It only
    /// reads: the file is opened read-only, so nothing is checkpointed or deleted (a write-ahead log
    /// left by `kill -9` stays as it was, for `repair` to copy), and it may run beside a daemon.
    public static func check(directory: String) -> CheckReport {
        let path = "\(directory)/\(StateStore.databaseName)"
        func report(problems: [String], rejected: [String] = [], counts: (feeds: Int, pages: Int, bodies: Int, consumers: Int) = (0, 0, 0, 0), isNew: Bool = false) -> CheckReport {
            CheckReport(
                databasePath: path, problems: problems, rejectedRows: rejected, feeds: counts.feeds, pages: counts.pages,
                pageBodies: counts.bodies, consumers: counts.consumers, isNew: isNew)
        }
        do throws(StoreError) {
            if try StateFiles.isMissing(path) { return report(problems: [], isNew: true) }
            let connection = try SQLiteConnection(path: path, create: false, readOnly: true)
            defer { connection.close() }
            if let problems = try connection.integrityProblems() { return report(problems: problems) }
            try StateFiles.checkSchema(of: connection)
            let rejected = try connection.loadSnapshot().rejected
            return report(problems: [], rejected: rejected, counts: try connection.rowCounts())
        } catch {
            return report(problems: [error.problem])
        }
    }

    /// Salvages every readable row of `<directory>/state.db` into a new database that replaces
    /// it, keeping a byte-for-byte copy of the damaged files beside it (named in the report).
    /// Takes the directory's lock first, so it refuses to run while a daemon uses the directory.
    public static func repair(directory: String) throws(StoreError) -> RepairReport {
        // Taking the lock would create the directory and a lock file in it: a mistyped
        // state_dir is told as such, and leaves nothing behind.
        var directoryStatus = stat()
        guard stat(directory, &directoryStatus) == 0, directoryStatus.st_mode & S_IFMT == S_IFDIR else {
            throw StoreError(.unavailable, "the state directory \(directory) does not exist; there is nothing to repair (is state_dir right?)")
        }
        let lock = try StateDirectoryLock(directory: directory)
        defer { lock.release() }
        let path = "\(directory)/\(StateStore.databaseName)"
        var exists = stat()
        guard stat(path, &exists) == 0 || access("\(path)-wal", F_OK) == 0 else {
            throw StoreError(.unavailable, "\(path) does not exist; there is nothing to repair (the daemon creates it at start)")
        }
        let keptAs = try keepCopies(of: path)
        let repaired = try StateFiles.newDatabase(beside: path)
        defer { repaired.close() }
        let unreadable = StateSalvage.copyReadableRows(of: path, into: repaired)
        let (snapshot, rejected) = try repaired.loadSnapshot()
        if !rejected.isEmpty { try repaired.removeRowsOutside(snapshot) }
        let counts = try repaired.rowCounts()
        repaired.close()
        for leftover in ["\(path)-wal", "\(path)-shm"] { unlink(leftover) }
        try StateFiles.moveIntoPlace("\(path).new", path)
        return RepairReport(
            databasePath: path, keptAs: keptAs, feeds: counts.feeds, pages: counts.pages, consumers: counts.consumers,
            rejectedRows: rejected, unreadable: unreadable)
    }

    /// Copies the database and its write-ahead log to `<name>.damaged-<UTC time>[-wal]`.
    private static func keepCopies(of path: String) throws(StoreError) -> [String] {
        var now = time(nil)
        var parts = tm()
        gmtime_r(&now, &parts)
        func digits(_ number: Int32, _ width: Int) -> String {
            let text = String(number)
            return String(repeating: "0", count: max(0, width - text.count)) + text
        }
        let stamp = digits(parts.tm_year + 1900, 4) + digits(parts.tm_mon + 1, 2) + digits(parts.tm_mday, 2) + "T"
            + digits(parts.tm_hour, 2) + digits(parts.tm_min, 2) + digits(parts.tm_sec, 2) + "Z"
        var kept: [String] = []
        for (source, suffix) in [(path, ""), ("\(path)-wal", "-wal")] where access(source, F_OK) == 0 {
            let destination = "\(path).damaged-\(stamp)\(suffix)"
            do {
                try StateFiles.copy(source, to: destination)
            } catch {
                for copy in kept { unlink(copy) }
                throw error
            }
            kept.append(destination)
        }
        StateFiles.syncDirectory(of: path)
        return kept
    }
}
