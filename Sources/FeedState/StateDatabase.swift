import FeedKit
import Glibc

/// The schema of `state.db` and the SQL that reads and writes it.
///
/// WAL mode with `synchronous = FULL`: every commit syncs the write-ahead log before it returns,
/// so a confirmed change survives a crash and a power cut. (`NORMAL` would sync only at
/// checkpoints, and a power cut could take back the last commits; group commit is what keeps
/// FULL affordable.) A transaction that fails (disk full, read-only, I/O error) is rolled back whole.
extension SQLiteConnection {
    /// `PRAGMA user_version` of the schema below; a newer file is refused, never rewritten.
    static let schemaVersion = 1

    /// WAL, full syncs, a write-ahead log cut back to ``writeAheadLogLimit`` after each
    /// checkpoint (so a burst does not keep its disk space), and a short wait instead of an
    /// instant failure if a maintenance command is reading at the same moment.
    func configureForState() throws(StoreError) {
        let mode = try textRows("PRAGMA journal_mode = WAL").first
        guard mode == "wal" else { throw StoreError(.unavailable, "\(path): cannot switch to WAL mode (journal mode is \(mode ?? "unknown"))") }
        try execute("PRAGMA synchronous = FULL; PRAGMA journal_size_limit = \(Self.writeAheadLogLimit); PRAGMA busy_timeout = 2000")
    }

    /// The write-ahead log's bound once the writer is idle: past it, the writer checkpoints it
    /// into `state.db` and truncates it (see ``boundWriteAheadLog(over:)``).
    static let writeAheadLogLimit = 4 << 20

    /// The write-ahead log's bound while commits follow one another: past it, the writer
    /// checkpoints after a commit without waiting to be idle. A run of large pages (a 24 MB feed
    /// document's, stored before they are served) stays under it, so its commits do not wait
    /// for a checkpoint's writes and syncs of `state.db` (15 ms for 4 MB here).
    static let busyWriteAheadLogLimit = 64 << 20

    /// Checkpoints the write-ahead log and truncates it to nothing once it is over `limit`.
    /// SQLite's own checkpoints only reuse the file from its start when they complete, and a
    /// checkpoint that a reader held back (a `feedd state check` beside the daemon) leaves the
    /// log growing until the next one completes; this one waits for readers (`busy_timeout`) and
    /// takes the file back. A failure (a full disk) is left for the next time.
    func boundWriteAheadLog(over limit: Int = writeAheadLogLimit) {
        var info = stat()
        guard stat("\(path)-wal", &info) == 0, Int(info.st_size) > limit else { return }
        try? execute("PRAGMA wal_checkpoint(TRUNCATE)")
    }

    /// `PRAGMA integrity_check`: nil when the file is sound, else the problems SQLite lists.
    func integrityProblems() throws(StoreError) -> [String]? {
        let rows = try textRows("PRAGMA integrity_check(20)")
        return rows == ["ok"] ? nil : rows
    }

    func createSchema() throws(StoreError) {
        try execute("""
            BEGIN IMMEDIATE;
            CREATE TABLE feeds (
                name TEXT PRIMARY KEY NOT NULL,
                generation INTEGER NOT NULL,
                fingerprint TEXT NOT NULL,
                seed TEXT,
                bodies_dropped_through INTEGER NOT NULL DEFAULT 0
            );
            CREATE TABLE pages (
                feed TEXT NOT NULL,
                generation INTEGER NOT NULL,
                page INTEGER NOT NULL,
                token TEXT,
                body BLOB,
                PRIMARY KEY (feed, generation, page)
            );
            CREATE TABLE consumers (
                feed TEXT NOT NULL,
                consumer TEXT NOT NULL,
                generation INTEGER NOT NULL,
                cursor INTEGER NOT NULL,
                PRIMARY KEY (feed, consumer)
            );
            PRAGMA user_version = \(Self.schemaVersion);
            COMMIT;
            """)
    }

    var schemaVersion: Int {
        get throws(StoreError) { Int(try textRows("PRAGMA user_version").first ?? "0") ?? 0 }
    }

