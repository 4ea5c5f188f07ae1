import FeedKit
import Foundation
import Glibc
import Testing
import TestSupport

/// The daemon on a state directory that fails or lies (issue 24): a page record that cannot be
/// stored, numbers no feedd writes, and a crash's write-ahead log that `state check` must not touch.
/// The state is edited behind the daemon's back with Debian's `sqlite3`.
@Suite struct StateFaultTests {
    static let sqlite = "/usr/bin/sqlite3"

    static func config(state: String, numbers: String, pageSize: Int = 1) -> String {
        """
        [daemon]
        state_dir = "\(state)"
        prefetch = 0
        [feeds.numbers]
        source = "file"
        path = "\(numbers)"
        page_size = \(pageSize)
        """
    }

    static func numbers(in directory: TemporaryDirectory) throws -> String {
        try directory.write("numbers.ndjson", (1...100).map(String.init).joined(separator: "\n") + "\n")
    }

    static func sql(_ database: String, _ statements: String) throws {
        let result = try ChildProcess.run(sqlite, [database, statements])
        guard result.status == 0 else { throw TestFailure("sqlite3 failed: \(result.errors)") }
    }

    static func kill(_ daemon: DaemonProcess) throws {
        daemon.send(signal: SIGKILL)
        _ = try daemon.waitForExit()
    }

    static func subscribe(_ daemon: DaemonProcess, as consumer: String) throws -> (TestClient, JSONValue) {
        let client = try daemon.connect()
        return (client, try client.request(["op": "subscribe", "feed": "numbers", "consumer": .string(consumer)]))
    }

    /// A page's record that fails to store while another consumer's ack of the same page is on its
    /// way: the first ack is refused, and the second is `store_failed` too, never refused as
    /// outside the pages known (the store had not kept page 19). The record's write is made to
    /// fail slowly, by a trigger, so the second ack is sure to come while it is in flight.
    @Test func an_ack_of_a_delivered_page_whose_record_cannot_be_stored_answers_store_failed() throws {
        let directory = try TemporaryDirectory()
        let (state, numbers) = (directory.path("state"), try Self.numbers(in: directory))
        var daemon = try DaemonProcess(config: Self.config(state: state, numbers: numbers), directory: directory)
        for consumer in ["dora", "eve"] {
            let (client, _) = try Self.subscribe(daemon, as: consumer)
            try client.send("next numbers 18")
            for _ in 0..<18 { try client.expect("page") }
            #expect(try client.request("ack numbers 18")["page"] == 18)
        }
        try Self.kill(daemon)
        try Self.sql("\(state)/state.db", """
            CREATE TABLE slow (x INTEGER);
            WITH RECURSIVE n(i) AS (SELECT 1 UNION ALL SELECT i + 1 FROM n WHERE i < 3000) INSERT INTO slow SELECT i FROM n;
            CREATE TRIGGER page_19_cannot_be_stored BEFORE INSERT ON pages WHEN NEW.page = 19 BEGIN
                SELECT count(*) FROM slow a, slow b WHERE a.x < b.x;
                SELECT RAISE(ABORT, 'database or disk is full');
            END;
            """)

        daemon = try DaemonProcess(config: Self.config(state: state, numbers: numbers), directory: directory)
        let (dora, _) = try Self.subscribe(daemon, as: "dora")
        let (eve, _) = try Self.subscribe(daemon, as: "eve")
        try dora.send("next numbers")
        #expect(try dora.expect("page")["page"] == 19, "a page that can be fetched again is served")
        try eve.send("next numbers")
        #expect(try eve.expect("page")["page"] == 19)
        try dora.send("ack numbers 19")
        usleep(50_000)
        let second = try eve.request("ack numbers 19")
        let first = try dora.read(until: "error").found
        for answer in [first, second] {
            #expect(answer["code"] == "store_failed", "\(answer.jsonText)")
            #expect(answer["message"]?.stringValue?.contains("outside") == false, "\(answer.jsonText)")
        }
        try Self.kill(daemon)
        daemon = try DaemonProcess(config: Self.config(state: state, numbers: numbers), directory: directory)
        #expect(try Self.subscribe(daemon, as: "eve").1["after"] == 18, "nothing was acknowledged")
    }

