import FeedKit
import Foundation
import Testing
import TestSupport

/// The `http` and `rss` adapters through the real daemon, against a loopback upstream (SPEC §9).
@Suite struct AggregatorAdapterTests {
    static func ids(_ page: JSONValue) -> [String] {
        page["items"]?.arrayValue?.compactMap { $0["id"]?.stringValue } ?? []
    }

    @Test func an_http_feed_follows_link_headers_to_its_end() throws {
        let upstream = try LoopbackUpstream()
        upstream.setResource("/v1/posts", .json(["data": [["id": 1], ["id": 2]]], headers: [("Link", #"</v1/posts?after=2>; rel="next""#)]))
        upstream.setResource("/v1/posts?after=2", .json(["data": [["id": 3]]], headers: [("Link", #"</v1/posts>; rel="first", <?after=3>; rel=next"#)]))
        upstream.setResource("/v1/posts?after=3", .json(["data": [["id": 4]]], headers: [("Link", #"</v1/posts>; rel="first""#)]))
        let daemon = try DaemonProcess(config: """
            [feeds.api]
            source = "http"
            url = "\(upstream.baseURL)/v1/posts"
            items = "data"
            id = "id"
            next = "link"
            """)
        let client = try daemon.connect()
        try client.send("next api 4")
        try client.expect("subscribed")
        let pages = try (1...3).map { _ in try client.expect("page") }
        #expect(pages.map(Self.ids) == [["1", "2"], ["3"], ["4"]])
        #expect(pages.map { $0["last"] } == [false, false, true])
        #expect(try client.expect("end")["page"] == 3)
        #expect(pages[0]["items"]?.arrayValue?.first?["data"] == ["id": 1])
    }

    @Test func the_bearer_token_is_sent_and_never_appears_in_the_log_status_or_an_error() throws {
        let upstream = try LoopbackUpstream()
        let directory = try TemporaryDirectory()
        let token = "tok-5ecret-\(UInt32.random(in: 0...UInt32.max))"
        let tokenFile = try directory.writeSecret("api.token", token + "\n")
        upstream.setResource("/private?page=1", .json([["id": "a"]]))
        upstream.setResource("/private?page=2", .json([]))
        upstream.inject(.status(401), times: 2)
        let daemon = try DaemonProcess(config: """
            [daemon]
            log_level = "debug"

            [feeds.private]
            source = "http"
            url = "\(upstream.baseURL)/private?page={page}"
            items = ""
            id = "id"
            bearer_token_file = "\(tokenFile)"
            headers = { Accept = "application/json", "X-Client" = "feedd-test" }
            retry_max_delay = "200ms"
            prefetch = 0
            """, directory: directory)
        let client = try daemon.connect()
        try client.send("next private")
        try client.expect("subscribed")
        let notice = try client.expect("error")
        let status = try daemon.connect().request("status")
        let (_, page) = try client.read(until: "page")
        #expect(Self.ids(page) == ["a"])
        let sent = try #require(upstream.received.last?.headers)
        #expect(sent["authorization"] == "Bearer \(token)" && sent["x-client"] == "feedd-test")
        #expect(notice["message"]?.stringValue?.contains("HTTP 401 from \(upstream.baseURL)/private?page=1") == true)
        // A rotated token is read on reload, and used although the feed's options did not change.
        let rotated = "rot-\(token)"
        try directory.writeSecret("api.token", rotated)
        daemon.send(signal: SIGHUP)
        _ = try daemon.log.waitForLine(containing: "configuration reloaded")
        try client.send("next private")
        _ = try client.read(until: "page")
        #expect(upstream.received.last?.target == "/private?page=2")
        #expect(upstream.received.last?.headers["authorization"] == "Bearer \(rotated)")
        for text in [notice.jsonText, status.jsonText, daemon.log.text] {
            #expect(!text.contains(token), "the token leaked: \(text)")
        }
    }

    static func rssDaemon(_ upstream: LoopbackUpstream, directory: TemporaryDirectory? = nil) throws -> DaemonProcess {
        try DaemonProcess(config: """
            [feeds.news]
            source = "rss"
            url = "\(upstream.baseURL)/feed.xml"
            page_size = 2
            poll = "100ms"
            """, directory: directory)
    }

    static func serve(_ upstream: LoopbackUpstream, _ entries: [(String, String)], entityTag: String) {
        let items = entries.map { "<item><guid>\($0.0)</guid><title>\($0.0)</title><pubDate>\($0.1)</pubDate></item>" }.joined()
        let document = #"<?xml version="1.0"?><rss version="2.0"><channel><title>News</title>"# + items + "</channel></rss>"
        upstream.setResource("/feed.xml", .text(document, contentType: "application/rss+xml", entityTag: entityTag))
    }

    @Test func without_poll_an_rss_feed_reads_its_document_once_and_its_last_page_says_last() throws {
        let upstream = try LoopbackUpstream()
        Self.serve(upstream, [("a", "Sun, 01 Nov 2026 10:00:00 GMT"), ("b", "Mon, 02 Nov 2026 10:00:00 GMT"),
            ("c", "Tue, 03 Nov 2026 10:00:00 GMT")], entityTag: "\"1\"")
        let daemon = try DaemonProcess(config: """
            [feeds.news]
            source = "rss"
            url = "\(upstream.baseURL)/feed.xml"
            page_size = 2
            """)
        let client = try daemon.connect()
        try client.send("next news 3")
        try client.expect("subscribed")
        let pages = try [client.expect("page"), client.expect("page")]
        #expect(pages.map(Self.ids) == [["c", "b"], ["a"]] && pages.map { $0["last"] } == [false, true])
        #expect(try client.expect("end")["page"] == 2)
        #expect(upstream.received.count == 1)
    }

    @Test func a_polled_rss_feed_publishes_only_new_entries_newest_first_to_a_follower() throws {
        let upstream = try LoopbackUpstream()
        Self.serve(upstream, [("a", "Sun, 01 Nov 2026 10:00:00 GMT"), ("b", "Mon, 02 Nov 2026 10:00:00 GMT")], entityTag: "\"1\"")
        let daemon = try Self.rssDaemon(upstream)
        let client = try daemon.connect()
        try client.send("follow news")
        try client.expect("subscribed")
        let first = try client.expect("page")
        #expect(Self.ids(first) == ["b", "a"] && first["last"] == false)
        #expect(first["items"]?.arrayValue?.first?["data"]?["published"] == "2026-11-02T10:00:00Z")
        let requestsBefore = upstream.received.count
        try upstream.waitForRequests(requestsBefore + 2)
        #expect(upstream.received.dropFirst().allSatisfy { $0.headers["if-none-match"] == "\"1\"" }, "every re-check is conditional")
        Self.serve(upstream, [("c", "Tue, 03 Nov 2026 10:00:00 GMT"), ("a", "Sun, 01 Nov 2026 10:00:00 GMT"),
            ("b", "Mon, 02 Nov 2026 11:00:00 GMT"), ("d", "Wed, 04 Nov 2026 10:00:00 GMT")], entityTag: "\"2\"")
        let second = try client.expect("page", timeout: .seconds(5))
        #expect(Self.ids(second) == ["d", "c"] && second["page"] == 2)
    }

    @Test func what_an_rss_feed_published_is_not_published_again_after_a_restart() throws {
        let upstream = try LoopbackUpstream()
        let directory = try TemporaryDirectory()
        Self.serve(upstream, [("a", "Sun, 01 Nov 2026 10:00:00 GMT"), ("b", "Mon, 02 Nov 2026 10:00:00 GMT")], entityTag: "\"1\"")
        do {
            let daemon = try Self.rssDaemon(upstream, directory: directory)
            let client = try daemon.connect()
            try client.send("next news")
            #expect(Self.ids(try client.read(until: "page").found) == ["b", "a"])
            daemon.send(signal: SIGTERM)
            #expect(try daemon.waitForExit() == 0)
        }
        Self.serve(upstream, [("c", "Tue, 03 Nov 2026 10:00:00 GMT"), ("b", "Mon, 02 Nov 2026 10:00:00 GMT"),
            ("a", "Sun, 01 Nov 2026 10:00:00 GMT")], entityTag: "\"2\"")
        let daemon = try Self.rssDaemon(upstream, directory: directory)
        let client = try daemon.connect()
        var published: [String] = []
        while !published.contains("c") {
            try client.send("next news")
            published += Self.ids(try client.read(until: "page").found)
        }
        #expect(published.last == "c")
        #expect(published.filter { $0 != "c" }.count <= 2, "a page from before the restart may come again, a new one holds only c: \(published)")
        #expect(FileManager.default.fileExists(atPath: directory.path + "/state/adapters/news/published-entries"))
    }

    @Test func check_config_reports_http_and_rss_options_at_their_line_without_the_token() throws {
        let directory = try TemporaryDirectory()
        let token = "never-print-\(UInt32.random(in: 0...UInt32.max))"
        let tokenFile = try directory.writeSecret("api.token", "\(token)\nsecond line")
        let config = try directory.write("feedd.toml", """
            [feeds.api]
            source = "http"
            url = "https://api.example.com/v1/posts?after={cursor}"
            items = "data.posts"
            next = "data.next"
            bearer_token_file = "\(tokenFile)"

            [feeds.news]
            source = "rss"
            url = "ftp://example.com/feed.xml"
            follow_redirects = "anywhere"
            """)
        let result = try ChildProcess.run(FeeddBinaries.feedd, ["check-config", "--config", config])
        #expect(result.status == 2)
        let lines = result.output.split(separator: "\n").map(String.init)
        #expect(lines.contains { $0.hasPrefix("\(config):6:") && $0.contains("feeds.api.bearer_token_file: \(tokenFile) must hold the token alone") })
        #expect(lines.contains { $0.hasPrefix("\(config):10:") && $0.contains("feeds.news.url: \"ftp://example.com/feed.xml\" is not an http(s) URL") })
        #expect(!(result.output + result.errors).contains(token))
    }
}
