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
        #expect(grown < 32_768, "RssAnon grew by \(grown) kB while one follower never read")
        let status = try reader.request("status")
        #expect(status["feeds"]?.arrayValue?.first?["cached_pages"]?.integerValue ?? 99 <= 8)
        _ = stuck
    }
}
