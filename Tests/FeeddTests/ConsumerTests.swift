import FeedKit
import Foundation
import Glibc
import Testing
import TestSupport

/// Durable consumers (SPEC §1, §5): cursors that survive disconnects, restarts and kill -9.
@Suite struct ConsumerTests {
    /// A daemon over a file of `lines` numbered lines, one to a page, in `directory` (state included).
    static func daemon(in directory: TemporaryDirectory, lines: Int = 200) throws -> DaemonProcess {
        let path = directory.path("numbers.ndjson")
        if !FileManager.default.fileExists(atPath: path) {
            try directory.write("numbers.ndjson", (1...lines).map(String.init).joined(separator: "\n") + "\n")
        }
        return try DaemonProcess(config: """
            [daemon]
            state_dir = "\(directory.path("state"))"
            [feeds.numbers]
            source = "file"
            path = "\(path)"
            page_size = 1
            """, directory: directory)
    }

    static func subscribe(_ client: TestClient, as consumer: String, after: Int? = nil) throws -> JSONValue {
        var request: JSONValue = ["op": "subscribe", "feed": "numbers", "consumer": .string(consumer)]
        if let after, case .object(var fields) = request {
            fields["after"] = .integer(Int64(after))
            request = .object(fields)
        }
        return try client.request(request)
    }

    static func next(_ client: TestClient, _ count: Int = 1) throws -> [Int64] {
        try client.send("next numbers \(count)")
        return try JSONValue.pageNumbers((0..<count).map { _ in try client.expect("page") })
    }

    @Test func a_consumer_resumes_after_what_it_acknowledged() throws {
        let directory = try TemporaryDirectory()
        let daemon = try Self.daemon(in: directory)
        do {
            let client = try daemon.connect()
            let subscribed = try Self.subscribe(client, as: "c1")
            #expect(subscribed["consumer"] == "c1" && subscribed["after"] == 0)
            #expect(try Self.next(client, 2) == [1, 2])
            #expect(try client.request("ack numbers 2")["page"] == 2)
        }
        let again = try daemon.connect()
        #expect(try Self.subscribe(again, as: "c1")["after"] == 2)
        #expect(try Self.next(again) == [3])
    }

    @Test func pages_never_acknowledged_come_again() throws {
        let directory = try TemporaryDirectory()
        let daemon = try Self.daemon(in: directory)
        do {
            let client = try daemon.connect()
            _ = try Self.subscribe(client, as: "c1")
            #expect(try Self.next(client, 2) == [1, 2])
            #expect(try Self.next(client) == [3], "this next acknowledges pages 1 and 2")
        }
        let again = try daemon.connect()
        #expect(try Self.subscribe(again, as: "c1")["after"] == 2)
        #expect(try Self.next(again) == [3], "page 3 was delivered but never acknowledged")
    }

    @Test func a_cursor_survives_kill_9() throws {
        let directory = try TemporaryDirectory()
        var daemon = try Self.daemon(in: directory)
        let client = try daemon.connect()
        _ = try Self.subscribe(client, as: "c1")
        #expect(try Self.next(client, 3) == [1, 2, 3])
        #expect(try client.request("ack numbers 3")["page"] == 3)
        daemon.send(signal: SIGKILL)
        try daemon.waitForExit()
        daemon = try Self.daemon(in: directory)
        let again = try daemon.connect()
        #expect(try Self.subscribe(again, as: "c1")["after"] == 3)
        #expect(try Self.next(again) == [4])
    }

    @Test func after_overrides_the_stored_cursor_and_is_stored() throws {
        let directory = try TemporaryDirectory()
        let daemon = try Self.daemon(in: directory)
        let client = try daemon.connect()
        _ = try Self.subscribe(client, as: "c1")
        _ = try Self.next(client, 2)
        _ = try client.request("ack numbers 2")
        #expect(try Self.subscribe(client, as: "c1", after: 1)["after"] == 1)
        #expect(try Self.next(client) == [2])
        let other = try daemon.connect()
        #expect(try Self.subscribe(other, as: "c1")["after"] == 1)
        // Past the pages fetched so far, the store knows no such page yet: the cursor is stored
        // with the first ack after the pages are fetched (a crash before that gives duplicates, no gap).
        #expect(try Self.subscribe(other, as: "c1", after: 10)["after"] == 10)
        #expect(try Self.next(other) == [11])
        #expect(try other.request("ack numbers 11")["page"] == 11)
        #expect(try Self.subscribe(try daemon.connect(), as: "c1")["after"] == 11)
    }

    @Test func status_lists_every_consumer_connected_or_not() throws {
        let directory = try TemporaryDirectory()
        let daemon = try Self.daemon(in: directory)
        do {
            let gone = try daemon.connect()
            _ = try Self.subscribe(gone, as: "gone")
            _ = try Self.next(gone)
            _ = try gone.request("ack numbers 1")
        }
        let here = try daemon.connect()
        _ = try Self.subscribe(here, as: "here")
        let feed = try #require(here.request("status")["feeds"]?.arrayValue?.first)
        let consumers = feed["consumers"]?.arrayValue?.map { [$0["name"], $0["after"], $0["connected"]] }
        #expect(consumers == [["gone", 1, false], ["here", 0, true]])
    }

