import FeedKit
import Foundation
import Testing
import TestSupport

/// Redirects: same host only by default, at most five, `follow_redirects` to change it (README,
/// "Redirects").
@Suite struct RedirectPolicyTests {
    static func http(_ policy: RedirectPolicy, token: String? = nil) -> HTTPSource {
        var source = HTTPSource(transport: AdapterConformance.transport, timeout: .seconds(10))
        source.redirects = policy
        source.bearerToken = token
        return source
    }

    static let page: JSONValue = ["items": [], "hasMorePages": false]

    @Test func a_redirect_on_the_same_host_is_followed_relative_or_absolute() async throws {
        let upstream = try LoopbackUpstream()
        upstream.setResource("/old", .redirect(to: "/middle", status: 301))
        upstream.setResource("/middle", .redirect(to: "\(upstream.baseURL)/new", status: 307))
        upstream.setResource("/new", .json(Self.page))
        let body = try await Self.http(.sameHost).getJSON(URL(string: "\(upstream.baseURL)/old")!)
        #expect(body.root.value == Self.page)
        #expect(upstream.received.map(\.target) == ["/old", "/middle", "/new"])
    }

    @Test func a_redirect_to_another_port_or_host_is_refused_by_default_and_never_reached() async throws {
        let upstream = try LoopbackUpstream()
        let elsewhere = try LoopbackUpstream()
        elsewhere.setResource("/internal", .json(Self.page))
        for target in ["\(elsewhere.baseURL)/internal", "http://localhost:\(upstream.port)/internal"] {
            upstream.setResource("/old", .redirect(to: target))
            await #expect(
                throws: SourceError.rejected(
                    "GET \(upstream.baseURL)/old: redirected to \(target), another host; not followed (follow_redirects = \"same_host\")")
            ) {
                try await Self.http(.sameHost).get(URL(string: "\(upstream.baseURL)/old")!)
            }
        }
        #expect(elsewhere.received.isEmpty)
    }

    /// A feed's `headers` may hold an API key as well as the bearer token: neither goes on to
    /// another origin, though `Accept` does.
    @Test func any_host_follows_it_without_the_bearer_token_or_the_feeds_header_fields() async throws {
        let upstream = try LoopbackUpstream()
        let elsewhere = try LoopbackUpstream()
        upstream.setResource("/old", .redirect(to: "\(elsewhere.baseURL)/new"))
        elsewhere.setResource("/new", .redirect(to: "\(upstream.baseURL)/back"))
        upstream.setResource("/back", .json(Self.page))
        var http = Self.http(.anyHost, token: "t0ken")
        http.headers = ["Accept": "application/json", "X-Api-Key": "k3y"]
        #expect(try await http.getJSON(URL(string: "\(upstream.baseURL)/old")!).root.value == Self.page)
        #expect(upstream.received.first?.headers["authorization"] == "Bearer t0ken" && upstream.received.first?.headers["x-api-key"] == "k3y")
        let sent = try #require(elsewhere.received.first?.headers)
        #expect(elsewhere.received.count == 1 && sent["authorization"] == nil && sent["x-api-key"] == nil, "\(sent)")
        #expect(sent["accept"] == "application/json")
        let back = try #require(upstream.received.last)
        #expect(back.target == "/back" && back.headers["authorization"] == nil, "once it has left its origin, a request never takes its secrets back")
    }

    @Test func never_reports_the_redirect() async throws {
        let upstream = try LoopbackUpstream()
        upstream.setResource("/old", .redirect(to: "/new"))
        await #expect(throws: SourceError.rejected("HTTP 302 from \(upstream.baseURL)/old to /new, not followed (follow_redirects = \"never\")")) {
            try await Self.http(.never).get(URL(string: "\(upstream.baseURL)/old")!)
        }
        #expect(upstream.received.count == 1)
    }

    @Test func more_than_five_redirects_are_refused() async throws {
        let upstream = try LoopbackUpstream()
        for hop in 0..<6 { upstream.setResource("/hop\(hop)", .redirect(to: "/hop\(hop + 1)")) }
        upstream.setResource("/hop6", .json(Self.page))
        await #expect(throws: SourceError.rejected("GET \(upstream.baseURL)/hop0: more than 5 redirects")) {
            try await Self.http(.anyHost).get(URL(string: "\(upstream.baseURL)/hop0")!)
        }
        upstream.setResource("/hop0", .redirect(to: "/hop1"))
        #expect(try await Self.http(.sameHost).getJSON(URL(string: "\(upstream.baseURL)/hop1")!).root.value == Self.page, "five are followed")
    }

    @Test func an_upgrade_to_https_on_the_same_host_counts_as_the_same_host() {
        let plain = URLOrigin(scheme: "http", host: "example.com", port: 80)
        #expect(RedirectPolicy.sameHost.allows(from: plain, to: .init(scheme: "https", host: "EXAMPLE.com", port: 443)))
        #expect(!RedirectPolicy.sameHost.allows(from: .init(scheme: "https", host: "example.com", port: 443), to: plain), "never a downgrade")
        #expect(!RedirectPolicy.sameHost.allows(from: plain, to: .init(scheme: "http", host: "example.com", port: 8080)))
    }
}
