import FeedKit
import Foundation
import Testing
import TestSupport

/// The randomuser and S3 adapters against a loopback upstream, through the real daemon (SPEC §4).
@Suite struct NetworkAdapterTests {
    static func daemon(_ upstream: LoopbackUpstream, feeds: String) throws -> DaemonProcess {
        try DaemonProcess(config: feeds.replacingOccurrences(of: "UPSTREAM", with: upstream.baseURL))
    }

    static func users(_ upstream: LoopbackUpstream, _ extra: String = "") throws -> DaemonProcess {
        try daemon(upstream, feeds: """
            [feeds.users]
            source = "randomuser"
            url = "UPSTREAM/api/"
            results = 3
            retry_max_delay = "300ms"
            timeout = "1s"
            \(extra)
            """)
    }

    @Test func randomuser_pages_arrive_in_order_with_the_upstream_ids_and_data() throws {
        let upstream = try LoopbackUpstream()
        let daemon = try Self.users(upstream, "seed = \"fixed\"\nprefetch = 0")
        let client = try daemon.connect()
        try client.send("next users 3")
        try client.expect("subscribed")
        let pages = try (1...3).map { _ in try client.expect("page") }
        #expect(JSONValue.pageNumbers(pages) == [1, 2, 3])
        #expect(pages.allSatisfy { $0["last"] == false })
        let ids = pages.map { $0["items"]?.arrayValue?.compactMap { $0["id"]?.stringValue } ?? [] }
        #expect(ids == [["fixed-1-0", "fixed-1-1", "fixed-1-2"], ["fixed-2-0", "fixed-2-1", "fixed-2-2"], ["fixed-3-0", "fixed-3-1", "fixed-3-2"]])
        let user = try #require(pages[1]["items"]?.arrayValue?[1]["data"])
        #expect(user["name"] == ["title": "Mx", "first": "Zoë 1", "last": "O\"Brien\\2"])
        #expect(user["location"]?["city"] == "Zürich")
        #expect(user["dob"] == ["age": 21])
        #expect(upstream.received.map { $0.query } == (1...3).map { ["results": "3", "page": String($0), "seed": "fixed"] })
    }

    @Test func without_a_seed_the_generations_seed_pages_every_page_and_refresh_gets_a_new_one() throws {
        let upstream = try LoopbackUpstream()
        let daemon = try Self.users(upstream, "prefetch = 0")
        let asker = try daemon.connect()
        let other = try daemon.connect()
        try asker.send("next users 2")
        try asker.expect("subscribed")
        let pages = try [asker.expect("page"), asker.expect("page")]
        let seed = try #require(upstream.received[0].query["seed"])
        #expect(upstream.received[1].query["seed"] == seed)
        #expect(pages[1]["items"]?.arrayValue?.first?["id"] == .string("\(seed)-2-0"))
        try other.send("next users")
        _ = try other.read(until: "page")
        let refreshed = try asker.request("refresh users")
        #expect(refreshed["type"] == "refreshed" && refreshed["generation"] == 2)
        #expect(try other.expect("refreshed")["generation"] == 2)
        for client in [asker, other] {
            try client.send("next users")
            let page = try client.expect("page")
            #expect(page["page"] == 1 && page["generation"] == 2)
            let newSeed = try #require(upstream.received.last?.query["seed"])
            #expect(newSeed != seed)
            #expect(page["items"]?.arrayValue?.first?["id"] == .string("\(newSeed)-1-0"))
        }
    }

    @Test func prefetch_hides_upstream_latency_without_fetching_past_the_cursor() throws {
        let upstream = try LoopbackUpstream()
        upstream.setLatency(.milliseconds(300))
        let daemon = try Self.users(upstream, "seed = \"s\"\nprefetch = 3")
        let client = try daemon.connect()
        try client.send("next users")
        _ = try client.read(until: "page")
        try upstream.waitForAnswers(4)
        let started = ContinuousClock.now
        try client.send("next users 3")
        let pages = try (1...3).map { _ in try client.expect("page") }
        let elapsed = ContinuousClock.now - started
        #expect(JSONValue.pageNumbers(pages) == [2, 3, 4])
        #expect(elapsed < .milliseconds(200), "prefetched pages took \(elapsed) against a 300 ms upstream")
        try upstream.waitForAnswers(7)
        #expect(upstream.received.count <= 4 + 3 + 1, "cursor + prefetch + 1")
    }

