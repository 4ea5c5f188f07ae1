import FeedKit
import Foundation
import Testing
import TestSupport

/// The `http` adapter's trust boundaries through the real daemon (SPEC §9; issue 23, items 1 and 2).
@Suite struct HTTPTrustEndToEndTests {
    /// Pages "", "c2", "c3" by cursor; page 3 names "c2" again: a cycle of two pages.
    static func serveCycle(on upstream: LoopbackUpstream) {
        upstream.setResource("/log?after=", .json(["data": [["id": 1]], "next": "c2"]))
        upstream.setResource("/log?after=c2", .json(["data": [["id": 2]], "next": "c3"]))
        upstream.setResource("/log?after=c3", .json(["data": [["id": 3]], "next": "c2"]))
    }

    static func cycleDaemon(_ upstream: LoopbackUpstream, directory: TemporaryDirectory? = nil) throws -> DaemonProcess {
        try DaemonProcess(config: """
            [feeds.log]
            source = "http"
            url = "\(upstream.baseURL)/log?after={cursor}"
            items = "data"
            id = "id"
            next = "next"
            retry_max_delay = "700ms"
            """, directory: directory)
    }

    /// Reads pages 1 and 2, then the error notice the cycle at page 3 gives.
    static func readIntoTheCycle(_ daemon: DaemonProcess) throws -> JSONValue {
        let client = try daemon.connect()
        try client.send(["op": "next", "feed": "log", "count": 3, "id": "walk"])
        try client.expect("subscribed")
        let (skipped, notice) = try client.read(until: "error")
        #expect(JSONValue.pageNumbers(skipped.filter { $0["type"] == "page" }) == [1, 2], "\(skipped.map(\.jsonText))")
        return notice
    }

    @Test func a_cursor_cycle_stops_the_feed_with_an_upstream_error_retried_at_the_slowest_rate_even_after_a_restart() throws {
        let upstream = try LoopbackUpstream()
        Self.serveCycle(on: upstream)
        let directory = try TemporaryDirectory()
        var daemon = try Self.cycleDaemon(upstream, directory: directory)
        let notice = try Self.readIntoTheCycle(daemon)
        #expect(notice["code"] == "upstream" && notice["retry_in_ms"] == 700, "\(notice.jsonText)")
        let message = notice["message"]?.stringValue ?? ""
        #expect(message.hasPrefix("page 3 (\(upstream.baseURL)/log?after=c3) names cursor \"c2\" as its next page, where page 2 was"), "\(message)")
        let status = try daemon.connect().request("status")
        let feed = status["feeds"]?.arrayValue?.first { $0["name"] == "log" }
        #expect(feed?["state"] == "failing", "\(status.jsonText)")

        daemon.send(signal: SIGTERM)
        try daemon.waitForExit()
        daemon = try Self.cycleDaemon(upstream, directory: directory)
        let again = try Self.readIntoTheCycle(daemon)
        #expect(again["message"]?.stringValue?.contains("where page 2 was") == true, "the walk is remembered across the restart: \(again.jsonText)")
    }

    @Test func a_link_header_to_another_port_is_refused_with_an_error_naming_it_and_gets_no_request() throws {
        let home = try LoopbackUpstream()
        let elsewhere = try LoopbackUpstream()
        let directory = try TemporaryDirectory()
        let tokenFile = try directory.writeSecret("api.token", "t0ken-\(UInt32.random(in: 0...UInt32.max))")
        home.setResource("/posts", .json([["id": 1]], headers: [("Link", "<\(elsewhere.baseURL)/posts?page=2>; rel=\"next\"")]))
        let daemon = try DaemonProcess(config: """
            [feeds.api]
            source = "http"
            url = "\(home.baseURL)/posts"
            items = ""
            id = "id"
            next = "link"
            bearer_token_file = "\(tokenFile)"
            retry_max_delay = "500ms"
            """, directory: directory)
        try Self.expectOriginRefused(reading: "api", of: daemon, next: "\(elsewhere.baseURL)/posts?page=2", asked: elsewhere)
    }

    /// Reads two pages of `feed` from `daemon`: page 1 comes, then an `upstream` error naming
    /// `next` as on another origin, and `other` (the upstream behind it) got no request, so no
    /// bearer token.
    static func expectOriginRefused(reading feed: String, of daemon: DaemonProcess, next: String, asked other: LoopbackUpstream) throws {
        let client = try daemon.connect()
        try client.send("next \(feed) 2")
        try client.expect("subscribed")
        #expect(try client.expect("page")["page"] == 1)
        let notice = try client.expect("error")
        #expect(notice["code"] == "upstream")
        #expect(notice["message"]?.stringValue?.contains("\(next), on another origin") == true, "\(notice.jsonText)")
        #expect(other.received.isEmpty)
    }

    @Test func a_world_readable_token_file_is_a_config_error_at_its_key() throws {
        let directory = try TemporaryDirectory()
        let tokenFile = try directory.write("api.token", "t0ken")
        chmod(tokenFile, 0o644)
        let config = try directory.write("feedd.toml", """
            [feeds.api]
            source = "http"
            url = "http://127.0.0.1:9/posts?page={page}"
            bearer_token_file = "\(tokenFile)"
            """)
        let result = try ChildProcess.run(FeeddBinaries.feedd, ["check-config", "--config", config])
        let output = result.output + result.errors
        #expect(result.status == 2)
        #expect(output.hasPrefix("\(config):4:1: feeds.api.bearer_token_file: \(tokenFile) can be read by every user (mode 0644)"), "\(output)")
        #expect(!output.contains("t0ken"))
    }
}