    /// The records of the pages filed so far are written as a consumer is sent the first of them,
    /// so that the consumers that come to those pages next find them stored: their acks then wait
    /// for the commit of their cursors only, not for a page's record first.
    @Test func pages_filed_ahead_are_recorded_as_a_consumer_is_sent_the_first() throws {
        let directory = try TemporaryDirectory()
        let (state, numbers) = (directory.path("state"), try Self.numbers(in: directory))
        let config = Self.config(state: state, numbers: numbers).replacingOccurrences(of: "prefetch = 0", with: "prefetch = 8")
        let daemon = try DaemonProcess(config: config, directory: directory)
        let (client, _) = try Self.subscribe(daemon, as: "dora")
        try AnswersTogetherTests.waitUntilCached(pages: 8, by: daemon)
        try client.send("next numbers")
        #expect(try client.expect("page")["page"] == 1)
        #expect(try client.request("ack numbers 1")["page"] == 1)
        try Self.kill(daemon)
        let stored = try ChildProcess.run(Self.sqlite, ["\(state)/state.db", "SELECT count(*) FROM pages"])
        let count = Int(stored.output.trimmingCharacters(in: .whitespacesAndNewlines)) ?? 0
        #expect(count >= 8, "pages recorded by the time page 1's ack was durable: \(stored.output)\(stored.errors)")
    }

    /// A generation near `Int64.max` in `state.db`: the daemon starts (the row is rejected and
    /// logged) even with a changed definition, and refreshes; `state check` names the row.
    @Test func a_hostile_generation_in_the_state_is_rejected_not_a_crash_and_check_names_it() throws {
        let directory = try TemporaryDirectory()
        let (state, numbers) = (directory.path("state"), try Self.numbers(in: directory))
        var daemon = try DaemonProcess(config: Self.config(state: state, numbers: numbers), directory: directory)
        let (client, _) = try Self.subscribe(daemon, as: "dora")
        try client.send("next numbers 2")
        _ = try (client.expect("page"), client.expect("page"))
        try Self.kill(daemon)
        try Self.sql("\(state)/state.db", "UPDATE feeds SET generation = 9223372036854775806")

        let configPath = try directory.write("check.toml", Self.config(state: state, numbers: numbers))
        let check = try ChildProcess.run(FeeddBinaries.feedd, ["state", "check", "--config", configPath])
        #expect(check.status == 0)
        #expect(check.output.contains("feedd will reject at start: feed numbers: generation 9223372036854775806 is outside 1...1099511627776"), "\(check.output)")

        // page_size changed: the feed would start the generation after the stored one.
        daemon = try DaemonProcess(config: Self.config(state: state, numbers: numbers, pageSize: 2), directory: directory)
        try daemon.log.waitForLine(containing: "rejected feed numbers: generation 9223372036854775806 is outside")
        let reader = try daemon.connect()
        #expect(try reader.request(["op": "subscribe", "feed": "numbers", "consumer": "dora"])["generation"] == 1)
        #expect(try reader.request("refresh numbers")["generation"] == 2)
        #expect(daemon.isRunning)
    }

    /// `state check` after `kill -9` leaves `state.db` and its write-ahead log exactly as they
    /// were: a read-write open would checkpoint the log into `state.db` and delete it.
    @Test func state_check_after_kill_9_only_reads() throws {
        let directory = try TemporaryDirectory()
        let (state, numbers) = (directory.path("state"), try Self.numbers(in: directory))
        let daemon = try DaemonProcess(config: Self.config(state: state, numbers: numbers), directory: directory)
        let (client, _) = try Self.subscribe(daemon, as: "dora")
        try client.send("next numbers 3")
        for _ in 0..<3 { try client.expect("page") }
        #expect(try client.request("ack numbers 3")["page"] == 3)
        try Self.kill(daemon)
        let files = ["state.db", "state.db-wal"].map { "\(state)/\($0)" }
        let before = try files.map { try Data(contentsOf: URL(fileURLWithPath: $0)) }
        #expect(before[1].count > 0, "the log holds the last commits")

        let configPath = try directory.write("check.toml", Self.config(state: state, numbers: numbers))
        let check = try ChildProcess.run(FeeddBinaries.feedd, ["state", "check", "--config", configPath])
        #expect(check.status == 0 && check.output.contains(", 1 consumer\n"), "\(check.output)\(check.errors)")
        let after = try files.map { try Data(contentsOf: URL(fileURLWithPath: $0)) }
        #expect(after == before, "state check changed the files")
    }
}
