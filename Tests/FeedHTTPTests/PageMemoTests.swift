import FeedEngine
import Testing

@testable import FeedHTTP

/// Bytes made from a page once per page: the heads of page events and one-page answers.
@MainActor
@Suite struct PageMemoTests {
    private func page(_ number: Int) -> DeliveredPage {
        DeliveredPage(generation: 1, number: number, isLast: false, openBody: PageBytes(Array(#"{"type":"page","feed":"f","page":\#(number)"#.utf8)))
    }

    @Test func a_page_s_bytes_are_made_once_and_shared() {
        var memo = PageMemo(capacity: 4)
        var made = 0
        let page = page(1)
        let first = memo.bytes(for: page.openBody) { made += 1; return [1] }
        let second = memo.bytes(for: page.openBody) { made += 1; return [2] }
        #expect(first === second)
        #expect(made == 1)
    }

    @Test func another_page_or_variant_gets_its_own() {
        var memo = PageMemo(capacity: 4)
        let one = page(1), two = page(2)
        let plain = memo.bytes(for: one.openBody) { [1] }
        #expect(Array(memo.bytes(for: one.openBody, variant: true) { [2] }.buffer) == [2])
        #expect(Array(memo.bytes(for: two.openBody) { [3] }.buffer) == [3])
        #expect(memo.bytes(for: one.openBody) { [4] } === plain)
    }

    @Test func past_its_capacity_the_oldest_page_is_made_again() {
        var memo = PageMemo(capacity: 2)
        let pages = (1...3).map(page)
        for page in pages { _ = memo.bytes(for: page.openBody) { [UInt8(page.number)] } }
        var made = false
        _ = memo.bytes(for: pages[0].openBody) { made = true; return [1] }
        #expect(made, "page 1 was the oldest of three in a memo of two")
        made = false
        _ = memo.bytes(for: pages[2].openBody) { made = true; return [3] }
        #expect(!made)
    }

    @Test func a_one_page_answer_is_the_answer_s_pieces_in_one_buffer() {
        let page = page(7)
        for end in [false, true] {
            let pieces = PageGathering.body(feed: "f", pages: [page], generation: 1, end: end).flatMap { Array($0.buffer) }
            let whole = PageGathering.onePageBody(feed: "f", page: page, end: end)
            #expect(Array(whole.buffer) == pieces)
            #expect(String(decoding: whole.buffer, as: UTF8.self)
                == #"{"feed":"f","generation":1,"pages":[{"type":"page","feed":"f","page":7}],"end":\#(end)}"#)
        }
    }
}
