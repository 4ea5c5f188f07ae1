import FeedKit
import Foundation
import Testing
import TestSupport

/// `feedctl consumers`, `lag`, `ack` and `forget` (issue 28), over the ops of SPEC §5. A fake
/// daemon stands in for the `consumers` op where the real one does not answer it yet.
@Suite struct FeedctlConsumerTests {
    func feedctl(_ socket: String, _ arguments: String...) throws -> (status: Int32, output: String, errors: String) {
        try ChildProcess.run(FeeddBinaries.feedctl, ["--socket", socket] + arguments, environment: ["PATH": "/usr/bin:/bin"])
    }

    static func consumer(_ name: String, after: Int, behind: Int?, connected: Bool = false, lastAck: String? = nil) -> JSONValue {
        [
            "name": .string(name), "after": .integer(Int64(after)), "behind": behind.map { .integer(Int64($0)) } ?? .null,
            "connected": .bool(connected), "last_ack": lastAck.map(JSONValue.string) ?? .null,
        ]
    }

    /// A fake whose `consumers` op pages `table[feed]` two at a time; other ops as `otherwise` says.
    static func daemon(
        _ table: [String: [JSONValue]], otherwise: @escaping @Sendable (JSONValue) -> [JSONValue] = { _ in [] }
    ) throws -> FakeDaemon {
        try FakeDaemon(feeds: table.keys.sorted()) { request in
            guard request["op"] == "consumers", let feed = request["feed"]?.stringValue else { return otherwise(request) }
            let all = table[feed] ?? []
            let start = request["after"]?.stringValue.flatMap { after in all.firstIndex { $0["name"]?.stringValue == after }.map { $0 + 1 } } ?? 0
            let page = Array(all[start...].prefix(2))
            let next: JSONValue = start + 2 < all.count ? page.last!["name"]! : .null
            return [["type": "consumers", "feed": .string(feed), "consumers": .array(page), "next": next]]
        }
    }

    @Test func consumers_pages_through_the_list_and_prints_a_table() throws {
        let recent = FeedTime(millisecondsSinceEpoch: Int64(Date().timeIntervalSince1970 * 1_000) - 90_000).rfc3339
        let fake = try Self.daemon(["users": [
            Self.consumer("alpha", after: 12, behind: 0, connected: true, lastAck: recent),
            Self.consumer("beta", after: 3, behind: 9),
            Self.consumer("gamma", after: 0, behind: nil),
        ]])
        let result = try feedctl(fake.socketPath, "consumers", "users")
        #expect(result.status == 0, "\(result.errors)")
        #expect(result.output.split(separator: "\n").map { $0.split(separator: " ", omittingEmptySubsequences: true).joined(separator: " ") } == [
            "CONSUMER AFTER BEHIND CONNECTED LAST ACK",
            "alpha 12 0 yes 90s ago",
            "beta 3 9 no -",
            "gamma 0 - no -",
        ])
        let asked = fake.requests.filter { $0["op"] == "consumers" }
        #expect(asked.map { $0["after"] } == [nil, "beta"], "the second page starts after the first's last name")
        #expect(asked.allSatisfy { $0["limit"] == 1000 })
        let json = try feedctl(fake.socketPath, "consumers", "users", "--json")
        #expect(json.output.split(separator: "\n").first == #"{"after":12,"behind":0,"connected":true,"feed":"users","last_ack":"\#(recent)","name":"alpha"}"#)
    }

    @Test func lag_lists_every_feeds_consumers_furthest_behind_first() throws {
        let fake = try Self.daemon([
            "news": [Self.consumer("mobile", after: 1, behind: 40), Self.consumer("web", after: 30, behind: 11)],
            "users": [Self.consumer("batch", after: 2, behind: 99), Self.consumer("new", after: 0, behind: nil), Self.consumer("tail", after: 9, behind: 0)],
        ])
        let result = try feedctl(fake.socketPath, "lag")
        #expect(result.status == 0, "\(result.errors)")
        let rows = result.output.split(separator: "\n").map { $0.split(separator: " ").prefix(3).joined(separator: " ") }
        #expect(rows == ["FEED CONSUMER BEHIND", "users batch 99", "news mobile 40", "news web 11", "users tail 0", "users new -"])
        let one = try feedctl(fake.socketPath, "lag", "news", "--json")
        #expect(one.output.split(separator: "\n").compactMap { try? JSONValue(parsing: Array($0.utf8))["name"]?.stringValue } == ["mobile", "web"])
    }

    /// Acknowledging subscribes as the consumer, which tells its cursor, then subscribes after
    /// the page (which stores it) and acknowledges it.
    @Test func ack_moves_the_cursor_forward_through_a_subscribe_and_an_ack() throws {
        let fake = try Self.daemon(["users": [Self.consumer("batch", after: 3, behind: 10)]]) { request in
            switch request["op"]?.stringValue {
            case "subscribe":
                return [["type": "subscribed", "feed": "users", "consumer": "batch", "generation": 1, "after": request["after"] ?? 3, "follow": false]]
            case "ack": return [["type": "ack", "feed": "users", "page": request["page"]!]]
            default: return []
            }
        }
        let result = try feedctl(fake.socketPath, "ack", "users", "batch", "7")
        #expect(result.status == 0, "\(result.errors)")
        #expect(result.output == "users batch: acknowledged through page 7 (was 3)\n")
        #expect(fake.requests.filter { $0["op"] != "consumers" } == [
            ["op": "subscribe", "feed": "users", "consumer": "batch"],
            ["op": "subscribe", "feed": "users", "consumer": "batch", "after": 7],
            ["op": "ack", "feed": "users", "page": 7],
        ])
        let behind = try feedctl(fake.socketPath, "ack", "users", "batch", "2")
        #expect(behind.output == "users batch: already acknowledged through page 3\n", "an ack never moves a cursor back")
    }

    @Test func ack_refuses_a_missing_or_connected_consumer_and_a_page_past_the_newest() throws {
        let fake = try Self.daemon(["users": [Self.consumer("batch", after: 3, behind: 10), Self.consumer("live", after: 5, behind: 1, connected: true)]])
        let missing = try feedctl(fake.socketPath, "ack", "users", "bacth", "4")
        #expect(missing.status == 1)
        #expect(missing.errors == "feedctl: feed users has no consumer \"bacth\"; did you mean \"batch\"? (feedctl consumers users lists them)\n")
        let live = try feedctl(fake.socketPath, "ack", "users", "live", "6")
        #expect(live.status == 1)
        #expect(live.errors.hasPrefix("feedctl: consumer live of users is connected"))
        let past = try feedctl(fake.socketPath, "ack", "users", "batch", "14")
        #expect(past.status == 1)
        #expect(past.errors == "feedctl: page 14 is past the newest page of users (13); --force acknowledges it anyway\n")
        #expect(!fake.requests.contains { $0["op"] == "subscribe" || $0["op"] == "ack" }, "nothing was acknowledged")
    }

    @Test func a_daemon_without_the_consumers_op_is_named_as_older() throws {
        let fake = try FakeDaemon(feeds: ["users"]) { request in
            [["type": "error", "code": "unknown_op", "message": "unknown op \"consumers\"", "id": request["id"] ?? .null]]
        }
        let result = try feedctl(fake.socketPath, "consumers", "users")
        #expect(result.status == 1)
        #expect(result.errors == "feedctl: feedd 0.0.9 does not know \"consumers\"; it is older than this feedctl (\(feeddVersion))\n")
    }
}