    @Test func twenty_clients_at_the_same_page_cause_one_upstream_request() throws {
        let upstream = try LoopbackUpstream()
        upstream.setLatency(.milliseconds(200))
        let daemon = try Self.users(upstream, "seed = \"s\"\nprefetch = 0")
        let clients = try (0..<20).map { _ in try daemon.connect() }
        for client in clients { try client.send("next users") }
        for client in clients {
            let (_, page) = try client.read(until: "page")
            #expect(page["page"] == 1 && page["items"]?.arrayValue?.first?["id"] == "s-1-0")
        }
        #expect(upstream.received.count == 1)
    }

    static let faults: [(name: String, fault: LoopbackUpstream.Fault)] = [
        ("HTTP 500", .status(500)),
        ("HTTP 503 with Retry-After", .status(503, retryAfter: "1")),
        ("HTTP 429 with Retry-After", .status(429, retryAfter: "1")),
        ("HTTP 404", .status(404)),
        ("an error body", .errorBody),
        ("truncated JSON", .truncatedJSON),
        ("a connection closed without a response", .closeWithoutResponse),
        ("a hang past the timeout", .hang),
        ("latency", .latency(.milliseconds(400))),
    ]

    @Test(arguments: faults.indices)
    func every_upstream_fault_is_retried_without_gaps_or_repeats(_ index: Int) throws {
        let (name, fault) = Self.faults[index]
        let upstream = try LoopbackUpstream()
        let daemon = try Self.users(upstream, "seed = \"s\"\nprefetch = 0")
        upstream.inject(fault, times: 2)
        let client = try daemon.connect()
        try client.send(["op": "next", "feed": "users", "id": 1])
        try client.expect("subscribed")
        let (notices, page) = try client.read(until: "page")
        #expect(page["page"] == 1 && page["id"] == 1, "\(name)")
        #expect(page["items"]?.arrayValue?.map { $0["id"] } == ["s-1-0", "s-1-1", "s-1-2"], "\(name)")
        if case .latency = fault {
            #expect(notices.isEmpty, "latency is no error")
        } else {
            #expect(notices.count == 2, "\(name): one notice per failed try, got \(notices.map(\.jsonText))")
            for notice in notices {
                #expect(notice["type"] == "error" && notice["code"] == "upstream" && notice["feed"] == "users" && notice["id"] == 1)
                #expect(notice["retry_in_ms"]?.integerValue != nil)
            }
            if case .status(_, let retryAfter?) = fault {
                #expect(notices.allSatisfy { ($0["retry_in_ms"]?.integerValue ?? 0) >= Int64(retryAfter)! * 1000 }, "Retry-After honoured past retry_max_delay")
            }
        }
        try client.send("next users 2")
        #expect(JSONValue.pageNumbers([try client.expect("page"), try client.expect("page")]) == [2, 3])
        let pages = upstream.received.compactMap { $0.query["page"] }
        #expect(Set(pages) == ["1", "2", "3"])
    }

    /// libcurl takes `http_proxy` from feedd's environment, as the README says: the feed's own
    /// upstream is gone, and the page still comes, through the proxy.
    @Test func the_upstream_is_reached_through_http_proxy_from_the_environment() throws {
        let proxy = try LoopbackUpstream()
        let gone = try LoopbackUpstream()
        gone.stop()
        let daemon = try DaemonProcess(config: """
            [feeds.users]
            source = "randomuser"
            url = "\(gone.baseURL)/api/"
            results = 2
            seed = "p"
            """, environment: ["http_proxy": proxy.baseURL])
        let client = try daemon.connect()
        try client.send("next users")
        let (_, page) = try client.read(until: "page")
        #expect(page["items"]?.arrayValue?.map { $0["id"] } == ["p-1-0", "p-1-1"])
        #expect(proxy.received.first?.path == "/api/")
    }