    /// Reads every row and checks it against the rest; rows that contradict the state (a cursor
    /// outside its generation's pages, pages with a gap, a cursor of an unknown feed or of an old
    /// generation) are left out and described in `rejected`, never silently kept.
    func loadSnapshot() throws(StoreError) -> (snapshot: StateSnapshot, rejected: [String]) {
        var snapshot = StateSnapshot()
        var rejected: [String] = []
        let feeds = try prepare("SELECT name, generation, fingerprint, seed, bodies_dropped_through FROM feeds ORDER BY name")
        while try feeds.step() {
            let name = feeds.text(0) ?? ""
            let generation = feeds.integer(1)
            let droppedThrough = feeds.integer(4)
            guard (1...StoredFeed.maximumGeneration).contains(generation) else {
                rejected.append("feed \(name): generation \(generation) is outside 1...\(StoredFeed.maximumGeneration)")
                continue
            }
            guard (0...StoredFeed.maximumPage).contains(droppedThrough) else {
                rejected.append("feed \(name): bodies_dropped_through \(droppedThrough) is outside 0...\(StoredFeed.maximumPage)")
                continue
            }
            snapshot.feeds[name] = StoredFeed(
                generation: generation, fingerprint: feeds.text(2) ?? "", seed: feeds.text(3), pages: [], bodiesDroppedThrough: droppedThrough)
        }
        // `length` of a blob reads its size, not its content (`IS NOT NULL` would read it all).
        let pages = try prepare("SELECT feed, generation, page, token, length(body) FROM pages ORDER BY feed, generation, page")
        while try pages.step() {
            let feed = pages.text(0) ?? ""
            let generation = pages.integer(1)
            let number = pages.integer(2)
            guard var stored = snapshot.feeds[feed], stored.generation == generation else {
                rejected.append("feed \(feed): page \(number) of generation \(generation), which is not the feed's current generation")
                continue
            }
            guard number == stored.pages.count + 1, number <= StoredFeed.maximumPage else {
                rejected.append("feed \(feed): page \(number) of generation \(generation) follows a gap after page \(stored.pages.count)")
                continue
            }
            let hasBody = pages.value(4) != .null && number > stored.bodiesDroppedThrough
            stored.pages.append(StoredPage(token: pages.text(3), bodyBytes: hasBody ? max(0, pages.integer(4)) : 0, hasBody: hasBody))
            snapshot.feeds[feed] = stored
        }
        let consumers = try prepare("SELECT feed, consumer, generation, cursor FROM consumers ORDER BY feed, consumer")
        while try consumers.step() {
            let feed = consumers.text(0) ?? ""
            let consumer = consumers.text(1) ?? ""
            let cursor = StoredCursor(generation: consumers.integer(2), cursor: consumers.integer(3))
            guard let stored = snapshot.feeds[feed] else {
                rejected.append("feed \(feed): consumer \(consumer) has a cursor, but the feed has no generation")
                continue
            }
            guard cursor.generation == stored.generation else {
                rejected.append("feed \(feed): consumer \(consumer) is in generation \(cursor.generation), but the feed is in \(stored.generation)")
                continue
            }
            guard (0...stored.pages.count).contains(cursor.cursor) else {
                rejected.append("feed \(feed): cursor \(cursor.cursor) of consumer \(consumer) is outside 0...\(stored.pages.count), the pages known in generation \(stored.generation)")
                continue
            }
            snapshot.consumers[feed, default: [:]][consumer] = cursor
        }
        return (snapshot, rejected)
    }

    /// Deletes the rows ``loadSnapshot()`` rejected, so what is on disk is what is in memory and
    /// the same lines are not logged at every start.
    func removeRowsOutside(_ snapshot: StateSnapshot) throws(StoreError) {
        try execute("BEGIN IMMEDIATE")
        do {
            try execute("""
                DELETE FROM feeds WHERE generation < 1 OR generation > \(StoredFeed.maximumGeneration)
                    OR bodies_dropped_through < 0 OR bodies_dropped_through > \(StoredFeed.maximumPage);
                DELETE FROM pages WHERE feed NOT IN (SELECT name FROM feeds);
                DELETE FROM consumers WHERE feed NOT IN (SELECT name FROM feeds);
                """)
            let pages = try prepare("DELETE FROM pages WHERE feed = ? AND (generation != ? OR page > ?)")
            for (name, feed) in snapshot.feeds { try pages.bind(.text(name), .integer(feed.generation), .integer(feed.pages.count)).run() }
            let consumers = try prepare("SELECT feed, consumer FROM consumers")
            var rejected: [(feed: String, consumer: String)] = []
            while try consumers.step() {
                let key = (feed: consumers.text(0) ?? "", consumer: consumers.text(1) ?? "")
                if snapshot.consumers[key.feed]?[key.consumer] == nil { rejected.append(key) }
            }
            for key in rejected { try write(.forget(feed: key.feed, consumer: key.consumer), effects: .init()) }
            try execute("COMMIT")
        } catch {
            try? execute("ROLLBACK")
            throw error
        }
    }

