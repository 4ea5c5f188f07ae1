import FeedKit
import Foundation
import Glibc
import Testing
import TestSupport

/// Bad input and hard clients: errors go to whoever sent them, and everyone else carries on.
@Suite struct RobustnessTests {
    @Test func every_bad_request_gets_its_error_code_and_the_connection_goes_on() throws {
        let daemon = try ProtocolTests.numbersFeed()
        let client = try daemon.connect()
        let cases: [(line: String, code: String)] = [
            (#"{"op":"next","feed":"numbers""#, "bad_json"),
            (#"{"feed":"numbers"}"#, "bad_request"),
            (#"{"op":"next","feed":"numbers","count":"two"}"#, "bad_request"),
            (#"{"op":"next","feed":"numbers","count":-1}"#, "bad_request"),
            (#"{"op":"jump"}"#, "unknown_op"),
            ("jump numbers", "unknown_op"),
            (#"{"op":"next","feed":"nothing"}"#, "unknown_feed"),
            ("next nothing", "unknown_feed"),
            ("next numbers zero", "bad_request"),
        ]
        for (line, code) in cases {
            let reply = try client.request(line)
            #expect(reply["type"] == "error", "\(line)")
            #expect(reply["code"]?.stringValue == code, "\(line) → \(reply.jsonText)")
            #expect(reply["message"]?.stringValue?.isEmpty == false)
        }
        #expect(try client.request("next nothing")["feed"] == "nothing")
        #expect(try client.request("ping")["type"] == "pong")
    }

    @Test func an_over_long_line_is_skipped_to_the_next_newline() throws {
        let daemon = try ProtocolTests.numbersFeed(extraDaemon: "max_line_bytes = 1024")
        let client = try daemon.connect()
        try client.connection.sendRaw(Array(repeating: UInt8(ascii: "x"), count: 100_000))
        let error = try client.expect("error")
        #expect(error["code"] == "line_too_long")
        try client.connection.sendRaw(Array(" still the same line\nping\n".utf8))
        #expect(try client.expect("pong")["type"] == "pong")
        let exactlyAtLimit = "ping" + String(repeating: " ", count: 1020)
        #expect(try client.request(exactlyAtLimit)["type"] == "pong")
        #expect(try client.request(exactlyAtLimit + " ")["code"] == "line_too_long")
        #expect(try client.request("ping")["type"] == "pong")
    }

    @Test func binary_garbage_gets_errors_and_harms_no_one() throws {
        let daemon = try ProtocolTests.numbersFeed()
        let bystander = try daemon.connect()
        try bystander.send("next numbers")
        _ = try bystander.read(until: "page")
        var generator = SystemRandomNumberGenerator()
        for round in 0..<20 {
            let client = try daemon.connect()
            var garbage = (0..<4096).map { _ in UInt8.random(in: 0...255, using: &generator) }
            if round % 2 == 0 { garbage[0] = UInt8(ascii: "{") }
            try client.connection.sendRaw(garbage + Array("\nping\n".utf8))
            let (_, pong) = try client.read(until: "pong")
            #expect(pong["type"] == "pong")
        }
        #expect(try bystander.request("next numbers")["page"] == 2)
        #expect(daemon.isRunning)
    }

    @Test func five_hundred_concurrent_clients_each_get_their_pages() throws {
        let daemon = try ProtocolTests.numbersFeed(lines: 100, pageSize: 10)
        let clients = try (0..<500).map { _ in try daemon.connect() }
        for (index, client) in clients.enumerated() {
            try client.send(["op": "next", "feed": "numbers", "count": .integer(Int64(index % 3 + 1)), "id": .integer(Int64(index))])
        }
        for (index, client) in clients.enumerated() {
            try client.expect("subscribed")
            let pages = try (0...(index % 3)).map { _ in try client.expect("page") }
            #expect(JSONValue.pageNumbers(pages) == Array(1...Int64(index % 3 + 1)))
            #expect(pages.allSatisfy { $0["id"] == .integer(Int64(index)) })
        }
        #expect(try clients[0].request("status")["clients"] == 500)
        let status = try clients[0].request("status")
        #expect(status["feeds"]?.arrayValue?.first?["upstream_requests"]?.integerValue ?? 99 <= 4, "one fetch per page however many read it")
    }

    @Test func max_clients_turns_away_one_more_with_too_many_clients() throws {
        let daemon = try ProtocolTests.numbersFeed(extraDaemon: "max_clients = 3")
        let admitted = try (0..<3).map { _ in try daemon.connect() }
        let refused = try TestClient(path: daemon.socketPath)
        let error = try refused.expect("error")
        #expect(error["code"] == "too_many_clients")
        #expect(try refused.isClosedByDaemon())
        #expect(try admitted[2].request("ping")["type"] == "pong")
        admitted[0].connection.finishSending()
        #expect(try admitted[0].isClosedByDaemon())
        try daemon.log.waitForLine(containing: "max_clients")
        // A place is free again once a client leaves.
        var replacement: TestClient?
        for _ in 0..<50 where replacement == nil {
            let candidate = try TestClient(path: daemon.socketPath)
            if try candidate.read()["type"] == "hello" { replacement = candidate }
        }
        #expect(try replacement?.request("ping")["type"] == "pong")
    }

    @Test func a_follower_that_never_reads_costs_bounded_memory_and_slows_no_one() throws {
        let directory = try TemporaryDirectory()
        let line = #"{"text":""# + String(repeating: "feedd ", count: 40) + #""}"#
        let path = try directory.write("big.ndjson", Array(repeating: line, count: 40_000).joined(separator: "\n"))
        let daemon = try DaemonProcess(config: """
            [feeds.big]
            source = "file"
            path = "\(path)"
            page_size = 100
            cache_pages = 8
            """, directory: directory)
        let stuck = try daemon.connect()
        try stuck.send("follow big")
        let reader = try daemon.connect()
        try reader.send("next big")
        _ = try reader.read(until: "page")
        let baseline = try daemon.memory("RssAnon")
        var pages = 1
        while pages < 400 {
            try reader.send("next big 20")
            for _ in 0..<20 {
                let message = try reader.read(timeout: .seconds(5))
                guard message["type"] == "page" else { break }
                pages += 1
            }
            #expect(try reader.request("ping")["type"] == "pong")
        }
        let grown = try daemon.memory("RssAnon") - baseline
        #expect(pages == 400)
        #expect(grown < 32_768 || Sanitizer.isActive, "RssAnon grew by \(grown) kB while one follower never read")
        let status = try reader.request("status")
        #expect(status["feeds"]?.arrayValue?.first?["cached_pages"]?.integerValue ?? 99 <= 8)
        _ = stuck
    }
}

/// Limits a hostile client cannot get around, and who is connected.
@Suite struct LimitTests {
    @Test func a_connection_may_hold_only_max_subscriptions() throws {
        let directory = try TemporaryDirectory()
        let path = try directory.write("data.ndjson", "a\nb\n")
        let feeds = (1...3).map { "[feeds.f\($0)]\nsource = \"file\"\npath = \"\(path)\"\n" }.joined(separator: "\n")
        let daemon = try DaemonProcess(config: "[daemon]\nmax_subscriptions = 2\n" + feeds, directory: directory)
        let client = try daemon.connect()
        #expect(try client.request("subscribe f1")["type"] == "subscribed")
        #expect(try client.request("subscribe f2")["type"] == "subscribed")
        let refused = try client.request("subscribe f3")
        #expect(refused["code"] == "bad_request" && refused["feed"] == "f3")
        #expect(try client.request("subscribe f1")["type"] == "subscribed", "re-subscribing replaces, it does not add")
        #expect(try client.request("unsubscribe f2")["type"] == "unsubscribed")
        #expect(try client.request("subscribe f3")["type"] == "subscribed")
    }

    @Test func a_client_that_never_reads_is_disconnected_after_stall_timeout() throws {
        let directory = try TemporaryDirectory()
        let line = #"{"text":""# + String(repeating: "y", count: 4000) + #""}"#
        let path = try directory.write("big.ndjson", Array(repeating: line, count: 2_000).joined(separator: "\n"))
        let daemon = try DaemonProcess(
            config: "[daemon]\nstall_timeout = \"500ms\"\n[feeds.big]\nsource = \"file\"\npath = \"\(path)\"\npage_size = 100\n",
            directory: directory)
        let stuck = try daemon.connect()
        try stuck.send("follow big")
        try daemon.log.waitForLine(containing: "read nothing for")
        let watcher = try daemon.connect()
        #expect(try watcher.request("status")["clients"] == 1)
        // The goodbye goes out only if the socket still takes it; a reader this stuck usually
        // leaves it no room. Either way the connection ends and the daemon carries on.
        let received = try stuck.readUntilClosed()
        if let last = received.last, last["type"] == "error" { #expect(last["code"] == "too_slow") }
        #expect(try watcher.request("ping")["type"] == "pong")
    }

    @Test func status_shows_who_is_connected() throws {
        let daemon = try ProtocolTests.numbersFeed()
        let client = try daemon.connect()
        try client.send("next numbers")
        _ = try client.read(until: "page")
        let peers = try #require(client.request("status")["peers"]?.arrayValue)
        #expect(peers.count == 1)
        #expect(peers[0]["pid"] == .integer(Int64(getpid())))
        #expect(peers[0]["uid"] == .integer(Int64(getuid())))
        #expect(peers[0]["subscriptions"] == ["numbers"])
        try daemon.log.waitForLine(containing: "client connected: pid \(getpid()) uid \(getuid())")
    }
}

@Suite struct HangUpTests {
    /// Regression (found by the soak test): data and end of file that arrive together must not
    /// hide the end of file; the daemon lets the client go.
    @Test(arguments: [#"{"op":"next","feed":"num"#, "ping\n", ""])
    func a_client_that_hangs_up_mid_line_is_let_go(_ lastWords: String) throws {
        let daemon = try ProtocolTests.numbersFeed()
        let watcher = try daemon.connect()
        for _ in 0..<20 {
            let client = try daemon.connect()
            try client.connection.sendRaw(Array(lastWords.utf8))
        }
        #expect(try watcher.clientsOnceOthersLeave() == 1)
    }

    /// `printf 'next numbers 2\n' | socat - UNIX-CONNECT:…`: the client stops sending at once,
    /// is answered, and is let go then, not when it gives up waiting.
    @Test func a_client_that_stops_sending_is_answered_then_let_go() throws {
        let daemon = try ProtocolTests.numbersFeed()
        let client = try daemon.connect()
        try client.send("next numbers 2")
        client.connection.finishSending()
        let messages = try client.readUntilClosed(timeout: .seconds(5))
        #expect(messages.map { $0["type"]?.stringValue } == ["subscribed", "page", "page"])
        #expect(JSONValue.pageNumbers(messages) == [1, 2])
    }

    /// A client gone while its `next` waits for the upstream can never be answered: it is let go
    /// at once, not when the page finally comes (here after 20 s).
    @Test func a_client_that_hangs_up_while_waiting_for_a_page_is_let_go_at_once() throws {
        let upstream = try LoopbackUpstream()
        upstream.setLatency(.seconds(20))
        let daemon = try NetworkAdapterTests.daemon(upstream, feeds: """
            [feeds.users]
            source = "randomuser"
            url = "UPSTREAM/api/"
            prefetch = 0
            timeout = "60s"
            """)
        let watcher = try daemon.connect()
        for _ in 0..<5 {
            let client = try daemon.connect()
            try client.send("next users")
            try client.expect("subscribed")
        }
        #expect(try watcher.clientsOnceOthersLeave(within: .seconds(5)) == 1)
    }
}
