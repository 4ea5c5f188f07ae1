import FeedKit
import FeedState
import Testing

@testable import FeedEngine

/// How a page of a source that cannot fetch it again is kept in the state directory.
@Suite struct StoredPageBodyTests {
    /// Writes a page line as the server does, to the point where a reply's id would go.
    struct LineEncoder: PageEncoder {
        func encode(feed: String, generation: Int, number: Int, items: [Item], isLast: Bool) -> SharedBytes {
            let ids = items.map { "\"\($0.id)\"" }.joined(separator: ",")
            return SharedBytes(Array(#"{"type":"page","feed":"\#(feed)","page":\#(number),"items":[\#(ids)],"last":\#(isLast)}"#.utf8) + [0x0A])
        }
    }

    @Test(arguments: [NextPage.more(token: "after-3"), .later(token: nil), .end])
    func a_stored_page_comes_back_byte_for_byte_with_how_its_source_went_on(_ next: NextPage) throws {
        let page = Page(
            feed: "custom", generation: 2, number: 3, items: [Item(id: "a", data: 1), Item(id: "b", data: 2)], isLast: next == .end,
            encoder: LineEncoder())
        let record = StoredPageBody.record(page.published(next: next, sourcePage: 3))
        #expect(record.token == next.token)
        let body = try #require(record.body) + Array(try #require(record.bodyTail).buffer)
        let stored = try #require(StoredPageBody.decode(body, feed: "custom", generation: 2, number: 3, wrap: false))
        #expect(stored.next == next)
        #expect(Array(stored.page.line.buffer) == Array(page.line.buffer))
        #expect(stored.page.itemCount == 2 && stored.page.isLast == (next == .end) && stored.page.number == 3)
    }

    @Test func a_body_that_is_not_a_stored_page_is_refused() {
        for body in ["", "{}\n{\"type\":\"page\"}\n", "{\"items\":1,\"source_page\":1,\"next\":\"sideways\"}\n{\"type\":\"page\",\"x\":1}\n", "no newline"] {
            #expect(StoredPageBody.decode(Array(body.utf8), feed: "f", generation: 1, number: 1, wrap: false) == nil, "\(body)")
        }
    }

    @Test func after_a_restart_the_last_stored_page_is_read_before_its_token_is_used() {
        let kept = StoredPage(token: "t", bodyBytes: 10, hasBody: true)
        let tokenOnly = StoredPage(token: "u", bodyBytes: 0, hasBody: false)
        let feed = StoredFeed(generation: 1, fingerprint: "f", seed: nil, pages: [tokenOnly, kept, kept], bodiesDroppedThrough: 1)
        #expect(feed.tokensToPageOnWith == ["u", "t"])
        #expect(!feed.keepsItems(of: 1) && feed.keepsItems(of: 2) && feed.keepsItems(of: 3) && !feed.keepsItems(of: 4) && !feed.keepsItems(of: 0))
        #expect(feed.lostItems(of: 1) && !feed.lostItems(of: 2))
        let empty = StoredFeed(generation: 1, fingerprint: "f", seed: nil, pages: [], bodiesDroppedThrough: 0)
        #expect(empty.tokensToPageOnWith.isEmpty && !empty.keepsItems(of: 1))
    }
}
