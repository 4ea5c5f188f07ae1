import FeedKit
import Foundation
import Testing
import TestSupport

/// Out-of-process adapters through the real daemon (SPEC §4, exec protocol).
@Suite struct ExecAdapterEndToEndTests {
    static let scriptedPlugin = URL(fileURLWithPath: #filePath).deletingLastPathComponent()
        .appendingPathComponent("../plugins/scripted-plugin").standardized.path

    static func daemon(
        failPage: Int? = nil, how: String = "none", timeout: String = "10s", pages: Int = 3, extra: String = ""
    ) throws -> DaemonProcess {
        let directory = try TemporaryDirectory()
        return try DaemonProcess(config: """
            [feeds.custom]
            source = "exec"
            command = ["\(scriptedPlugin)"]
            page_size = 2
            pages = \(pages)
            fail_page = \(failPage ?? 0)
            fail_how = "\(how)"
            once = "\(directory.path("failed-once"))"
            timeout = "\(timeout)"
            retry_max_delay = "300ms"
            \(extra)
            """, directory: directory)
    }

    /// Issue 12, defect 1: a refresh while page 1 is being fetched used to start a second fetch
    /// beside it, and the plugin's answer to the abandoned one was taken for the next request, so
    /// every later page held the items of the one before.
    @Test func a_refresh_during_a_fetch_never_shifts_the_pages_of_the_new_generation() throws {
        let daemon = try Self.daemon(pages: 10, extra: "prefetch = 0\ndelay = 0.5")
        let client = try daemon.connect()
        try client.send("next custom")
        try client.expect("subscribed")
        try daemon.log.waitForLine(containing: "fetching page 1")
        let refreshed = try client.request("refresh custom")
        #expect(refreshed["type"] == "refreshed" && refreshed["generation"] == 2)
        // The `next` sent before the refresh is answered in the new generation.
        var pages = [try client.read(until: "page").found]
        for _ in 2...3 {
            try client.send("next custom")
            pages.append(try client.read(until: "page").found)
        }
        #expect(pages.map { $0["generation"] } == [2, 2, 2])
        #expect(JSONValue.pageNumbers(pages) == [1, 2, 3])
        for (index, page) in pages.enumerated() {
            #expect(page["items"]?.arrayValue?.first?["id"] == .string("\(index + 1)-0"), "page \(index + 1) holds its own items")
        }
        #expect(!daemon.log.lines.contains { $0.contains("CONTINUATION MISUSE") })
    }

    static func readAllPages(_ client: TestClient) throws -> (pages: [JSONValue], notices: [JSONValue]) {
        try client.send(["op": "next", "feed": "custom", "count": 10, "id": "all"])
        try client.expect("subscribed")
        let (messages, end) = try client.read(until: "end")
        #expect(end["page"] == 3)
        return (messages.filter { $0["type"] == "page" }, messages.filter { $0["type"] == "error" })
    }

    @Test func an_exec_feed_pages_through_then_ends() throws {
        let daemon = try Self.daemon()
        let (pages, notices) = try Self.readAllPages(try daemon.connect())
        #expect(JSONValue.pageNumbers(pages) == [1, 2, 3])
        #expect(pages[0]["items"] == [["id": "1-0", "data": ["page": 1, "index": 0]], ["id": "1-1", "data": ["page": 1, "index": 1]]])
        #expect(pages.map { $0["last"] } == [false, false, true])
        #expect(notices.isEmpty)
    }

    @Test(arguments: ["crash", "hang", "garbage"])
    func a_plugin_that_fails_once_is_restarted_and_the_feed_carries_on(_ how: String) throws {
        let daemon = try Self.daemon(failPage: 2, how: how, timeout: "700ms")
        let (pages, notices) = try Self.readAllPages(try daemon.connect())
        #expect(JSONValue.pageNumbers(pages) == [1, 2, 3], "no page skipped or repeated")
        #expect(pages[1]["items"]?.arrayValue?.first?["id"] == "2-0")
        #expect(notices.count == 1, "\(notices.map(\.jsonText))")
        #expect(notices.first?["code"] == "upstream" && notices.first?["id"] == "all")
        let expected = ["crash": "exited with status 3", "hang": "answer within 700 ms", "garbage": "wrote a line that is not a JSON object"]
        #expect(notices.first?["message"]?.stringValue?.contains(expected[how]!) == true, "\(notices.first?.jsonText ?? "")")
        try daemon.log.waitForLine(containing: "start 2")
    }

    @Test func a_plugins_stderr_is_logged_with_the_feed_and_it_inherits_nothing_else() throws {
        let daemon = try Self.daemon()
        // The client stays: a next whose client is gone has nobody to fetch for.
        let client = try daemon.connect()
        try client.send("next custom")
        let line = try daemon.log.waitForLine(containing: "scripted plugin ready for custom")
        #expect(line.contains("feed custom: plugin stderr: "))
        #expect(line.contains("inherited descriptors []"), "\(line)")
        #expect(line.contains("environment ['FEEDD_FEED', 'LANG', 'PATH']"), "\(line)")
    }

    @Test func the_example_plugin_serves_a_directory() throws {
        let directory = try TemporaryDirectory()
        for name in ["b", "a", "c"] { try directory.write("docs/\(name).json", #"{"name":"\#(name)"}"#) }
        let plugin = URL(fileURLWithPath: #filePath).deletingLastPathComponent().appendingPathComponent("../../examples/plugins/json-dir").standardized.path
        let daemon = try DaemonProcess(config: """
            [feeds.docs]
            source = "exec"
            command = ["\(plugin)"]
            directory = "\(directory.path("docs"))"
            page_size = 2
            """, directory: directory)
        let client = try daemon.connect()
        try client.send("next docs 2")
        try client.expect("subscribed")
        let pages = try [client.expect("page"), client.expect("page")]
        #expect(pages.map { $0["items"]?.arrayValue?.compactMap { $0["id"]?.stringValue } } == [["a.json", "b.json"], ["c.json"]])
        #expect(pages[1]["last"] == true)
        try daemon.log.waitForLine(containing: "feed docs: plugin stderr: serving \(directory.path("docs"))")
    }
}