/// The same commands against the real daemon.
@Suite struct FeedctlConsumerEndToEndTests {
    func feedctl(_ socket: String, _ arguments: String...) throws -> (status: Int32, output: String, errors: String) {
        try ChildProcess.run(FeeddBinaries.feedctl, ["--socket", socket] + arguments, environment: ["PATH": "/usr/bin:/bin"])
    }

    /// A daemon whose `numbers` feed has consumer `reader` at page 2 of 3.
    func daemonWithAConsumer() throws -> DaemonProcess {
        let daemon = try ProtocolTests.numbersFeed(lines: 30, pageSize: 10)
        let client = try daemon.connect()
        _ = try client.request(#"{"op":"subscribe","feed":"numbers","consumer":"reader"}"#)
        try client.send(#"{"op":"next","feed":"numbers","count":2}"#)
        try client.expect("page")
        try client.expect("page")
        #expect(try client.request(#"{"op":"ack","feed":"numbers","page":2}"#)["type"] == "ack")
        return daemon
    }

    /// Until the daemon answers `consumers`, the tests that need it say so and stop.
    func requireConsumersOp(_ result: (status: Int32, output: String, errors: String)) throws {
        if result.errors.contains("does not know \"consumers\"") {
            try Test.cancel("the daemon does not answer {\"op\":\"consumers\"} yet")
        }
    }

    @Test func forget_deletes_a_consumer_and_then_there_is_none() throws {
        let daemon = try daemonWithAConsumer()
        let result = try feedctl(daemon.socketPath, "forget", "numbers", "reader")
        #expect(result.status == 0, "\(result.errors)")
        #expect(result.output == "numbers reader: forgotten\n")
        let again = try feedctl(daemon.socketPath, "forget", "numbers", "reader")
        #expect(again.status == 1)
        #expect(again.errors == "feedctl: bad_request: feed \"numbers\" has no consumer \"reader\"\n")
    }

    @Test func consumers_and_lag_show_the_consumer_behind_the_head() throws {
        let daemon = try daemonWithAConsumer()
        let consumers = try feedctl(daemon.socketPath, "consumers", "numbers", "--json")
        try requireConsumersOp(consumers)
        #expect(consumers.status == 0, "\(consumers.errors)")
        let reader = try JSONValue(parsing: Array(consumers.output.split(separator: "\n").first.map(String.init)?.utf8 ?? "".utf8))
        #expect(reader["name"] == "reader" && reader["after"] == 2)
        let lag = try feedctl(daemon.socketPath, "lag")
        #expect(lag.status == 0)
        #expect(lag.output.split(separator: "\n").dropFirst().first?.hasPrefix("numbers") == true, "\(lag.output)")
    }

    @Test func ack_moves_a_real_consumer_forward() throws {
        let daemon = try daemonWithAConsumer()
        let result = try feedctl(daemon.socketPath, "ack", "numbers", "reader", "3")
        try requireConsumersOp(result)
        #expect(result.status == 0, "\(result.errors)")
        #expect(result.output == "numbers reader: acknowledged through page 3 (was 2)\n")
        let client = try daemon.connect()
        #expect(try client.request(#"{"op":"subscribe","feed":"numbers","consumer":"reader"}"#)["after"] == 3)
    }
}
