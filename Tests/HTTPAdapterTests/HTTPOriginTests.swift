import FeedKit
import Foundation
import HTTPAdapter
import Testing
import TestSupport

/// The `http` adapter sends its bearer token only to the origin of its `url`, and fetches nothing
/// elsewhere unless told to (SPEC §9; issue 23, item 1). The other origin in these tests is
/// another port on 127.0.0.1: the loopback interface is where an attacker's target would be.
@Suite struct HTTPOriginTests {
    static let token = "0rigin-t0ken"

    /// A feed at `home` with a bearer token and a header field of its own.
    static func source(_ home: LoopbackUpstream, _ options: [String: JSONValue], poll: Duration? = nil) throws -> HTTPJSONSource {
        let directory = try TemporaryDirectory()
        var values = options
        values["bearer_token_file"] = .string(try directory.writeSecret("api.token", token))
        values["headers"] = ["X-Api-Key": "k3y"]
        return try HTTPJSONSourceTests.source(home, values, poll: poll)
    }

    static func request(_ page: Int, _ token: String?) -> PageRequest {
        PageRequest(page: page, token: token, generation: 1, seed: "test")
    }

    static func nextToken(_ result: FetchResult) throws -> String? {
        guard case .page(_, .more(let token)) = result else { throw TestFailure("expected a page with a next one, got \(result)") }
        return token
    }

    /// Fetching `request` must fail with a rejection that names `url`.
    static func expectRefused(_ source: HTTPJSONSource, _ request: PageRequest, naming url: String) async {
        guard let error = await HTTPJSONSourceTests.rejection(source, request) else { return }
        #expect(error.message.contains(url) && error.message.contains("another origin"), "\(error.message)")
        #expect(!error.message.contains(token))
    }

    @Test func a_link_header_to_another_port_is_refused_and_never_reached() async throws {
        let home = try LoopbackUpstream()
        let elsewhere = try LoopbackUpstream()
        home.setResource("/posts", .json([["id": 1]], headers: [("Link", "<\(elsewhere.baseURL)/steal>; rel=\"next\"")]))
        elsewhere.setResource("/steal", .json([["id": 2]]))
        let source = try Self.source(home, ["url": "/posts", "next": "link", "id": "id"])
        let token = try Self.nextToken(try await source.fetch(Self.request(1, nil)))
        await Self.expectRefused(source, Self.request(2, token), naming: "\(elsewhere.baseURL)/steal")
        #expect(elsewhere.received.isEmpty)
        #expect(home.received.first?.headers["authorization"] == "Bearer \(Self.token)", "the origin itself gets the token")
    }

    @Test func a_next_url_in_the_body_on_another_port_is_refused_and_never_reached() async throws {
        let home = try LoopbackUpstream()
        let elsewhere = try LoopbackUpstream()
        home.setResource("/posts", .json(["data": [["id": 1]], "links": ["next": .string("\(elsewhere.baseURL)/steal?page=2")]]))
        let source = try Self.source(home, ["url": "/posts", "items": "data", "next": "links.next", "id": "id"])
        let token = try Self.nextToken(try await source.fetch(Self.request(1, nil)))
        await Self.expectRefused(source, Self.request(2, token), naming: "\(elsewhere.baseURL)/steal?page=2")
        #expect(elsewhere.received.isEmpty)
    }

    /// A page token is text the engine stores and the fleet carries: whoever can write the state
    /// directory or the stream can put any URL in it, so it is judged like a `Link` header.
    @Test func a_token_read_back_from_the_store_or_the_fleet_pointing_elsewhere_is_refused() async throws {
        let home = try LoopbackUpstream()
        let elsewhere = try LoopbackUpstream()
        let source = try Self.source(home, ["url": "/posts", "next": "link"], poll: .seconds(60))
        let stolen = [
            ("url \(elsewhere.baseURL)/steal", "\(elsewhere.baseURL)/steal"),
            ("recheck url \(elsewhere.baseURL)/steal", "\(elsewhere.baseURL)/steal"),
            ("url http://localhost:\(home.port)/posts", "http://localhost:\(home.port)/posts"),
        ]
        for (token, url) in stolen { await Self.expectRefused(source, Self.request(7, token), naming: url) }
        let cursorFeed = try Self.source(home, ["url": "/posts?after={cursor}", "next": "next"])
        await Self.expectRefused(cursorFeed, Self.request(3, "url \(elsewhere.baseURL)/steal"), naming: "\(elsewhere.baseURL)/steal")
        #expect(elsewhere.received.isEmpty && home.received.isEmpty)
    }

