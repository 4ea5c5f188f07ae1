import FeedKit
import Foundation
import HTTPAdapter
import Testing
import TestSupport

/// A cursor or next URL seen before in the generation stops the feed with an error naming the
/// page that repeated it; a page fetched again is no cycle (SPEC §9; issue 23, item 2).
@Suite struct HTTPCursorCycleTests {
    static let options: [String: JSONValue] = ["url": "/log?after={cursor}", "items": "data.posts", "id": "id", "next": "next"]

    /// Pages 1 … `length` + 1 by cursor ("" for page 1, then "c2", "c3" …), the last of which
    /// names "c2", page 2's cursor, as its next: a cycle of `length` pages.
    static func serveCycle(length: Int, on upstream: LoopbackUpstream) {
        let last = length + 1
        for page in 1...last {
            let next = page == last ? "c2" : "c\(page + 1)"
            upstream.setResource("/log?after=\(page == 1 ? "" : "c\(page)")", .json(HTTPJSONSourceTests.posts(["\(page)"], ["next": .string(next)])))
        }
    }

    static func source(_ upstream: LoopbackUpstream, feed: String = "api", stateDirectory: String? = nil) throws -> HTTPJSONSource {
        var values = options
        values["url"] = .string(upstream.baseURL + options["url"]!.stringValue!)
        return try HTTPJSONSource(
            options: AdapterOptions(feed: feed, values: values), context: AdapterConformance.context(feed: feed, stateDirectory: stateDirectory))
    }

    static func request(_ page: Int, _ token: String?, generation: Int = 1, seed: String = "test") -> PageRequest {
        PageRequest(page: page, token: token, generation: generation, seed: seed)
    }

    /// Fetches pages 1 … `count` in order and returns each one's request.
    static func walk(_ source: HTTPJSONSource, pages count: Int, generation: Int = 1, seed: String = "test") async throws -> [PageRequest] {
        var requests = [request(1, nil, generation: generation, seed: seed)]
        while requests.count <= count {
            let current = requests.last!
            guard case .page(_, .more(let token)) = try await source.fetch(current) else {
                throw TestFailure("page \(current.page) ended the feed")
            }
            requests.append(request(current.page + 1, token, generation: generation, seed: seed))
        }
        return requests
    }

    /// Fetching `request` must fail with a rejection naming its page and page `page`, which it leads back to.
    static func expectCycle(_ source: HTTPJSONSource, _ request: PageRequest, back page: Int) async {
        guard let error = await HTTPJSONSourceTests.rejection(source, request) else { return }
        #expect(error.message.hasPrefix("page \(request.page) ("), "\(error.message)")
        #expect(error.message.contains("where page \(page) was") && error.message.contains("cycle"), "\(error.message)")
    }

    @Test(arguments: [1, 2, 3])
    func a_cursor_cycle_stops_the_feed_at_the_page_that_closes_it(_ length: Int) async throws {
        let upstream = try LoopbackUpstream()
        Self.serveCycle(length: length, on: upstream)
        let source = try Self.source(upstream)
        let requests = try await Self.walk(source, pages: length)
        let closing = requests.last!
        await Self.expectCycle(source, closing, back: 2)
        await Self.expectCycle(source, closing, back: 2)
        #expect(upstream.received.count == length + 2, "one request per try, no walk round the cycle")
    }

    @Test func a_link_that_leads_back_to_the_first_page_stops_the_feed() async throws {
        let upstream = try LoopbackUpstream()
        upstream.setResource("/a", .json([["id": "a"]], headers: [("Link", "</b>; rel=next")]))
        upstream.setResource("/b", .json([["id": "b"]], headers: [("Link", "<\(upstream.baseURL)/a>; rel=next")]))
        let source = try HTTPJSONSourceTests.source(upstream, ["url": "/a", "next": "link", "id": "id"])
        guard case .page(_, .more(let token)) = try await source.fetch(Self.request(1, nil)) else { throw TestFailure("page 1 ended the feed") }
        await Self.expectCycle(source, Self.request(2, token), back: 1)
    }

    /// A page asked for again (its cache entry dropped, the daemon restarted) names the same next
    /// page as before: the same cursor for the same page is no cycle.
    @Test func the_same_pages_fetched_again_in_any_order_are_no_cycle() async throws {
        let upstream = try LoopbackUpstream()
        for page in 1...4 {
            let next: JSONValue = page == 4 ? .null : .string("c\(page + 1)")
            upstream.setResource("/log?after=\(page == 1 ? "" : "c\(page)")", .json(HTTPJSONSourceTests.posts(["\(page)"], ["next": next])))
        }
        let source = try Self.source(upstream)
        let requests = try await Self.walk(source, pages: 3)
        for request in requests.reversed() + requests {
            let result = try await source.fetch(request)
            #expect(HTTPJSONSourceTests.ids(result) == ["\(request.page)"])
        }
    }

    /// The engine replaces an adapter whose call hung, and the new one carries on the walk.
    @Test func a_cycle_is_found_by_an_adapter_that_replaced_the_one_that_walked_into_it() async throws {
        let upstream = try LoopbackUpstream()
        Self.serveCycle(length: 2, on: upstream)
        let hung = try Self.source(upstream)
        let requests = try await Self.walk(hung, pages: 2)
        let replacement = try Self.source(upstream)
        await Self.expectCycle(replacement, requests.last!, back: 2)
        _ = hung
    }

    @Test func a_cycle_is_found_after_a_restart_from_the_feeds_state_directory() async throws {
        let upstream = try LoopbackUpstream()
        let directory = try TemporaryDirectory()
        Self.serveCycle(length: 3, on: upstream)
        let requests = try await Self.walk(try Self.source(upstream, stateDirectory: directory.path), pages: 3)
        #expect(FileManager.default.fileExists(atPath: directory.path("next-pages")))
        // No adapter of the feed is left: the history comes back from the file alone.
        await Self.expectCycle(try Self.source(upstream, stateDirectory: directory.path), requests.last!, back: 2)
        // Also when the token of a page beyond the cycle comes from the store or the fleet.
        await Self.expectCycle(try Self.source(upstream, stateDirectory: directory.path), Self.request(9, "cursor c3"), back: 3)
    }

    /// A refresh starts a new generation (a new number), and a feed removed and defined again
    /// starts generation 1 with a new seed: neither takes the old walk for its own.
    @Test(arguments: [(2, "test"), (1, "another seed")])
    func a_cursor_seen_in_another_generation_is_no_cycle(_ generation: Int, _ seed: String) async throws {
        let upstream = try LoopbackUpstream()
        let directory = try TemporaryDirectory()
        Self.serveCycle(length: 3, on: upstream)
        _ = try await Self.walk(try Self.source(upstream, stateDirectory: directory.path), pages: 2)
        // The data moved on: page 1 now leads to what was page 3.
        upstream.setResource("/log?after=", .json(HTTPJSONSourceTests.posts(["1"], ["next": "c3"])))
        let source = try Self.source(upstream, stateDirectory: directory.path)
        let fresh = try await Self.walk(source, pages: 2, generation: generation, seed: seed)
        #expect(fresh.map(\.token) == [nil, "cursor c3", "cursor c4"])
    }
}
