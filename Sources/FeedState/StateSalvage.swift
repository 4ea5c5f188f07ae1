/// What `feedd state repair` copies out of a damaged `state.db`: every row it can still read,
/// streamed into the new database one row at a time, page bodies a chunk at a time, so repairing a
/// file costs the same little memory whatever its size.
enum StateSalvage {
    /// A table and the columns copied, its blob column (if any) last.
    private struct Table {
        let name: String
        let columns: [String]
        let blob: String?

        static let all = [
            Table(name: "feeds", columns: ["name", "generation", "fingerprint", "seed", "bodies_dropped_through"], blob: nil),
            Table(name: "pages", columns: ["feed", "generation", "page", "token"], blob: "body"),
            Table(name: "consumers", columns: ["feed", "consumer", "generation", "cursor"], blob: nil),
        ]
    }

    /// Copies the readable rows of `path` into `repaired` (which has the schema), each table read
    /// from both ends by rowid, so a damaged page in the middle loses only the rows it held.
    /// Returns what could not be read. The damaged file is opened read-only.
    static func copyReadableRows(of path: String, into repaired: SQLiteConnection) -> [String] {
        var problems: [String] = []
        let damaged: SQLiteConnection
        do {
            damaged = try SQLiteConnection(path: path, create: false, readOnly: true)
        } catch {
            return [error.problem]
        }
        defer { damaged.close() }
        // Lets SQLite read a file shorter than its header says (a truncated one) instead of
        // refusing it whole; nothing is written through this connection.
        try? damaged.execute("PRAGMA writable_schema = ON")
        do throws(StoreError) {
            try repaired.execute("BEGIN IMMEDIATE")
            for table in Table.all { copy(table, from: damaged, into: repaired, problems: &problems) }
            try repaired.execute("COMMIT")
        } catch {
            try? repaired.execute("ROLLBACK")
            problems.append("writing the repaired database: \(error.problem)")
        }
        return problems
    }

    private static func copy(_ table: Table, from damaged: SQLiteConnection, into repaired: SQLiteConnection, problems: inout [String]) {
        // `length` of a blob reads its size, not its content (`IS NOT NULL` would read it all).
        let blobLength = table.blob.map { ", length(\($0))" } ?? ""
        let select = "SELECT rowid, \(table.columns.joined(separator: ", "))\(blobLength) FROM \(table.name) ORDER BY rowid"
        let names = table.columns + (table.blob.map { [$0] } ?? [])
        let insert = "INSERT OR IGNORE INTO \(table.name) (\(names.joined(separator: ", "))) VALUES (\(names.map { _ in "?" }.joined(separator: ", ")))"
        // Forwards until the first unreadable row, then backwards down to the last row read.
        var lastForward = 0
        for direction in ["ASC", "DESC"] {
            do throws(StoreError) {
                let statement = try damaged.prepare("\(select) \(direction)")
                while try statement.step() {
                    let rowid = statement.integer(0)
                    // Pages past the end of a truncated file read as zeros: rows with rowid 0.
                    guard rowid > 0 else { continue }
                    if direction == "DESC", rowid <= lastForward { break }
                    if direction == "ASC" { lastForward = rowid }
                    var values = (1...Int32(table.columns.count)).map { statement.value($0) }
                    let length = statement.value(Int32(table.columns.count) + 1)
                    let hasBlob = table.blob != nil && length != .null
                    if table.blob != nil { values.append(hasBlob ? .zeroBlob(statement.integer(Int32(table.columns.count) + 1)) : .null) }
                    try copyRow(values, rowid: rowid, blob: hasBlob ? table.blob : nil, of: table.name, insert: insert, from: damaged, into: repaired)
                }
            } catch {
                problems.append("table \(table.name), reading \(direction == "ASC" ? "forwards" : "backwards"): \(error.problem)")
            }
        }
    }

    private static func copyRow(
        _ values: [SQLValue], rowid: Int, blob: String?, of table: String, insert: String, from damaged: SQLiteConnection, into repaired: SQLiteConnection
    ) throws(StoreError) {
        try repaired.prepare(insert).bind(values: values).run()
        guard let blob, repaired.changes == 1 else { return }
        let row = repaired.lastInsertedRowid
        do throws(StoreError) {
            try repaired.copyBlob(table: table, column: blob, row: row, from: damaged, row: rowid)
        } catch {
            // The row without the body it can no longer give (its token still pages on).
            try repaired.prepare("UPDATE \(table) SET \(blob) = NULL WHERE rowid = ?").bind(.integer(row)).run()
        }
    }
}
