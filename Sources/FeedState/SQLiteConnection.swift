import CSQLite
import CSQLiteGathering

/// One SQLite connection and the statements prepared on it; every failure becomes a ``StoreError``
/// that says in plain words what the disk did (full, read-only, damaged) and names the file.
///
/// Not thread-safe, and not meant to be: a connection belongs to one thread at a time (the
/// store's writer thread, or a maintenance command).
final class SQLiteConnection {
    let path: String
    private var handle: OpaquePointer?
    private var statements: [String: Statement] = [:]

    /// Opens `path`; `create` allows making a new file, `readOnly` opens without write access.
    /// With `gathersLogWrites`, the write-ahead log's writes go to the file in few large writes
    /// (`gathering_vfs.h`), which is safe only on a connection that syncs every commit
    /// (`synchronous = FULL`, as ``configureForState()`` sets); should SQLite have no default VFS
    /// to build that on, the connection writes as usual.
    init(path: String, create: Bool, readOnly: Bool = false, gathersLogWrites: Bool = false) throws(StoreError) {
        self.path = path
        let flags = (readOnly ? SQLITE_OPEN_READONLY : SQLITE_OPEN_READWRITE) | (create ? SQLITE_OPEN_CREATE : 0) | SQLITE_OPEN_NOMUTEX
        let status = sqlite3_open_v2(path, &handle, flags, gathersLogWrites ? feedd_gathering_vfs_name() : nil)
        guard status == SQLITE_OK else {
            let error = failure(status, "cannot open")
            sqlite3_close_v2(handle)
            handle = nil
            throw error
        }
        sqlite3_extended_result_codes(handle, 1)
    }

    deinit {
        close()
    }

    func close() {
        statements.removeAll()
        if let handle { sqlite3_close_v2(handle) }
        handle = nil
    }

    /// Runs SQL that returns no rows (several statements separated by `;` are allowed).
    func execute(_ sql: String) throws(StoreError) {
        let status = sqlite3_exec(handle, sql, nil, nil, nil)
        guard status == SQLITE_OK else { throw failure(status, "cannot write") }
    }

    /// The first column of every row of `sql`, as text (for pragmas such as `integrity_check`).
    func textRows(_ sql: String) throws(StoreError) -> [String] {
        let statement = try prepare(sql)
        var rows: [String] = []
        while try statement.step() { rows.append(statement.text(0) ?? "") }
        return rows
    }

    /// A prepared statement, cached by its SQL, reset and cleared of bindings.
    func prepare(_ sql: String) throws(StoreError) -> Statement {
        if let cached = statements[sql] {
            cached.reset()
            return cached
        }
        var pointer: OpaquePointer?
        let status = sqlite3_prepare_v2(handle, sql, -1, &pointer, nil)
        guard status == SQLITE_OK, let pointer else { throw failure(status, "cannot read") }
        let statement = Statement(pointer: pointer, connection: self)
        statements[sql] = statement
        return statement
    }

    /// Whether a transaction is open (SQLite rolls one back by itself after some I/O errors).
    var inTransaction: Bool { sqlite3_get_autocommit(handle) == 0 }

    /// Rows the last statement inserted, changed or deleted.
    var changes: Int { Int(sqlite3_changes(handle)) }

    /// The rowid of the last row inserted.
    var lastInsertedRowid: Int { Int(sqlite3_last_insert_rowid(handle)) }

    /// Copies the blob in `column` of row `sourceRow` of `table` in `source` into the same place of
    /// row `row` here, whose value must already be a zero-filled blob of the same length, a chunk
    /// at a time: a page body of any size costs 64 KiB of memory.
    func copyBlob(table: String, column: String, row: Int, from source: SQLiteConnection, row sourceRow: Int) throws(StoreError) {
        let reader = try source.openBlob(table: table, column: column, row: sourceRow, writing: false)
        defer { sqlite3_blob_close(reader) }
        let writer = try openBlob(table: table, column: column, row: row, writing: true)
        defer { sqlite3_blob_close(writer) }
        var status: Int32
        let total = Int(sqlite3_blob_bytes(reader))
        guard Int(sqlite3_blob_bytes(writer)) == total else { throw StoreError(.unavailable, "\(path): a blob of \(total) bytes has no room of that size") }
        var chunk = [UInt8](repeating: 0, count: 1 << 16)
        var offset = 0
        while offset < total {
            let count = min(chunk.count, total - offset)
            status = chunk.withUnsafeMutableBytes { sqlite3_blob_read(reader, $0.baseAddress, Int32(count), Int32(offset)) }
            guard status == SQLITE_OK else { throw source.failure(status, "cannot read") }
            status = chunk.withUnsafeBytes { sqlite3_blob_write(writer, $0.baseAddress, Int32(count), Int32(offset)) }
            guard status == SQLITE_OK else { throw failure(status, "cannot write") }
            offset += count
        }
    }

    /// Writes `head`, then `tail`, into the blob in `column` of row `row` of `table`, whose value
    /// must already be a zero-filled blob of their length: bytes kept elsewhere are stored
    /// without being joined in memory first.
    func writeBlob(table: String, column: String, row: Int, head: [UInt8], tail: UnsafeRawBufferPointer) throws(StoreError) {
        let writer = try openBlob(table: table, column: column, row: row, writing: true)
        defer { sqlite3_blob_close(writer) }
        var status = head.isEmpty ? SQLITE_OK : head.withUnsafeBytes { sqlite3_blob_write(writer, $0.baseAddress, Int32($0.count), 0) }
        if status == SQLITE_OK, !tail.isEmpty { status = sqlite3_blob_write(writer, tail.baseAddress, Int32(tail.count), Int32(head.count)) }
        guard status == SQLITE_OK else { throw failure(status, "cannot write") }
    }