    @Test func follow_other_hosts_fetches_another_origin_without_the_token_or_the_feeds_headers() async throws {
        let home = try LoopbackUpstream()
        let elsewhere = try LoopbackUpstream()
        home.setResource("/posts", .json([["id": 1]], headers: [("Link", "<\(elsewhere.baseURL)/more>; rel=\"next\"")]))
        elsewhere.setResource("/more", .json([["id": 2]]))
        let source = try Self.source(home, ["url": "/posts", "next": "link", "id": "id", "follow_other_hosts": true])
        let token = try Self.nextToken(try await source.fetch(Self.request(1, nil)))
        #expect(HTTPJSONSourceTests.ids(try await source.fetch(Self.request(2, token))) == ["2"])
        let sent = try #require(elsewhere.received.first?.headers)
        #expect(sent["authorization"] == nil && sent["x-api-key"] == nil)
        #expect(sent["accept"] == "application/json", "Accept is no secret")
        #expect(home.received.first?.headers["x-api-key"] == "k3y")
    }

    @Test func a_redirect_to_another_port_is_refused_unless_other_hosts_are_followed_and_then_goes_without_the_token() async throws {
        let home = try LoopbackUpstream()
        let elsewhere = try LoopbackUpstream()
        home.setResource("/posts?page=1", .redirect(to: "\(elsewhere.baseURL)/posts?page=1"))
        elsewhere.setResource("/posts?page=1", .json([["id": 1]]))
        let confined = try Self.source(home, ["url": "/posts?page={page}", "id": "id"])
        await #expect(throws: SourceError.self) { try await confined.fetch(Self.request(1, nil)) }
        #expect(elsewhere.received.isEmpty)

        let following = try Self.source(home, ["url": "/posts?page={page}", "id": "id", "follow_other_hosts": true])
        #expect(HTTPJSONSourceTests.ids(try await following.fetch(Self.request(1, nil))) == ["1"])
        let sent = try #require(elsewhere.received.first?.headers)
        #expect(sent["authorization"] == nil && sent["x-api-key"] == nil, "\(sent)")
        #expect(home.received.last?.headers["authorization"] == "Bearer \(Self.token)")
    }

    @Test func follow_redirects_never_still_wins_over_follow_other_hosts() async throws {
        let home = try LoopbackUpstream()
        home.setResource("/posts?page=1", .redirect(to: "/moved?page=1"))
        let source = try Self.source(home, ["url": "/posts?page={page}", "follow_other_hosts": true, "follow_redirects": "never"])
        await #expect(throws: SourceError.rejected("HTTP 302 from \(home.baseURL)/posts?page=1 to /moved?page=1, not followed (follow_redirects = \"never\")")) {
            try await source.fetch(Self.request(1, nil))
        }
    }

    @Test(arguments: [
        ("http://127.0.0.1/x", "http://127.0.0.1:80/y", true),
        ("http://API.example.com/x", "http://api.example.com/", true),
        ("http://127.0.0.1:8080/x", "http://127.0.0.1:8081/x", false),
        ("https://example.com/x", "http://example.com:443/x", false),
        ("http://localhost:8080/", "http://127.0.0.1:8080/", false),
    ])
    func origins_are_scheme_host_and_port(_ first: String, _ second: String, _ same: Bool) throws {
        let one = try #require(URLOrigin(URL(string: first)!))
        let other = try #require(URLOrigin(URL(string: second)!))
        #expect((one == other) == same, "\(one) and \(other)")
    }
}
