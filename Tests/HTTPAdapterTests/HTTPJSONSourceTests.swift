import FeedKit
import Foundation
import HTTPAdapter
import Testing
import TestSupport

/// The `http` adapter against a loopback API (SPEC §9).
@Suite struct HTTPJSONSourceTests {
    static func source(_ upstream: LoopbackUpstream, _ options: [String: JSONValue], poll: Duration? = nil) throws -> HTTPJSONSource {
        var values = options
        values["url"] = .string(upstream.baseURL + (options["url"]?.stringValue ?? ""))
        return try HTTPJSONSource(options: AdapterOptions(feed: "api", values: values), context: AdapterConformance.context(poll: poll))
    }

    static func request(_ page: Int, _ token: String? = nil, generation: Int = 1) -> PageRequest {
        PageRequest(page: page, token: token, generation: generation, seed: "test")
    }

    /// `{"data": {"posts": [{"id": …, "n": …}, …]}, …extra}`.
    static func posts(_ ids: [String], _ extra: [String: JSONValue] = [:]) -> JSONValue {
        var body = extra
        body["data"] = ["posts": .array(ids.map { ["id": .string($0), "title": .string("post \($0)")] })]
        return .object(body)
    }

    /// The rejection fetching `request` ends with; records an issue, and returns nil, for any other outcome.
    static func rejection(_ source: HTTPJSONSource, _ request: PageRequest) async -> SourceError? {
        do {
            Issue.record("page \(request.page) was served: \(try await source.fetch(request))")
        } catch let error as SourceError where error.kind == .rejected {
            return error
        } catch {
            Issue.record("page \(request.page) failed, but not as a rejection (retried at the slowest rate): \(error)")
        }
        return nil
    }

    static func ids(_ result: FetchResult) -> [String] {
        guard case .page(let items, _) = result else { return [] }
        return items.map(\.id)
    }

    @Test func conforms_when_paging_by_page_number() async throws {
        let upstream = try LoopbackUpstream()
        upstream.setResource("/posts?page=1", .json(Self.posts(["a", "b"])))
        upstream.setResource("/posts?page=2", .json(Self.posts(["c"])))
        upstream.setResource("/posts?page=3", .json(Self.posts([])))
        let source = try Self.source(upstream, ["url": "/posts?page={page}", "items": "data.posts", "id": "id"])
        #expect(source.pageAddressing == .direct)
        try await AdapterConformance.check(
            source, pages: .finite(3), failing: try Self.source(upstream, ["url": "/missing?page={page}", "items": "data.posts"]))
    }

    @Test func conforms_when_paging_by_cursor() async throws {
        let upstream = try LoopbackUpstream()
        upstream.setResource("/posts?after=", .json(Self.posts(["a", "b"], ["next": "c 1/2"])))
        upstream.setResource("/posts?after=c%201%2F2", .json(Self.posts(["c"], ["next": 7])))
        upstream.setResource("/posts?after=7", .json(Self.posts(["d"], ["next": .null])))
        let source = try Self.source(upstream, ["url": "/posts?after={cursor}", "items": "data.posts", "id": "id", "next": "next"])
        #expect(source.pageAddressing == .sequential)
        try await AdapterConformance.check(source, pages: .finite(3))
        #expect(upstream.received.first?.target == "/posts?after=", "the cursor is empty on page 1")
    }

