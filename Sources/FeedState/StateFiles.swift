import Glibc

/// The files of a state directory: whether `state.db` is there, how a new one is made, and
/// whether an existing one is a feedd state database this version understands.
enum StateFiles {
    /// True when `path` does not exist (a new directory, which may start empty). An existing
    /// 0-byte file, or a write-ahead log without its database, is damage, never a fresh start:
    /// starting afresh would silently drop every cursor.
    static func isMissing(_ path: String) throws(StoreError) -> Bool {
        var status = stat()
        guard stat(path, &status) == 0 else {
            guard errno == ENOENT else {
                throw StoreError(.unavailable, "cannot read \(path): \(String(cString: strerror(errno)))")
            }
            if access("\(path)-wal", F_OK) == 0 {
                throw StoreError(.damaged, "\(path) is missing but its write-ahead log \(path)-wal is there", advice: "see `feedd state repair`")
            }
            return true
        }
        guard status.st_size > 0 else {
            throw StoreError(.damaged, "\(path) is empty (0 bytes), so every stored cursor is lost", advice: "see `feedd state repair`")
        }
        return false
    }

    /// Creates an empty database with the schema beside `path` and renames it into place, so a
    /// crash half-way never leaves a file that later looks like damage.
    static func createDatabase(at path: String) throws(StoreError) {
        let connection = try newDatabase(beside: path)
        connection.close()
        try moveIntoPlace("\(path).new", path)
    }

    /// A new database with the schema at `<path>.new` (replacing a leftover one), in WAL mode.
    static func newDatabase(beside path: String) throws(StoreError) -> SQLiteConnection {
        let temporary = "\(path).new"
        for leftover in [temporary, "\(temporary)-wal", "\(temporary)-shm"] { unlink(leftover) }
        let connection = try SQLiteConnection(path: temporary, create: true)
        try connection.configureForState()
        try connection.createSchema()
        return connection
    }

    /// Renames `source` over `destination` and syncs the directory, so the rename is durable.
    static func moveIntoPlace(_ source: String, _ destination: String) throws(StoreError) {
        guard rename(source, destination) == 0 else {
            throw StoreError(.unavailable, "cannot rename \(source) to \(destination): \(String(cString: strerror(errno)))")
        }
        syncDirectory(of: destination)
    }

    static func syncDirectory(of path: String) {
        let directory = String(path[..<(path.lastIndex(of: "/") ?? path.startIndex)])
        let descriptor = open(directory.isEmpty ? "." : directory, O_RDONLY | O_DIRECTORY | O_CLOEXEC)
        guard descriptor >= 0 else { return }
        fsync(descriptor)
        close(descriptor)
    }

    /// Throws unless the database has feedd's schema, of a version this feedd knows.
    static func checkSchema(of connection: SQLiteConnection) throws(StoreError) {
        let version = try connection.schemaVersion
        guard version != 0 else {
            throw StoreError(.damaged, "\(connection.path) is not a feedd state database (it has no feedd schema)", advice: "see `feedd state repair`")
        }
        guard version <= SQLiteConnection.schemaVersion else {
            throw StoreError(.damaged, "\(connection.path) was written by a newer feedd (schema \(version); this one knows \(SQLiteConnection.schemaVersion))")
        }
    }

    /// Copies `source` to `destination` byte for byte and syncs it; on failure removes the
    /// partial copy and throws (a full disk must not leave an empty "kept" file behind).
    static func copy(_ source: String, to destination: String) throws(StoreError) {
        let input = open(source, O_RDONLY | O_CLOEXEC)
        guard input >= 0 else { throw StoreError(.unavailable, "cannot read \(source): \(String(cString: strerror(errno)))") }
        defer { close(input) }
        let output = open(destination, O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0o600)
        guard output >= 0 else { throw StoreError(.unavailable, "cannot create \(destination): \(String(cString: strerror(errno)))") }
        var buffer = [UInt8](repeating: 0, count: 1 << 16)
        var failure: String?
        copying: while true {
            let count = buffer.withUnsafeMutableBytes { read(input, $0.baseAddress, $0.count) }
            if count < 0, errno == EINTR { continue }
            if count < 0 { failure = "cannot read \(source): \(String(cString: strerror(errno)))"; break }
            if count == 0 { break }
            var offset = 0
            while offset < count {
                let written = buffer[offset..<count].withUnsafeBytes { write(output, $0.baseAddress, $0.count) }
                if written < 0, errno == EINTR { continue }
                if written < 0 { failure = "cannot write \(destination): \(String(cString: strerror(errno)))"; break copying }
                offset += written
            }
        }
        if failure == nil, fsync(output) != 0 { failure = "cannot sync \(destination): \(String(cString: strerror(errno)))" }
        close(output)
        if let failure {
            unlink(destination)
            throw StoreError(.unavailable, failure)
        }
    }
}
