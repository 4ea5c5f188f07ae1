import FeedClient
import FeedKit
import Foundation
import Testing
import TestSupport

/// Memory is bounded by bytes for every source (issue 23, item 10): pages of very many small
/// JSON items cost their encoded line, not a tree per item, and decoding one costs a bounded
/// multiple of its body for a moment. Not under a sanitizer, whose shadow memory is most of what
/// /proc would show (and which makes the 1.6 million items take minutes).
@Suite(.serialized, .enabled(if: !Sanitizer.isActive)) struct WidePageMemoryTests {
    static let pages = 8
    static let itemsPerPage = 200_000

    @Test(arguments: ["s3", "http"])
    func reading_eight_pages_of_200000_items_stays_within_a_quarter_gigabyte(_ source: String) throws {
        let upstream = try LoopbackUpstream()
        for page in 1...Self.pages {
            upstream.setResource("/feed-\(page).json", LoopbackUpstream.Resource(body: WidePage.body(page: page, items: Self.itemsPerPage, last: page == Self.pages), contentType: "application/json"))
        }
        let daemon = try DaemonProcess(config: """
            [feeds.wide]
            source = "\(source)"
            url = "\(upstream.baseURL)/feed-{page}.json"
            prefetch = 0
            cache_bytes = "32MiB"
            \(source == "http" ? "items = \"items\"\nid = \"id\"\nnext = \"hasMorePages\"" : "")
            """)
        let reader = try daemon.connect()
        _ = try reader.request("ping")
        let before = try daemon.memory("VmRSS")
        try reader.send("next wide \(Self.pages)")
        _ = try reader.expect("subscribed", timeout: .seconds(120))
        for page in 1...Self.pages {
            guard let line = try reader.connection.readLine(timeout: .seconds(120)) else { throw TestFailure("closed") }
            #expect(line.starts(with: Array(#"{"type":"page","feed":"wide","generation":1,"page":\#(page),"#.utf8)))
            #expect(line.count > Self.itemsPerPage * 30, "every item is in the page line")
        }
        let growth = (try daemon.memory("VmRSS") - before) / 1024
        #expect(growth < 256, "VmRSS grew by \(growth) MiB reading the pages")
        reader.connection.finishSending()
        let watcher = try daemon.connect()
        #expect(try watcher.clientsOnceOthersLeave() == 1)
        let left = (try daemon.memory("VmRSS") - before) / 1024
        #expect(left < 160, "VmRSS is \(left) MiB over the start once the reader has left")
    }
}
