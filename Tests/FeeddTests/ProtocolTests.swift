import FeedKit
import Foundation
import Testing
import TestSupport

/// SPEC §5 request by request, against the real daemon over its socket, on a file feed.
@Suite struct ProtocolTests {
    /// A file feed of `lines` numbered JSON lines, `pageSize` to a page.
    static func numbersFeed(lines: Int = 25, pageSize: Int = 10, extraDaemon: String = "", extraFeed: String = "") throws -> DaemonProcess {
        let directory = try TemporaryDirectory()
        let data = (1...lines).map { #"{"n":\#($0)}"# }.joined(separator: "\n") + "\n"
        let path = try directory.write("numbers.ndjson", data)
        return try DaemonProcess(config: """
            [daemon]
            prefetch = 1
            \(extraDaemon)

            [feeds.numbers]
            source = "file"
            path = "\(path)"
            page_size = \(pageSize)
            \(extraFeed)
            """, directory: directory)
    }

    @Test func hello_names_the_daemon_and_lists_the_feeds() throws {
        let daemon = try Self.numbersFeed()
        let client = try TestClient(path: daemon.socketPath)
        let hello = try client.expect("hello")
        #expect(hello["name"] == "feedd")
        #expect(hello["protocol"] == 1)
        #expect(hello["version"]?.stringValue == feeddVersion)
        #expect(hello["feeds"] == ["numbers"])
    }

    @Test func next_subscribes_anonymously_then_sends_count_pages_in_order() throws {
        let daemon = try Self.numbersFeed()
        let client = try daemon.connect()
        try client.send(["op": "next", "feed": "numbers", "count": 2])
        let subscribed = try client.expect("subscribed")
        #expect(subscribed["feed"] == "numbers")
        #expect(subscribed["consumer"] == .null)
        #expect(subscribed["generation"] == 1)
        #expect(subscribed["after"] == 0)
        #expect(subscribed["follow"] == false)
        let first = try client.expect("page")
        let second = try client.expect("page")
        #expect(first["page"] == 1 && second["page"] == 2)
        #expect(first["generation"] == 1)
        #expect(first["last"] == false)
        let items = try #require(first["items"]?.arrayValue)
        #expect(items.count == 10)
        #expect(items[0] == ["id": "1", "data": ["n": 1]])
        #expect(second["items"]?.arrayValue?.first?["id"] == "11")
        try client.send("next numbers")
        #expect(try client.expect("page")["page"] == 3)
    }

    /// A connection keeps the last `next` line it decoded (a consumer sends the same one every
    /// round): the same line again is answered as a fresh one would be, with its own id, and a
    /// line that differs in any byte is decoded anew.
    @Test func the_same_next_line_again_is_answered_like_the_first() throws {
        let daemon = try Self.numbersFeed(lines: 25, pageSize: 5)
        let client = try daemon.connect()
        let line = #"{"op":"next","feed":"numbers","id":7}"#
        try client.send(line)
        #expect(try client.expect("subscribed")["id"] == 7)
        for page in 1...2 {
            if page > 1 { try client.send(line) }
            let answer = try client.expect("page")
            #expect(answer["page"] == .integer(Int64(page)) && answer["id"] == 7)
        }
        try client.send(#"{"op":"next","feed":"numbers","id":8}"#)
        let other = try client.expect("page")
        #expect(other["page"] == 3 && other["id"] == 8)
        try client.send(#"{"op":"next","feed":"number5","id":7}"#)
        let refused = try client.expect("error")
        #expect(refused["code"] == "unknown_feed" && refused["id"] == 7)
        try client.send(line)
        #expect(try client.expect("page")["page"] == 4)
    }

    /// One write of more requests than a connection reads in a turn (four 16 KB reads): the rest
    /// is read on later turns, though nothing new arrives to make epoll report the socket again.
    @Test func a_burst_longer_than_a_turns_share_is_answered_in_full() throws {
        let daemon = try Self.numbersFeed()
        let client = try daemon.connect()
        let count = 4_000
        let burst = (1...count).map { #"{"op":"ping","id":\#($0)}"# + "\n" }.joined()
        #expect(burst.utf8.count > 4 * 16 * 1024)
        try client.connection.sendRaw(Array(burst.utf8))
        for id in 1...count {
            let pong = try client.expect("pong")
            guard pong["id"] == .integer(Int64(id)) else {
                Issue.record("pong \(id) came as \(pong.jsonText)")
                return
            }
        }
    }

    @Test func next_past_last_page_answers_end() throws {
        let daemon = try Self.numbersFeed(lines: 25, pageSize: 10)
        let client = try daemon.connect()
        try client.send("next numbers 5")
        try client.expect("subscribed")
        let pages = try (0..<3).map { _ in try client.expect("page") }
        #expect(JSONValue.pageNumbers(pages) == [1, 2, 3])
        #expect(pages.map { $0["last"] } == [false, false, true])
        #expect(pages[2]["items"]?.arrayValue?.count == 5)
        let end = try client.expect("end")
        #expect(end["feed"] == "numbers" && end["page"] == 3)
        #expect(try client.request("next numbers")["type"] == "end")
    }

    @Test func every_reply_carries_the_request_id() throws {
        let daemon = try Self.numbersFeed(lines: 10, pageSize: 10)
        let client = try daemon.connect()
        let id: JSONValue = ["any": ["json", 1]]
        try client.send(["op": "next", "feed": "numbers", "id": id])
        #expect(try client.expect("subscribed")["id"] == id)
        #expect(try client.expect("page")["id"] == id)
        try client.send(["op": "next", "feed": "numbers", "id": 2])
        #expect(try client.expect("end")["id"] == 2)
        #expect(try client.request(["op": "ack", "feed": "numbers", "page": 1, "id": 3])["id"] == 3)
        #expect(try client.request(["op": "status", "id": "s"])["id"] == "s")
        #expect(try client.request(["op": "ping", "id": 4.5])["id"] == 4.5)
        #expect(try client.request(["op": "refresh", "feed": "numbers", "id": 5])["id"] == 5)
        #expect(try client.request(["op": "unsubscribe", "feed": "numbers", "id": 6])["id"] == 6)
        #expect(try client.request(["op": "nonsense", "id": 7])["id"] == 7)
        #expect(try client.request(["op": "next", "id": 8])["id"] == 8)
        #expect(try client.request(["op": "quit", "id": nil])["type"] == "bye")
    }

    @Test func subscribe_after_starts_past_that_page() throws {
        let daemon = try Self.numbersFeed()
        let client = try daemon.connect()
        let subscribed = try client.request(["op": "subscribe", "feed": "numbers", "after": 2])
        #expect(subscribed["type"] == "subscribed" && subscribed["after"] == 2)
        try client.send("next numbers")
        #expect(try client.expect("page")["page"] == 3)
    }

    @Test func follow_pushes_every_page_then_end() throws {
        let daemon = try Self.numbersFeed(lines: 45, pageSize: 10)
        let client = try daemon.connect()
        let subscribed = try client.request("follow numbers")
        #expect(subscribed["type"] == "subscribed" && subscribed["follow"] == true)
        let (pages, end) = try client.read(until: "end")
        #expect(JSONValue.pageNumbers(pages) == [1, 2, 3, 4, 5])
        #expect(pages.allSatisfy { $0["type"] == "page" && $0["id"] == nil })
        #expect(end["page"] == 5)
    }

    @Test func following_a_growing_file_publishes_appended_lines() throws {
        let directory = try TemporaryDirectory()
        let path = try directory.write("log.ndjson", "first\nsecond\n")
        let daemon = try DaemonProcess(config: """
            [feeds.log]
            source = "file"
            path = "\(path)"
            page_size = 2
            follow = true
            """, directory: directory)
        let client = try daemon.connect()
        try client.send(#"{"op":"subscribe","feed":"log","follow":true}"#)
        try client.expect("subscribed")
        let first = try client.expect("page")
        #expect(first["items"] == [["id": "1", "data": "first"], ["id": "2", "data": "second"]])
        #expect(first["last"] == false)
        let handle = try #require(FileHandle(forWritingAtPath: path))
        handle.seekToEndOfFile()
        handle.write(Data("\n{\"third\":3}\npartial".utf8))
        let second = try client.expect("page")
        #expect(second["page"] == 2)
        #expect(second["items"] == [["id": "4", "data": ["third": 3]]])
        handle.write(Data(" line\n".utf8))
        try handle.close()
        let third = try client.expect("page")
        #expect(third["items"] == [["id": "5", "data": "partial line"]])
        try client.send("next log")
        #expect(try client.expect("end")["page"] == 3)
    }

    @Test func ack_marks_pages_consumed_up_to_what_was_delivered() throws {
        let daemon = try Self.numbersFeed()
        let client = try daemon.connect()
        try client.send("next numbers 2")
        _ = try client.read(until: "page")
        _ = try client.expect("page")
        let ack = try client.request(["op": "ack", "feed": "numbers", "page": 1])
        #expect(ack["type"] == "ack" && ack["feed"] == "numbers" && ack["page"] == 1)
        #expect(try client.request("ack numbers 9")["page"] == 2)
        let notSubscribed = try daemon.connect().request("ack numbers 1")
        #expect(notSubscribed["type"] == "error" && notSubscribed["code"] == "bad_request")
    }

    @Test func unsubscribe_stops_the_subscription() throws {
        let daemon = try Self.numbersFeed()
        let client = try daemon.connect()
        try client.send("next numbers")
        _ = try client.read(until: "page")
        let reply = try client.request(["op": "unsubscribe", "feed": "numbers"])
        #expect(reply["type"] == "unsubscribed" && reply["feed"] == "numbers")
        try client.send("next numbers")
        #expect(try client.expect("subscribed")["after"] == 0)
        #expect(try client.expect("page")["page"] == 1)
    }

    @Test func refresh_tells_every_subscriber_and_restarts_at_page_one() throws {
        let daemon = try Self.numbersFeed()
        let asker = try daemon.connect()
        let other = try daemon.connect()
        try asker.send("next numbers 2")
        _ = try asker.read(until: "page")
        _ = try asker.expect("page")
        try other.send("follow numbers")
        try other.expect("subscribed")
        _ = try other.read(until: "end")
        let refreshed = try asker.request(["op": "refresh", "feed": "numbers", "id": 1])
        #expect(refreshed["type"] == "refreshed" && refreshed["feed"] == "numbers" && refreshed["generation"] == 2 && refreshed["id"] == 1)
        let told = try other.expect("refreshed")
        #expect(told["generation"] == 2 && told["id"] == nil)
        #expect(try other.expect("page")["page"] == 1)
        try asker.send("next numbers")
        let page = try asker.expect("page")
        #expect(page["page"] == 1 && page["generation"] == 2)
    }

    @Test func status_reports_the_daemon_and_each_feed() throws {
        let daemon = try Self.numbersFeed(lines: 25, pageSize: 10)
        let client = try daemon.connect()
        try client.send("next numbers 3")
        _ = try client.read(until: "page")
        _ = try client.expect("page")
        _ = try client.expect("page")
        let status = try client.request("status")
        #expect(status["type"] == "status")
        #expect(status["version"]?.stringValue == feeddVersion)
        #expect(status["uptime_s"]?.integerValue != nil)
        #expect(status["clients"] == 1)
        let feed = try #require(status["feeds"]?.arrayValue?.first)
        #expect(feed["name"] == "numbers")
        #expect(feed["source"] == "file")
        #expect(feed["state"] == "ok")
        #expect(feed["generation"] == 1)
        #expect(feed["fetched_pages"] == 3)
        #expect(feed["cached_pages"] == 3)
        #expect(feed["reached_end"] == true)
        #expect(feed["upstream_requests"] == 3)
        #expect(feed["last_error"] == .null)
        #expect(feed["subscribers"] == 1)
        #expect(feed["consumers"] == [])
    }

    @Test func ping_answers_pong_and_quit_says_bye_and_closes() throws {
        let daemon = try Self.numbersFeed()
        let client = try daemon.connect()
        #expect(try client.request("ping")["type"] == "pong")
        #expect(try client.request(#"{"op":"quit"}"#)["type"] == "bye")
        #expect(try client.isClosedByDaemon())
    }

    @Test func inline_words_work_like_json_requests() throws {
        let daemon = try Self.numbersFeed()
        let client = try daemon.connect()
        try client.send("subscribe numbers 1")
        #expect(try client.expect("subscribed")["after"] == 1)
        try client.send("next numbers 2\r")
        #expect(JSONValue.pageNumbers([try client.expect("page"), try client.expect("page")]) == [2, 3])
        #expect(try client.request("ack numbers 2")["page"] == 2)
        #expect(try client.request("  ping  ")["type"] == "pong")
        #expect(try client.request("unsubscribe numbers")["type"] == "unsubscribed")
        #expect(try client.request("status")["type"] == "status")
        #expect(try client.request("refresh numbers")["type"] == "refreshed")
    }
}

@Suite struct CacheLimitTests {
    /// Regression (found by the soak test): when every cached page was wanted by someone, the
    /// feed stopped fetching, and subscribers spread over more pages than `cache_pages` waited forever.
    @Test func subscribers_spread_wider_than_the_cache_still_get_their_pages() throws {
        let daemon = try ProtocolTests.numbersFeed(lines: 60, pageSize: 1, extraFeed: "cache_pages = 2\nprefetch = 3")
        let clients = try (0..<4).map { _ in try daemon.connect() }
        for (index, client) in clients.enumerated() {
            #expect(try client.request(["op": "subscribe", "feed": "numbers", "after": .integer(Int64(index * 15))])["type"] == "subscribed")
        }
        for round in 1...3 {
            for (index, client) in clients.enumerated() {
                try client.send("next numbers")
                #expect(try client.expect("page")["page"] == .integer(Int64(index * 15 + round)))
            }
        }
        let status = try clients[0].request("status")
        #expect((status["feeds"]?.arrayValue?.first?["cached_pages"]?.integerValue ?? 99) <= 2 + 4, "at most one page over the limit per subscriber")
    }
}