    @Test func a_failing_feed_shows_its_state_and_last_error_in_status() throws {
        let upstream = try LoopbackUpstream()
        let daemon = try Self.users(upstream, "seed = \"s\"\nprefetch = 0")
        upstream.inject(.status(404), times: 2)
        upstream.inject(.status(502), times: 2)
        let client = try daemon.connect()
        try client.send("next users")
        try client.expect("subscribed")
        let watcher = try daemon.connect()
        try client.expect("error")
        let failing = try #require(watcher.request("status")["feeds"]?.arrayValue?.first)
        #expect(failing["state"] == "failing")
        #expect(failing["last_error"]?.stringValue?.contains("HTTP 404 from \(upstream.baseURL)/api/") == true)
        try client.expect("error")
        try client.expect("error")
        let retrying = try #require(watcher.request("status")["feeds"]?.arrayValue?.first)
        #expect(retrying["state"] == "retrying")
        #expect(retrying["last_error"]?.stringValue?.contains("HTTP 502") == true)
        _ = try client.read(until: "page")
        let recovered = try #require(watcher.request("status")["feeds"]?.arrayValue?.first)
        #expect(recovered["state"] == "ok" && recovered["last_error"] == .null)
    }

    static func s3(_ upstream: LoopbackUpstream, _ extra: String = "") throws -> DaemonProcess {
        try daemon(upstream, feeds: """
            [feeds.donny]
            source = "s3"
            url = "UPSTREAM/feed-{page}.json"
            retry_max_delay = "300ms"
            \(extra)
            """)
    }

    @Test func the_s3_feed_ends_with_last_then_end() throws {
        let upstream = try LoopbackUpstream()
        upstream.setFeedPages([["a", "b"], ["c"], ["d"]])
        let daemon = try Self.s3(upstream)
        let client = try daemon.connect()
        try client.send("next donny 5")
        try client.expect("subscribed")
        let pages = try (1...3).map { _ in try client.expect("page") }
        #expect(pages.map { $0["last"] } == [false, false, true])
        #expect(pages[0]["items"] == [["id": "p1-1", "data": ["id": "p1-1", "label": "a"]], ["id": "p1-2", "data": ["id": "p1-2", "label": "b"]]])
        #expect(try client.expect("end")["page"] == 3)
        let status = try client.request("status")
        #expect(status["feeds"]?.arrayValue?.first?["reached_end"] == true)
    }

    @Test func with_poll_a_follower_receives_a_page_added_later() throws {
        let upstream = try LoopbackUpstream()
        upstream.setFeedPages([["a"], ["b"]])
        let daemon = try Self.s3(upstream, "poll = \"200ms\"")
        let client = try daemon.connect()
        try client.send("follow donny")
        try client.expect("subscribed")
        let first = try [client.expect("page"), client.expect("page")]
        #expect(first.map { $0["last"] } == [false, false], "a polled feed never says last")
        upstream.setFeedPages([["a"], ["b"], ["c"]])
        let added = try client.expect("page", timeout: .seconds(5))
        #expect(added["page"] == 3 && added["items"]?.arrayValue?.first?["data"]?["label"] == "c")
    }

    @Test func wrap_cycles_a_finite_feed_forever() throws {
        let upstream = try LoopbackUpstream()
        upstream.setFeedPages([["a"], ["b"]])
        let daemon = try Self.s3(upstream, "wrap = true")
        let client = try daemon.connect()
        try client.send("next donny 5")
        try client.expect("subscribed")
        let pages = try (1...5).map { _ in try client.expect("page") }
        #expect(JSONValue.pageNumbers(pages) == [1, 2, 3, 4, 5])
        #expect(pages.map { $0["items"]?.arrayValue?.first?["data"]?["label"] } == ["a", "b", "a", "b", "a"])
        #expect(pages.allSatisfy { $0["last"] == false })
    }
}