    @Test func conforms_when_following_link_headers() async throws {
        let upstream = try LoopbackUpstream()
        upstream.setResource("/issues", .json(["x", "y"], headers: [("Link", #"</issues?p=2>; rel="next last", </issues>; rel=first"#)]))
        upstream.setResource("/issues?p=2", .json(["z"], headers: [("Link", "<\(upstream.baseURL)/issues?p=3>; title=\"a, b; c\"; rel=next")]))
        upstream.setResource("/issues?p=3", .json(["w"], headers: [("Link", "</issues>; rel=\"first\"")]))
        let source = try Self.source(upstream, ["url": "/issues", "items": "", "next": "link"])
        try await AdapterConformance.check(source, pages: .finite(3))
        let first = try await source.fetch(Self.request(1))
        #expect(first == .page([Item(hashing: "x"), Item(hashing: "y")], next: .more(token: "url \(upstream.baseURL)/issues?p=2")),
            "a relative target is resolved against the request URL; the body is the array when items is empty")
    }

    @Test(arguments: [
        (["url": "/posts?page={page}"], nil, true),
        (["url": "/posts?offset={offset}"], nil, true),
        (["url": "/posts?page={page}"], Duration.seconds(5), false),
        (["url": "/posts?after={cursor}", "next": "next"], nil, false),
        (["url": "/posts", "next": "link"], nil, false),
        (["url": "/posts", "next": "links.next"], nil, false),
    ] as [([String: JSONValue], Duration?, Bool)])
    func pages_are_fetched_again_alike_only_by_page_number_and_unpolled(_ options: [String: JSONValue], _ poll: Duration?, _ reproduces: Bool) throws {
        let upstream = try LoopbackUpstream()
        #expect(try Self.source(upstream, options, poll: poll).reproducesPages == reproduces)
    }

    @Test func offset_is_the_page_number_less_one_times_page_size() async throws {
        let upstream = try LoopbackUpstream()
        upstream.setResource("/rows?offset=0&limit=2", .json(["rows": [["id": 1], ["id": 2]]]))
        upstream.setResource("/rows?offset=2&limit=2", .json(["rows": [["id": 3]]]))
        upstream.setResource("/rows?offset=4&limit=2", .json(["rows": []]))
        let source = try Self.source(upstream, ["url": "/rows?offset={offset}&limit=2", "items": "rows", "id": "id", "page_size": 2])
        #expect(Self.ids(try await source.fetch(Self.request(2))) == ["3"], "page 2 directly, by its number")
        #expect(try await source.fetch(Self.request(1)) == .page([Item(id: "1", data: ["id": 1]), Item(id: "2", data: ["id": 2])], next: .more(token: nil)))
        #expect(try await source.fetch(Self.request(3)) == .page([], next: .end), "the first empty page ends the feed")
    }

    @Test func dot_paths_take_array_indexes() async throws {
        let upstream = try LoopbackUpstream()
        let body: JSONValue = ["results": [["hits": [["meta": [["key": "k1"]]], ["meta": [["key": "k2"]]]]]], "more": false]
        upstream.setResource("/search?page=1", .json(body))
        let source = try Self.source(upstream, ["url": "/search?page={page}", "items": "results.0.hits", "id": "meta.0.key", "next": "more"])
        let result = try await source.fetch(Self.request(1))
        #expect(Self.ids(result) == ["k1", "k2"])
        guard case .page(_, .end) = result else { throw TestFailure("next = false ends the feed, got \(result)") }
    }

    @Test func a_body_that_is_not_json_or_has_no_array_at_the_path_is_rejected_with_the_url_and_the_path() async throws {
        let upstream = try LoopbackUpstream()
        upstream.setResource("/html?page=1", .text("<html>maintenance</html>", contentType: "text/html"))
        upstream.setResource("/object?page=1", .json(["data": ["posts": "none"]]))
        let html = try Self.source(upstream, ["url": "/html?page={page}", "items": "data.posts"])
        do {
            _ = try await html.fetch(Self.request(1))
            Issue.record("an HTML body was accepted")
        } catch let error as SourceError {
            #expect(error.kind == .rejected && error.message.contains("\(upstream.baseURL)/html?page=1") && error.message.contains("not valid JSON"))
        }
        let object = try Self.source(upstream, ["url": "/object?page={page}", "items": "data.posts"])
        await #expect(throws: SourceError.rejected("the body from \(upstream.baseURL)/object?page=1 has no array at items = \"data.posts\"")) {
            try await object.fetch(Self.request(1))
        }
    }

    @Test func headers_and_the_bearer_token_are_sent_and_the_token_is_never_in_an_error() async throws {
        let upstream = try LoopbackUpstream()
        let directory = try TemporaryDirectory()
        let token = "s3cr3t-Token.value_42"
        let tokenFile = try directory.writeSecret("api.token", "\(token)\n")
        let source = try Self.source(
            upstream,
            ["url": "/private?page={page}", "items": "", "headers": ["Accept": "application/vnd.api+json", "X-Client": "feedd"],
             "bearer_token_file": .string(tokenFile)])
        upstream.inject(.status(401))
        do {
            _ = try await source.fetch(Self.request(1))
            Issue.record("a 401 was accepted")
        } catch let error as SourceError {
            #expect(!error.message.contains(token))
        }
        let headers = try #require(upstream.received.first?.headers)
        #expect(headers["authorization"] == "Bearer \(token)")
        #expect(headers["accept"] == "application/vnd.api+json" && headers["x-client"] == "feedd")

        try directory.writeSecret("api.token", "two\nlines: \(token)")
        do {
            _ = try Self.source(upstream, ["url": "/p?page={page}", "bearer_token_file": .string(tokenFile)])
            Issue.record("a token file of two lines was accepted")
        } catch let error as OptionError {
            #expect(error.key == "bearer_token_file" && error.description.contains(tokenFile) && !error.description.contains(token))
        }
    }

    @Test func a_polled_empty_last_page_is_asked_again_conditionally_and_a_304_publishes_nothing() async throws {
        let upstream = try LoopbackUpstream()
        upstream.setResource("/posts?page=1", .json(Self.posts(["a"])))
        upstream.setResource("/posts?page=2", .json(Self.posts([]), entityTag: "\"v1\""))
        let source = try Self.source(upstream, ["url": "/posts?page={page}", "items": "data.posts", "id": "id"], poll: .seconds(1))
        #expect(Self.ids(try await source.fetch(Self.request(1))) == ["a"])
        #expect(try await source.fetch(Self.request(2)) == .notYet)
        #expect(try await source.fetch(Self.request(2)) == .notYet)
        #expect(upstream.received.last?.headers["if-none-match"] == "\"v1\"")
        upstream.setResource("/posts?page=2", .json(Self.posts(["b"]), entityTag: "\"v2\""))
        #expect(Self.ids(try await source.fetch(Self.request(2))) == ["b"])
        #expect(try await source.fetch(Self.request(2, generation: 2)) != .notYet, "a new generation asks without validators")
        #expect(upstream.received.last?.headers["if-none-match"] == nil)
    }

    @Test func a_polled_cursor_feed_looks_at_its_last_page_again_until_it_names_a_next_cursor() async throws {
        let upstream = try LoopbackUpstream()
        let lastModified = "Mon, 30 Nov 2026 05:00:00 GMT"
        upstream.setResource("/log?after=", .json(Self.posts(["a"], ["next": "a"])))
        upstream.setResource("/log?after=a", Resource.json(Self.posts(["b"])).lastModified(lastModified))
        let source = try Self.source(upstream, ["url": "/log?after={cursor}", "items": "data.posts", "id": "id", "next": "next"], poll: .seconds(1))
        guard case .page(_, .more(let token)) = try await source.fetch(Self.request(1)),
            case .page(let items, .more(let recheck)) = try await source.fetch(Self.request(2, token))
        else { throw TestFailure("a polled feed must not end") }
        #expect(items.map(\.id) == ["b"])
        #expect(try await source.fetch(Self.request(3, recheck)) == .notYet)
        #expect(upstream.received.last?.target == "/log?after=a" && upstream.received.last?.headers["if-modified-since"] == lastModified)
        upstream.setResource("/log?after=a", .json(Self.posts(["b"], ["next": "b"])))
        upstream.setResource("/log?after=b", .json(Self.posts(["c"])))
        #expect(Self.ids(try await source.fetch(Self.request(3, recheck))) == ["c"])
    }

    @Test(arguments: [
        (["url": "/x?page={page}&after={cursor}"], "url"),
        (["url": "/x?after={cursor}"], "next"),
        (["url": "/x?after={cursor}", "next": "link"], "next"),
        (["url": "/x?page={page}", "items": "data..posts"], "items"),
        (["url": "/x?page={page}", "headers": ["Bad Name": "x"]], "headers"),
        (["url": "/x?page={page}", "headers": ["X-Evil": "a\r\nHost: elsewhere"]], "headers"),
        (["url": "/x?page={page}", "bearer_token_file": "/nonexistent/api.token"], "bearer_token_file"),
        (["url": "/x?page={page}", "follow_redirects": "sometimes"], "follow_redirects"),
    ] as [([String: JSONValue], String)])
    func a_bad_option_is_an_error_naming_its_key(_ options: [String: JSONValue], _ key: String) throws {
        let upstream = try LoopbackUpstream()
        #expect(throws: OptionError.self) { try Self.source(upstream, options) }
        do {
            _ = try Self.source(upstream, options)
        } catch let error as OptionError {
            #expect(error.key == key, "\(error)")
        }
    }
}

typealias Resource = LoopbackUpstream.Resource

extension LoopbackUpstream.Resource {
    func lastModified(_ date: String) -> Self {
        var resource = self
        resource.lastModified = date
        return resource
    }
}
