import FeedKit
import Foundation
import Testing
import TestSupport

/// A reader far behind on a file feed: the daemon takes the file's pages in runs, several from
/// one call of the adapter, and every page must be what fetching it alone gives.
@Suite struct FileDrainTests {
    /// 600 lines: JSON, text that is not JSON, blank lines, CRLF endings, and a last line
    /// without its line break.
    static let lines: [String] = (1...600).map { number in
        switch number % 10 {
        case 3: ""
        case 5: "plain text \(number)"
        case 7: #"{"n":\#(number),"crlf":true}"# + "\r"
        case 8: "   "
        default: #"{"n":\#(number),"tags":["alpha","beta"]}"#
        }
    }

    /// The pages the file holds at `pageSize` non-blank lines a page, each item as the daemon
    /// serves a line: its number as the id, its JSON or, if it is not JSON, its text.
    static func expectedPages(pageSize: Int) -> [JSONValue] {
        let items: [JSONValue] = lines.enumerated().compactMap { index, line in
            let text = line.hasSuffix("\r") ? String(line.dropLast()) : line
            guard !text.allSatisfy(\.isWhitespace) else { return nil }
            return ["id": .string(String(index + 1)), "data": (try? JSONValue(parsing: text)) ?? .string(text)]
        }
        return stride(from: 0, to: items.count, by: pageSize).map { .array(Array(items[$0..<min($0 + pageSize, items.count)])) }
    }

    @Test func a_drained_file_gives_every_page_as_fetched_alone_one_request_a_page() throws {
        let directory = try TemporaryDirectory()
        let path = try directory.write("mixed.ndjson", Self.lines.joined(separator: "\n"))
        let daemon = try DaemonProcess(config: """
            [feeds.mixed]
            source = "file"
            path = "\(path)"
            page_size = 3

            [feeds.again]
            source = "file"
            path = "\(path)"
            page_size = 3
            """, directory: directory)
        let expected = Self.expectedPages(pageSize: 3)
        let reader = try daemon.connect()
        try reader.send(["op": "next", "feed": "mixed", "count": .integer(Int64(expected.count + 1))])
        let (messages, end) = try reader.read(until: "end")
        let pages = messages.filter { $0["type"] == "page" }
        #expect(pages.map { $0["page"]?.integerValue } == (1...expected.count).map { Int64($0) })
        #expect(pages.map { $0["items"] } == expected.map(Optional.some))
        #expect(pages.map { $0["last"] == true } == (1...expected.count).map { $0 == expected.count })
        #expect(end["page"] == .integer(Int64(expected.count)))

        let status = try reader.request("status")
        let feed = try #require(status["feeds"]?.arrayValue?.first { $0["name"] == "mixed" })
        #expect(feed["fetched_pages"] == .integer(Int64(expected.count)))
        #expect(feed["upstream_requests"] == .integer(Int64(expected.count)), "one upstream request a page, however many a call brought")

        // The same file's pages reached by number alone, not from the token of the page before,
        // on a feed that has fetched nothing before, are the same.
        for after in [1, 37, expected.count - 2] {
            let other = try daemon.connect()
            try other.send(["op": "subscribe", "feed": "again", "after": .integer(Int64(after))])
            try other.expect("subscribed")
            try other.send(["op": "next", "feed": "again", "count": 2])
            let direct = try (0..<2).map { _ in try other.expect("page") }
            #expect(direct.map { $0["items"] } == pages[after..<after + 2].map { $0["items"] }, "after \(after)")
        }
    }
}