    @Test func refresh_puts_every_consumer_back_to_zero_durably() throws {
        let directory = try TemporaryDirectory()
        var daemon = try Self.daemon(in: directory)
        do {
            let client = try daemon.connect()
            _ = try Self.subscribe(client, as: "away")
            _ = try Self.next(client, 2)
            _ = try client.request("ack numbers 2")
        }
        let client = try daemon.connect()
        #expect(try client.request("refresh numbers")["generation"] == 2)
        daemon.send(signal: SIGKILL)
        try daemon.waitForExit()
        daemon = try Self.daemon(in: directory)
        let again = try daemon.connect()
        let subscribed = try Self.subscribe(again, as: "away")
        #expect(subscribed["after"] == 0)
        #expect(subscribed["generation"] == 2, "the generation is durable too")
    }

    @Test func a_second_connection_takes_a_consumer_over() throws {
        let directory = try TemporaryDirectory()
        let daemon = try Self.daemon(in: directory)
        let first = try daemon.connect()
        _ = try Self.subscribe(first, as: "c1")
        let second = try daemon.connect()
        _ = try Self.subscribe(second, as: "c1")
        let notice = try first.expect("unsubscribed")
        #expect(notice["consumer"] == "c1")
        #expect(try Self.next(second) == [1])
    }

    @Test func forget_deletes_a_consumer() throws {
        let directory = try TemporaryDirectory()
        let daemon = try Self.daemon(in: directory)
        let client = try daemon.connect()
        _ = try Self.subscribe(client, as: "c1")
        _ = try Self.next(client)
        _ = try client.request("ack numbers 1")
        _ = try client.request("unsubscribe numbers")
        let forgotten = try client.request(#"{"op":"forget","feed":"numbers","consumer":"c1"}"#)
        #expect(forgotten["type"] == "forgotten" && forgotten["consumer"] == "c1")
        #expect(try Self.subscribe(client, as: "c1")["after"] == 0)
        #expect(try client.request(#"{"op":"forget","feed":"numbers","consumer":"nobody"}"#)["code"] == "bad_request")
    }

    @Test(arguments: ["emptied", "truncated", "garbage"])
    func a_damaged_store_stops_the_daemon_until_it_is_repaired(_ damage: String) throws {
        let directory = try TemporaryDirectory()
        var daemon = try Self.daemon(in: directory)
        let client = try daemon.connect()
        _ = try Self.subscribe(client, as: "c1")
        _ = try Self.next(client, 3)
        #expect(try client.request("ack numbers 3")["page"] == 3)
        daemon.send(signal: SIGTERM)
        #expect(try daemon.waitForExit() == 0)
        let database = directory.path("state/state.db")
        var bytes = try #require(FileManager.default.contents(atPath: database))
        switch damage {
        case "emptied": bytes = Data()
        case "truncated": bytes = bytes.prefix(bytes.count / 2)
        default: bytes = Data((0..<8192).map { _ in UInt8.random(in: 0...255) })
        }
        try bytes.write(to: URL(fileURLWithPath: database))
        daemon = try DaemonProcess(config: try String(contentsOfFile: directory.path("feedd.toml"), encoding: .utf8), directory: directory, waitUntilListening: false)
        #expect(try daemon.waitForExit() == 1)
        #expect(daemon.log.text.contains(database) && daemon.log.text.contains("feedd state repair"))

        let repair = try ChildProcess.run(FeeddBinaries.feedd, ["state", "repair", "--config", directory.path("feedd.toml")])
        #expect(repair.status == 0, "\(repair.errors)")
        #expect(repair.output.contains("the damaged file is kept as \(database).damaged-"))
        daemon = try Self.daemon(in: directory)
        let after = try #require(try Self.subscribe(try daemon.connect(), as: "c1")["after"]?.integerValue)
        #expect(after == 0 || after == 3, "a salvaged cursor is the one stored, else the consumer starts over")
    }

    /// SIGKILL at random moments in a stream of acks: after each restart the stored cursor is one
    /// that was acknowledged, never ahead of any ack sent, and never behind an ack the daemon confirmed.
    @Test func cursors_are_crash_consistent_under_kill_9_during_acks() throws {
        let directory = try TemporaryDirectory()
        var confirmed: Int64 = 0
        var sent: Int64 = 0
        var generator = SystemRandomNumberGenerator()
        for round in 0..<50 {
            let daemon = try Self.daemon(in: directory, lines: 2_000)
            let client = try daemon.connect()
            let stored = try #require(Self.subscribe(client, as: "crash")["after"]?.integerValue)
            #expect(stored >= confirmed && stored <= sent, "round \(round): stored \(stored), confirmed \(confirmed), sent \(sent)")
            confirmed = stored
            sent = stored
            try client.send("next numbers 20")
            for _ in 0..<20 { _ = try client.expect("page") }
            let pipelined = stored + 20
            var acks = ""
            for page in (stored + 1)...pipelined { acks += "ack numbers \(page)\n" }
            sent = pipelined
            try client.connection.sendRaw(Array(acks.utf8))
            let readBeforeKill = Int.random(in: 0...20, using: &generator)
            for _ in 0..<readBeforeKill {
                let ack = try client.expect("ack")
                confirmed = max(confirmed, ack["page"]?.integerValue ?? confirmed)
            }
            daemon.send(signal: SIGKILL)
            try daemon.waitForExit()
        }
    }
}
