import FeedKit
import S3FeedAdapter
import Testing
import TestSupport

@Suite struct S3FeedSourceTests {
    func adapter(_ upstream: LoopbackUpstream, template: String = "/feed-{page}.json", poll: Duration? = nil) throws -> S3FeedSource {
        try S3FeedSource(
            options: AdapterOptions(feed: "donny", values: ["url": .string(upstream.baseURL + template)]),
            context: AdapterConformance.context(poll: poll))
    }

    @Test func conforms() async throws {
        let upstream = try LoopbackUpstream()
        upstream.setFeedPages([["a", "b"], ["c"], ["d", "e"]])
        try await AdapterConformance.check(try adapter(upstream), pages: .finite(3), failing: try adapter(upstream, template: "/none-{page}.json"))
    }

    @Test func a_polled_feed_looks_past_its_last_page_only_later() async throws {
        let upstream = try LoopbackUpstream()
        upstream.setFeedPages([["a"]])
        let source = try adapter(upstream, poll: .seconds(1))
        guard case .page(_, .later(let token)) = try await source.fetch(PageRequest(page: 1, token: nil, generation: 1, seed: "test")) else {
            Issue.record("a polled feed must not end, nor ask for the next page at once")
            return
        }
        #expect(try await source.fetch(PageRequest(page: 2, token: token, generation: 1, seed: "test")) == .notYet)
        upstream.setFeedPages([["a"], ["b"]])
        guard case .page(let items, _) = try await source.fetch(PageRequest(page: 2, token: token, generation: 1, seed: "test")) else {
            Issue.record("page 2 did not come")
            return
        }
        #expect(items.map(\.id) == ["p2-1"])
    }

    @Test func items_keep_the_upstream_bytes_numbers_of_any_size_included() async throws {
        let upstream = try LoopbackUpstream()
        let items = [#"{"id":123456789012345678901234567890,"label":"big"}"#, #"{"id": "b", "v": [1e400, -0.0, 2.50]}"#]
        upstream.setResource("/feed-1.json", .text(#"{"items":[\#(items.joined(separator: ","))],"hasMorePages":false}"#, contentType: "application/json"))
        guard case .page(let page, .end) = try await adapter(upstream).fetch(PageRequest(page: 1, token: nil, generation: 1, seed: "test")) else {
            Issue.record("no last page"); return
        }
        #expect(page.map(\.id) == ["123456789012345678901234567890", "b"], "an integer id of any size, as written")
        #expect(page.map(\.dataText) == items)
    }

    @Test func the_url_must_have_a_page_placeholder() {
        #expect(throws: OptionError.self) {
            try S3FeedSource(options: AdapterOptions(feed: "d", values: ["url": "http://x/feed.json"]), context: AdapterConformance.context())
        }
    }
}
