import FeedKit
import Foundation
import Glibc
import Testing
import TestSupport

/// Pages of a source that cannot fetch them again survive a restart (issue 13, SPEC §3): they are
/// stored as fetched, within `daemon.state_page_bytes`, and served from the state directory, so a
/// consumer resuming after `kill -9` continues the very sequence it acknowledged.
@Suite struct DurableStatePageBodyTests {
    static let plugin = URL(fileURLWithPath: #filePath).deletingLastPathComponent()
        .appendingPathComponent("../plugins/unrepeatable-plugin").standardized.path

    /// A daemon serving `custom` from `unrepeatable-plugin`, whose every fetch holds new items.
    private static func daemon(
        in directory: TemporaryDirectory, state: String? = nil, daemonKeys: String = "", feedKeys: String = "", padding: Int = 0
    ) throws -> DaemonProcess {
        try DaemonProcess(config: """
            [daemon]
            state_dir = "\(state ?? directory.path("state"))"
            \(daemonKeys)
            [feeds.custom]
            source = "exec"
            command = ["\(plugin)"]
            page_size = 2
            prefetch = 0
            counter = "\(directory.path("counter"))"
            log = "\(directory.path("fetches"))"
            padding = \(padding)
            \(feedKeys)
            """, directory: directory)
    }

    /// The pages the plugin was asked for, in order.
    private static func fetches(in directory: TemporaryDirectory) -> [Int] {
        let text = (try? String(contentsOfFile: directory.path("fetches"), encoding: .utf8)) ?? ""
        return text.split(separator: "\n").compactMap { Int($0) }
    }

    private static func kill(_ daemon: DaemonProcess) throws {
        daemon.send(signal: SIGKILL)
        _ = try daemon.waitForExit()
    }

    /// `count` pages read with `next` (after subscribing as `consumer`, if given).
    private static func read(_ count: Int, from client: TestClient, as consumer: String? = nil) throws -> [JSONValue] {
        if let consumer { _ = try client.request(["op": "subscribe", "feed": "custom", "consumer": .string(consumer)]) }
        try client.send("next custom \(count)")
        return try (0..<count).map { _ in try client.read(until: "page").found }
    }

    @Test func test_a_consumer_resumes_after_kill_9_with_the_pages_it_was_sent_not_new_ones() throws {
        let directory = try TemporaryDirectory()
        var daemon = try Self.daemon(in: directory)
        var client = try daemon.connect()
        let before = try Self.read(3, from: client, as: "dora")
        #expect(JSONValue.pageNumbers(before) == [1, 2, 3])
        #expect(try client.request("ack custom 2")["page"] == 2)
        try Self.kill(daemon)
        #expect(Self.fetches(in: directory) == [1, 2, 3])

        daemon = try Self.daemon(in: directory)
        client = try daemon.connect()
        let resumed = try client.request(#"{"op":"subscribe","feed":"custom","consumer":"dora"}"#)
        #expect(resumed["generation"] == 1 && resumed["after"] == 2)
        let again = try Self.read(1, from: client)[0]
        #expect(again["page"] == 3)
        #expect(again["items"] == before[2]["items"], "page 3 holds the items dora was sent before the restart")
        #expect(Self.fetches(in: directory) == [1, 2, 3], "the plugin is not asked for pages 1 to 3 again")

        // Page 4 is the first new one: one request, with the token page 3 returned.
        let next = try Self.read(1, from: client)[0]
        #expect(next["page"] == 4 && next["items"]?.arrayValue?.first?["id"] == "4.4.0")
        #expect(Self.fetches(in: directory) == [1, 2, 3, 4])
        #expect(try client.request("status")["feeds"]?.arrayValue?.first?["upstream_requests"] == 1)
    }

    /// About 10 KB per page; a budget of 24 KiB keeps the last two pages' items.
    @Test func test_over_the_budget_the_oldest_pages_go_and_a_consumer_that_needs_one_starts_a_new_generation() throws {
        let directory = try TemporaryDirectory()
        var daemon = try Self.daemon(in: directory, daemonKeys: #"state_page_bytes = "24KiB""#, padding: 5_000)
        let dora = try daemon.connect()
        _ = try Self.read(1, from: dora, as: "dora")
        #expect(try dora.request("ack custom 1")["page"] == 1)
        var client = try daemon.connect()
        let before = try Self.read(5, from: client, as: "eve")
        #expect(try client.request("ack custom 4")["page"] == 4)
        try Self.kill(daemon)

        daemon = try Self.daemon(in: directory, daemonKeys: #"state_page_bytes = "24KiB""#, padding: 5_000)
        // Pages 4 and 5 are still stored: eve resumes with page 5 as it was.
        client = try daemon.connect()
        let eve = try Self.read(1, from: client, as: "eve")[0]
        #expect(eve["page"] == 5 && eve["items"] == before[4]["items"])
        // A new subscriber starts after the pages that cannot be served as they were.
        let newcomer = try daemon.connect()
        #expect(try newcomer.request(#"{"op":"subscribe","feed":"custom"}"#)["after"] == 3)
        #expect(try Self.read(1, from: newcomer)[0]["items"] == before[3]["items"])
        #expect(Self.fetches(in: directory) == [1, 2, 3, 4, 5])

        // Dora needs page 2, whose items are gone: a new generation, every consumer back at 0.
        let doraAgain = try daemon.connect()
        #expect(try doraAgain.request(#"{"op":"subscribe","feed":"custom","consumer":"dora"}"#)["after"] == 1)
        try doraAgain.send("next custom")
        let refreshed = try doraAgain.read(until: "refreshed").found
        #expect(refreshed["generation"] == 2)
        let first = try doraAgain.read(until: "page").found
        #expect(first["generation"] == 2 && first["page"] == 1 && first["items"]?.arrayValue?.first?["id"] == "1.6.0")
        #expect(try client.read(until: "refreshed").found["generation"] == 2)
        try daemon.log.waitForLine(containing: "page 2: its stored items were dropped to keep within daemon.state_page_bytes")
        let consumers = try client.request("status")["feeds"]?.arrayValue?.first?["consumers"]?.arrayValue ?? []
        #expect(consumers.first { $0["name"] == "eve" }?["after"] == 0)
    }

    @Test func test_a_page_the_cache_gave_up_is_read_from_the_state_not_fetched_again() throws {
        let directory = try TemporaryDirectory()
        let daemon = try Self.daemon(in: directory, feedKeys: "cache_pages = 1")
        let first = try Self.read(3, from: try daemon.connect())
        let later = try Self.read(3, from: try daemon.connect())
        #expect(later.map { $0["items"] } == first.map { $0["items"] })
        #expect(Self.fetches(in: directory) == [1, 2, 3])
        let status = try daemon.connect().request("status")["feeds"]?.arrayValue?.first
        #expect(status?["upstream_requests"] == 3 && status?["fetched_pages"] == 3)
    }

    @Test func test_a_page_that_cannot_be_stored_is_not_served_until_it_can_be() throws {
        let directory = try TemporaryDirectory()
        guard let disk = SmallDisk(in: directory) else { return }
        defer { disk.unmount() }
        var daemon = try Self.daemon(in: directory, state: "\(disk.path)/state", feedKeys: #"retry_max_delay = "200ms""#)
        let client = try daemon.connect()
        _ = try Self.read(1, from: client)

        let filler = disk.fill()
        try client.send("next custom")
        let notice = try client.read(until: "error").found
        #expect(notice["code"] == "upstream" && notice["message"]?.stringValue?.contains("page 2 cannot be stored") == true, "\(notice.jsonText)")

        try FileManager.default.removeItem(atPath: filler)
        let page = try client.read(until: "page").found
        #expect(page["page"] == 2)
        try Self.kill(daemon)
        daemon = try Self.daemon(in: directory, state: "\(disk.path)/state")
        let resumed = try daemon.connect()
        #expect(try resumed.request(#"{"op":"subscribe","feed":"custom","after":1}"#)["after"] == 1)
        #expect(try Self.read(1, from: resumed)[0]["items"] == page["items"], "page 2 is served as it was sent")
    }
}
