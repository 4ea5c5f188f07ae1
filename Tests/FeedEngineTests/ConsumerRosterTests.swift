import Testing

@testable import FeedEngine

/// The window that picks a page of consumers by name in one pass (`status`, the `consumers` op).
@Suite struct ConsumerRosterTests {
    /// Every name offered, in a scrambled order, paged `limit` at a time.
    func pages(of names: [String], limit: Int) -> [[String]] {
        var pages: [[String]] = []
        var after: String?
        repeat {
            var window = FirstConsumers(limit: limit, after: after)
            for name in names { window.offer(name, after: 0, connected: false) }
            pages.append(window.entries.map(\.name))
            after = window.moreFollow ? window.entries.last?.name : nil
        } while after != nil && pages.count <= names.count
        return pages
    }

    @Test func paging_visits_every_name_once_in_order() {
        let names = (0..<250).map { "c\(($0 * 7_919) % 250)" }
        let pages = pages(of: names, limit: 100)
        #expect(pages.map(\.count) == [100, 100, 50])
        #expect(pages.flatMap { $0 } == names.sorted())
    }

    @Test func a_page_that_holds_the_rest_says_none_follows() {
        var window = FirstConsumers(limit: 3, after: "b")
        for name in ["d", "a", "c", "b", "e"] { window.offer(name, after: 0, connected: false) }
        #expect(window.entries.map(\.name) == ["c", "d", "e"] && !window.moreFollow)
        var summary = FirstConsumers(limit: 0, after: nil)
        summary.offer("a", after: 0, connected: false)
        #expect(summary.entries.isEmpty && summary.moreFollow, "a summary lists none, and says there are some")
    }
}