    /// Repeats a validated change, and what applying it to the snapshot did, in SQL.
    func write(_ change: StateChange, effects: StateSnapshot.Effects) throws(StoreError) {
        switch change {
        case .setCursor(let feed, let consumer, let generation, let cursor):
            try prepare("""
                INSERT INTO consumers (feed, consumer, generation, cursor) VALUES (?, ?, ?, ?)
                ON CONFLICT (feed, consumer) DO UPDATE SET generation = excluded.generation, cursor = excluded.cursor
                """).bind(.text(feed), .text(consumer), .integer(generation), .integer(cursor)).run()
        case .forget(let feed, let consumer):
            try prepare("DELETE FROM consumers WHERE feed = ? AND consumer = ?").bind(.text(feed), .text(consumer)).run()
        case .startGeneration(let feed, let generation, let fingerprint, let seed):
            guard effects.startedGeneration else { return }
            try prepare("""
                INSERT INTO feeds (name, generation, fingerprint, seed, bodies_dropped_through) VALUES (?, ?, ?, ?, 0)
                ON CONFLICT (name) DO UPDATE SET generation = excluded.generation, fingerprint = excluded.fingerprint,
                    seed = excluded.seed, bodies_dropped_through = 0
                """).bind(.text(feed), .integer(generation), .text(fingerprint), .optional(seed)).run()
            try prepare("DELETE FROM pages WHERE feed = ?").bind(.text(feed)).run()
            try prepare("UPDATE consumers SET generation = ?, cursor = 0 WHERE feed = ?").bind(.integer(generation), .text(feed)).run()
        case .recordPages(let feed, let generation, let first, let pages):
            let insert = try prepare("INSERT OR REPLACE INTO pages (feed, generation, page, token, body) VALUES (?, ?, ?, ?, ?)")
            for (offset, page) in pages.enumerated() {
                let keepsBody = effects.keepsBody[offset]
                // A body with a tail is written in place, in its parts, over zeros of its length.
                let body: SQLValue = !keepsBody ? .null : page.bodyTail == nil ? .optional(page.body) : .zeroBlob(page.bodyCount ?? 0)
                try insert.bind(.text(feed), .integer(generation), .integer(first + offset), .optional(page.token), body).run()
                if keepsBody, let tail = page.bodyTail {
                    try writeBlob(table: "pages", column: "body", row: lastInsertedRowid, head: page.body ?? [], tail: tail.buffer)
                }
            }
            if let through = effects.dropBodiesThrough {
                try prepare("UPDATE pages SET body = NULL WHERE feed = ? AND page <= ? AND body IS NOT NULL")
                    .bind(.text(feed), .integer(through)).run()
                try prepare("UPDATE feeds SET bodies_dropped_through = ? WHERE name = ?").bind(.integer(through), .text(feed)).run()
            }
        }
    }

    /// The stored items of a page, if its body is kept.
    func pageBody(feed: String, generation: Int, page: Int) throws(StoreError) -> [UInt8]? {
        let statement = try prepare("SELECT body FROM pages WHERE feed = ? AND generation = ? AND page = ?")
            .bind(.text(feed), .integer(generation), .integer(page))
        return try statement.step() ? statement.blob(0) : nil
    }

    /// How many rows each table holds, for `feedd state check`.
    func rowCounts() throws(StoreError) -> (feeds: Int, pages: Int, bodies: Int, consumers: Int) {
        func count(_ sql: String) throws(StoreError) -> Int {
            let statement = try prepare(sql)
            return try statement.step() ? statement.integer(0) : 0
        }
        return (
            try count("SELECT count(*) FROM feeds"), try count("SELECT count(*) FROM pages"),
            try count("SELECT count(*) FROM pages WHERE body IS NOT NULL"), try count("SELECT count(*) FROM consumers")
        )
    }
}
