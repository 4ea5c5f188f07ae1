import FeedKit
import Foundation
import Glibc
import Testing
import TestSupport

/// Requests a consumer sends together are answered together: a `next` and an `ack` in one write
/// get the page and the ack in one write once the ack is durable (the ack storm's round trip), and
/// the ack is still answered only then. The cursor's write is made slow by a trigger, so that a
/// page written at once would be read well before the ack; the pages asked for are cached first,
/// so that the `next` is answered while the requests are read.
@Suite struct AnswersTogetherTests {
    /// A daemon whose writes of consumer cursors each take a while (a trigger's quadratic count),
    /// and a client subscribed to it as `consumer` whose cursor is stored at 0.
    static func daemonWithSlowCursors(in directory: TemporaryDirectory, consumer: String) throws -> (DaemonProcess, TestClient, state: String, numbers: String) {
        let (state, numbers) = (directory.path("state"), try StateFaultTests.numbers(in: directory))
        let config = Self.config(state: state, numbers: numbers)
        let first = try DaemonProcess(config: config, directory: directory)
        _ = try StateFaultTests.subscribe(first, as: consumer)
        try StateFaultTests.kill(first)
        try StateFaultTests.sql("\(state)/state.db", """
            CREATE TABLE slow (x INTEGER);
            WITH RECURSIVE n(i) AS (SELECT 1 UNION ALL SELECT i + 1 FROM n WHERE i < 2000) INSERT INTO slow SELECT i FROM n;
            CREATE TRIGGER cursors_are_slow BEFORE INSERT ON consumers BEGIN
                SELECT count(*) FROM slow a, slow b WHERE a.x < b.x;
            END;
            """)
        let daemon = try DaemonProcess(config: config, directory: directory)
        let (client, subscribed) = try StateFaultTests.subscribe(daemon, as: consumer)
        guard subscribed["after"] == 0 else { throw TestFailure("expected the stored cursor 0, got \(subscribed.jsonText)") }
        try waitUntilCached(pages: cachedPages, by: daemon)
        return (daemon, client, state, numbers)
    }

    /// Pages the feed fetches ahead of a subscriber at 0.
    static let cachedPages = 16

    static func config(state: String, numbers: String) -> String {
        StateFaultTests.config(state: state, numbers: numbers).replacingOccurrences(of: "prefetch = 0", with: "prefetch = \(cachedPages)")
    }

    /// Waits until the feed has cached `pages` pages.
    static func waitUntilCached(pages: Int, by daemon: DaemonProcess) throws {
        try daemon.waitForStatus("the feed cached \(pages) pages", within: .seconds(10)) { status in
            (status["feeds"]?.arrayValue?.first?["cached_pages"]?.integerValue ?? 0) >= pages
        }
    }

    @Test func a_page_asked_for_with_an_ack_leaves_in_one_write_with_the_ack_once_it_is_durable() throws {
        let directory = try TemporaryDirectory()
        let (slow, client, state, numbers) = try Self.daemonWithSlowCursors(in: directory, consumer: "dora")
        try client.connection.sendRaw(Array("next numbers\nack numbers 1\n".utf8))
        #expect(try client.expect("page")["page"] == 1)
        // In the same read as the page: a page written at once would come a slow commit earlier.
        #expect(try client.expect("ack", timeout: .milliseconds(1))["page"] == 1)
        try StateFaultTests.kill(slow)
        let daemon = try DaemonProcess(config: Self.config(state: state, numbers: numbers), directory: directory)
        #expect(try StateFaultTests.subscribe(daemon, as: "dora").1["after"] == 1, "the ack was answered once durable")
    }

    /// More pages than the connection's window, asked for with an ack: the window fills while the
    /// ack holds the output, and once the ack is answered the rest of the pages follow.
    @Test func pages_beyond_the_window_still_come_after_an_ack_held_them() throws {
        let directory = try TemporaryDirectory()
        let (daemon, client, _, _) = try Self.daemonWithSlowCursors(in: directory, consumer: "eve")
        try client.connection.sendRaw(Array("next numbers 12\nack numbers 2\n".utf8))
        var pages: [Int] = []
        var acks: [JSONValue] = []
        while acks.isEmpty || pages.count < 12 {
            let message = try client.read()
            switch message["type"]?.stringValue {
            case "page": pages.append(message["page"]?.integerValue.map(Int.init) ?? 0)
            case "ack": acks.append(message)
            default: throw TestFailure("expected pages and an ack, got \(message.jsonText)")
            }
        }
        #expect(pages == Array(1...12))
        #expect(acks.map { $0["page"] } == [2])
        #expect(daemon.isRunning)
    }
}