    private func openBlob(table: String, column: String, row: Int, writing: Bool) throws(StoreError) -> OpaquePointer {
        var blob: OpaquePointer?
        let status = sqlite3_blob_open(handle, "main", table, column, sqlite3_int64(row), writing ? 1 : 0, &blob)
        guard status == SQLITE_OK, let blob else { throw failure(status, writing ? "cannot write" : "cannot read") }
        return blob
    }

    /// A ``StoreError`` for a failed call: the kind from SQLite's primary result code, words a
    /// user understands, then SQLite's own message.
    func failure(_ status: Int32, _ doing: String) -> StoreError {
        let detail = handle.map { String(cString: sqlite3_errmsg($0)) } ?? String(cString: sqlite3_errstr(status))
        switch status & 0xff {
        case SQLITE_FULL:
            return StoreError(.unavailable, "\(doing) \(path): the disk is full (\(detail))")
        case SQLITE_READONLY, SQLITE_PERM, SQLITE_CANTOPEN, SQLITE_AUTH:
            return StoreError(.unavailable, "\(doing) \(path): the file or its directory is not writable (\(detail))")
        case SQLITE_IOERR, SQLITE_NOMEM, SQLITE_BUSY, SQLITE_LOCKED, SQLITE_INTERRUPT:
            return StoreError(.unavailable, "\(doing) \(path): the disk failed (\(detail))")
        case SQLITE_CORRUPT, SQLITE_NOTADB, SQLITE_FORMAT, SQLITE_SCHEMA, SQLITE_MISMATCH:
            return StoreError(.damaged, "\(path) is damaged: \(detail)", advice: StoreError.repairAdvice)
        default:
            return StoreError(.unavailable, "\(doing) \(path): \(detail)")
        }
    }

    /// A prepared statement; positions of bindings and columns count from 1 and 0 as in SQLite.
    final class Statement {
        private let pointer: OpaquePointer
        private unowned let connection: SQLiteConnection

        fileprivate init(pointer: OpaquePointer, connection: SQLiteConnection) {
            self.pointer = pointer
            self.connection = connection
        }

        deinit {
            sqlite3_finalize(pointer)
        }

        fileprivate func reset() {
            sqlite3_reset(pointer)
            sqlite3_clear_bindings(pointer)
        }

        /// Binds `values` to the parameters in order, from the first.
        @discardableResult
        func bind(_ values: SQLValue...) -> Statement {
            bind(values: values)
        }

        /// Binds `values` after resetting the statement, so a statement can be run again and again.
        @discardableResult
        func bind(values: [SQLValue]) -> Statement {
            reset()
            for (offset, value) in values.enumerated() {
                let index = Int32(offset + 1)
                switch value {
                case .null:
                    sqlite3_bind_null(pointer, index)
                case .integer(let number):
                    sqlite3_bind_int64(pointer, index, Int64(number))
                case .text(let text):
                    var text = text
                    text.withUTF8 { bytes in
                        bytes.withMemoryRebound(to: CChar.self) { _ = feedd_sqlite_bind_text(pointer, index, $0.baseAddress, Int32($0.count)) }
                    }
                case .blob(let bytes):
                    bytes.withUnsafeBytes { _ = feedd_sqlite_bind_blob(pointer, index, $0.baseAddress ?? UnsafeRawPointer(bitPattern: 1), Int32($0.count)) }
                case .zeroBlob(let count):
                    sqlite3_bind_zeroblob64(pointer, index, sqlite3_uint64(max(count, 0)))
                }
            }
            return self
        }

        /// Advances to the next row; false when there is none. A write runs to completion here.
        func step() throws(StoreError) -> Bool {
            switch sqlite3_step(pointer) {
            case SQLITE_ROW: return true
            case SQLITE_DONE: return false
            case let status:
                let error = connection.failure(status, "cannot write")
                sqlite3_reset(pointer)
                throw error
            }
        }

        /// Runs a statement that returns no rows.
        func run() throws(StoreError) {
            while try step() {}
        }

        func integer(_ column: Int32) -> Int {
            Int(sqlite3_column_int64(pointer, column))
        }

        func text(_ column: Int32) -> String? {
            guard sqlite3_column_type(pointer, column) != SQLITE_NULL, let bytes = sqlite3_column_text(pointer, column) else { return nil }
            return String(cString: bytes)
        }

        func blob(_ column: Int32) -> [UInt8]? {
            guard sqlite3_column_type(pointer, column) != SQLITE_NULL else { return nil }
            let count = Int(sqlite3_column_bytes(pointer, column))
            guard count > 0, let bytes = sqlite3_column_blob(pointer, column) else { return [] }
            return Array(UnsafeRawBufferPointer(start: bytes, count: count))
        }

        /// A column as whatever type it holds (what salvaging copies without interpreting).
        func value(_ column: Int32) -> SQLValue {
            switch sqlite3_column_type(pointer, column) {
            case SQLITE_INTEGER: .integer(integer(column))
            case SQLITE_TEXT: .text(text(column) ?? "")
            case SQLITE_BLOB: .blob(blob(column) ?? [])
            default: .null
            }
        }
    }
}

/// A value bound to a statement parameter.
enum SQLValue: Equatable {
    case null
    case integer(Int)
    case text(String)
    case blob([UInt8])
    /// A blob of `count` zero bytes, to be filled in place (see ``SQLiteConnection/copyBlob(table:column:row:from:row:)``).
    case zeroBlob(Int)

    static func optional(_ text: String?) -> SQLValue { text.map { .text($0) } ?? .null }
    static func optional(_ bytes: [UInt8]?) -> SQLValue { bytes.map { .blob($0) } ?? .null }
}
