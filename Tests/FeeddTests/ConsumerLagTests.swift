import FeedKit
import Foundation
import Testing
import Synchronization
import TestSupport

/// Consumers as first-class objects (SPEC §5 `status`, `consumers`, `too_many_consumers`) and the
/// figures an operator watches them by (SPEC §10), from a real daemon.
@Suite struct ConsumerLagTests {
    /// A 50-line `numbers` feed of 10-line pages (5 pages) with the given extra settings.
    func daemon(extraDaemon: String = "", extraFeed: String = "") throws -> DaemonProcess {
        try ProtocolTests.numbersFeed(lines: 50, pageSize: 10, extraDaemon: extraDaemon, extraFeed: extraFeed)
    }

    /// Consumer `name` reads `read` pages and acknowledges them, then leaves.
    func consume(_ daemon: DaemonProcess, as name: String, read: Int) throws {
        let client = try daemon.connect()
        #expect(try client.request(#"{"op":"subscribe","feed":"numbers","consumer":"\#(name)"}"#)["type"] == "subscribed")
        if read > 0 {
            try client.send(#"{"op":"next","feed":"numbers","count":\#(read)}"#)
            for _ in 0..<read { try client.expect("page") }
            #expect(try client.request(#"{"op":"ack","feed":"numbers","page":\#(read)}"#)["page"] == .integer(Int64(read)))
        }
        try client.send("quit")
        _ = try client.readUntilClosed()
    }

    /// An anonymous reader takes `pages` pages, so the feed knows that many (and, with prefetch,
    /// maybe one more: a test that counts on the newest page reads all 5).
    func readAnonymously(_ daemon: DaemonProcess, pages: Int) throws {
        let client = try daemon.connect()
        try client.send(#"{"op":"next","feed":"numbers","count":\#(pages)}"#)
        for _ in 0..<pages { _ = try client.read(until: "page") }
    }

    func numbersStatus(_ client: TestClient) throws -> JSONValue {
        let status = try client.request("status")
        return try #require(status["feeds"]?.arrayValue?.first { $0["name"] == "numbers" })
    }

    /// Every `_total` sample of an OpenMetrics text, by its name and labels.
    static func counters(in text: String) -> [String: Double] {
        var samples: [String: Double] = [:]
        for line in text.split(separator: "\n") where !line.hasPrefix("#") {
            guard let space = line.lastIndex(of: " "), line[..<space].split(separator: "{").first?.hasSuffix("_total") == true else { continue }
            samples[String(line[..<space])] = Double(line[line.index(after: space)...])
        }
        return samples
    }

    @Test func every_counter_only_grows_across_disconnects_and_a_reload() throws {
        let daemon = try daemon()
        let watcher = try daemon.connect()
        var previous = Self.counters(in: try #require(try watcher.request("metrics")["text"]?.stringValue))
        for round in 1...3 {
            try readAnonymously(daemon, pages: 2)
            if round == 2 {
                // The feed's pages change: it is replaced by a new feed, whose counters go on.
                let config = try String(contentsOfFile: daemon.configPath, encoding: .utf8)
                try config.replacingOccurrences(of: "page_size = 10", with: "page_size = 5").write(toFile: daemon.configPath, atomically: true, encoding: .utf8)
                daemon.send(signal: SIGHUP)
                try daemon.log.waitForLine(containing: "continue on a new generation")
            }
            #expect(try watcher.clientsOnceOthersLeave() == 1)
            let text = try #require(try watcher.request("metrics")["text"]?.stringValue)
            #expect(try MetricsTests.promtoolProblems(text) == "")
            let now = Self.counters(in: text)
            for (sample, value) in previous {
                let later = now[sample] ?? -1
                #expect(later >= value, "round \(round): \(sample) went from \(value) to \(later) (-1: gone)")
            }
            previous = now
        }
        #expect((previous["feedd_sent_bytes_total"] ?? 0) > 3 * 2 * 100, "the pages sent to clients that left are counted")
        #expect((previous[#"feedd_feed_pages_delivered_total{feed="numbers"}"#] ?? 0) >= 6)
    }

    @Test func status_gives_each_consumer_after_behind_connected_and_last_ack() throws {
        let daemon = try daemon()
        try consume(daemon, as: "slow", read: 1)
        try consume(daemon, as: "idle", read: 0)
        try readAnonymously(daemon, pages: 5)
        let client = try daemon.connect()
        let feed = try numbersStatus(client)
        let consumers = try #require(feed["consumers"]?.arrayValue)
        #expect(consumers.map { $0["name"] } == ["idle", "slow"])
        let slow = consumers[1]
        #expect(slow["after"] == 1 && slow["behind"] == 4 && slow["connected"] == false)
        let lastAck = try #require(slow["last_ack"]?.stringValue.flatMap(FeedTime.init))
        let now = Int64(Date().timeIntervalSince1970 * 1_000)
        #expect(abs(now - lastAck.millisecondsSinceEpoch) < 60_000, "last_ack is the time of its ack, in RFC 3339")
        #expect(consumers[0]["after"] == 0 && consumers[0]["behind"] == 5 && consumers[0]["last_ack"] == .null)
        #expect(feed["consumer_count"] == 2 && feed["behind_max"] == 5 && feed["behind_sum"] == 9 && feed["consumers_truncated"] == false)
        let metrics = try #require(try client.request("metrics")["text"]?.stringValue)
        let lines = metrics.split(separator: "\n")
        #expect(lines.contains(#"feedd_feed_consumer_lag_max_pages{feed="numbers"} 5"#))
        #expect(lines.contains(#"feedd_feed_consumer_lag_sum_pages{feed="numbers"} 9"#))
        #expect(!metrics.contains("feedd_consumer_lag_pages"), "one series per consumer only with metrics_consumers")
    }

    @Test func metrics_consumers_gives_each_consumer_its_own_lag() throws {
        let daemon = try daemon(extraDaemon: "metrics_consumers = true")
        try consume(daemon, as: "behind", read: 2)
        try readAnonymously(daemon, pages: 5)
        let client = try daemon.connect()
        let text = try #require(try client.request("metrics")["text"]?.stringValue)
        #expect(text.split(separator: "\n").contains(#"feedd_consumer_lag_pages{feed="numbers",consumer="behind"} 3"#))
        #expect(try MetricsTests.promtoolProblems(text) == "")
    }

    @Test func a_consumer_past_max_consumers_is_told_too_many_consumers() throws {
        let daemon = try daemon(extraFeed: "max_consumers = 2")
        try consume(daemon, as: "one", read: 1)
        try consume(daemon, as: "two", read: 0)
        let client = try daemon.connect()
        let refused = try client.request(#"{"op":"subscribe","feed":"numbers","consumer":"three","id":5}"#)
        #expect(refused["type"] == "error" && refused["code"] == "too_many_consumers" && refused["id"] == 5 && refused["feed"] == "numbers")
        #expect(try client.request(#"{"op":"subscribe","feed":"numbers","consumer":"one"}"#)["after"] == 1, "a known consumer still may")
        #expect(try client.request(#"{"op":"forget","feed":"numbers","consumer":"two"}"#)["type"] == "forgotten")
        #expect(try client.request(#"{"op":"subscribe","feed":"numbers","consumer":"three"}"#)["type"] == "subscribed")
        #expect(try client.request(#"{"op":"ping"}"#)["type"] == "pong", "the connection stays open")
    }

    @Test func the_consumers_op_pages_through_every_consumer_by_name() throws {
        let daemon = try daemon()
        try readAnonymously(daemon, pages: 5)
        for name in ["e", "b", "d", "a", "c"] { try consume(daemon, as: name, read: name == "c" ? 2 : 0) }
        let client = try daemon.connect()
        var seen: [JSONValue] = []
        var after: JSONValue = .null
        var pages = 0
        repeat {
            let reply = try client.request(["op": "consumers", "feed": "numbers", "limit": 2, "after": after, "id": "p"])
            #expect(reply["type"] == "consumers" && reply["feed"] == "numbers" && reply["id"] == "p")
            seen += reply["consumers"]?.arrayValue ?? []
            after = reply["next"] ?? .null
            pages += 1
        } while after != .null && pages < 10
        #expect(pages == 3)
        #expect(seen.map { $0["name"] } == ["a", "b", "c", "d", "e"])
        #expect(seen[2]["after"] == 2 && seen[2]["behind"] == 3 && seen[2]["connected"] == false && seen[2]["last_ack"]?.stringValue != nil)
        #expect(try client.request("consumers numbers")["consumers"]?.arrayValue?.count == 5, "the inline form lists the first 100")
        #expect(try client.request(#"{"op":"consumers","feed":"numbers","limit":0}"#)["code"] == "bad_request")
        #expect(try client.request(#"{"op":"consumers","feed":"numbers","after":3}"#)["code"] == "bad_request")
        #expect(try client.request(#"{"op":"consumers","feed":"nope"}"#)["code"] == "unknown_feed")
    }
}

/// `status` stays small and fast however many consumers a feed has, and nobody else waits on it.
@Suite struct ManyConsumersTests {
    static let consumers = 30_000

    /// Subscribes consumers `c…` numbered `numbers` from 100 connections at once, one subscribe in
    /// flight on each (each replaces that connection's last and stores the new consumer's cursor,
    /// and the store commits the 100 writes together); the connections then leave.
    static func subscribe(_ numbers: Range<Int>, daemon: DaemonProcess) throws {
        let clients = try (0..<100).map { _ in try daemon.connect() }
        for round in stride(from: numbers.lowerBound, to: numbers.upperBound, by: clients.count) {
            let names = round..<min(round + clients.count, numbers.upperBound)
            for (client, number) in zip(clients, names) { try client.send(#"{"op":"subscribe","feed":"numbers","consumer":"c\#(number)"}"#) }
            for (client, _) in zip(clients, names) { try client.expect("subscribed") }
        }
    }

    /// The median time `client` waits for `status`, over 7 asks, and the answer's size.
    static func statusTime(_ client: TestClient, consumers: Int) throws -> (median: Duration, bytes: Int) {
        var times: [Duration] = []
        var size = 0
        for _ in 0..<7 {
            // Any other request makes the next status a fresh one, not the one built < 100 ms ago.
            _ = try client.request(#"{"op":"unsubscribe","feed":"numbers"}"#)
            let asked = ContinuousClock.now
            try client.send("status")
            let status = try client.expect("status")
            times.append(ContinuousClock.now - asked)
            let feed = try #require(status["feeds"]?.arrayValue?.first)
            #expect(feed["consumer_count"] == .integer(Int64(consumers)))
            #expect(feed["consumers"]?.arrayValue?.count == 100 && feed["consumers_truncated"] == true)
            size = status.jsonText.utf8.count
        }
        let median = times.sorted()[times.count / 2]
        print("status with \(consumers) consumers: median \(median), all \(times), \(size) bytes")
        return (median, size)
    }

    /// SPEC §5: every request is answered. Each subscribe replaces the connection's last
    /// subscription while that one's start is still being stored; each still gets `subscribed`
    /// (replies may come in any order: the starts are stored in groups), and a `next` queued
    /// behind them reads for the last.
    @Test(.timeLimit(.minutes(1))) func subscribes_pipelined_on_one_connection_each_get_their_answer() throws {
        let daemon = try ProtocolTests.numbersFeed(lines: 50, pageSize: 10)
        let client = try daemon.connect()
        let count = 300
        for number in 0..<count { try client.send(#"{"op":"subscribe","feed":"numbers","consumer":"p\#(number)"}"#) }
        try client.send("next numbers")
        var subscribed: Set<String> = []
        var pages: [JSONValue] = []
        for _ in 0...count {
            let message = try client.read()
            if message["type"] == "subscribed", let consumer = message["consumer"]?.stringValue { subscribed.insert(consumer) }
            if message["type"] == "page" { pages.append(message) }
        }
        #expect(subscribed == Set((0..<count).map { "p\($0)" }))
        #expect(pages.map { $0["page"] } == [1])
        #expect(try client.request(["op": "consumers", "feed": "numbers", "limit": 1000])["consumers"]?.arrayValue?.count == count)
    }

    /// SPEC §5 `status` summarises a feed's consumers: their count and the 100 furthest behind.
    /// Its cost may grow with the consumers, but no faster than they do, and it holds up no other
    /// client for longer than it takes. Each time is measured against the same daemon in the same
    /// test, not against the clock: the machine is shared.
    @Test(.timeLimit(.minutes(1))) func status_with_30000_consumers_costs_linear_time_at_most_and_pings_are_not_held_up() throws {
        let daemon = try ProtocolTests.numbersFeed(lines: 50, pageSize: 10, extraFeed: "max_consumers = 40000")
        let client = try daemon.connect()
        let tenth = Self.consumers / 10
        try Self.subscribe(0..<tenth, daemon: daemon)
        let fewer = try Self.statusTime(client, consumers: tenth)
        let started = ContinuousClock.now
        try Self.subscribe(tenth..<Self.consumers, daemon: daemon)
        print("\(Self.consumers - tenth) more consumers subscribed in \(ContinuousClock.now - started)")
        // The 100 subscribers have left: the first ping is answered once the daemon is past that.
        let firstPing = ContinuousClock.now
        #expect(try client.request("ping")["type"] == "pong")
        let firstPingTime = ContinuousClock.now - firstPing
        let all = try Self.statusTime(client, consumers: Self.consumers)
        #expect(all.median < fewer.median * 30, "ten times the consumers: at most three times linear growth")
        #expect(all.bytes < 64 << 10, "a summary, not 30,000 entries")
        #expect(firstPingTime < all.median * 10, "100 clients leaving a feed of 30,000 consumers cost less than ten status builds")

        // Pings from one client while another polls status without pause.
        let stop = Atomic(false)
        let stopped = DispatchSemaphore(value: 0)
        let socket = daemon.socketPath
        let polling = Thread {
            defer { stopped.signal() }
            guard let poller = try? TestClient(path: socket), (try? poller.read())?["type"] == "hello" else { return }
            while !stop.load(ordering: .relaxed) {
                _ = try? poller.request(#"{"op":"consumers","feed":"numbers","limit":1000}"#)
                _ = try? poller.request("status")
            }
        }
        polling.start()
        // The poller holds the daemon: it must be done before the daemon can be killed.
        defer {
            stop.store(true, ordering: .relaxed)
            stopped.wait()
        }
        var pings: [Duration] = []
        for _ in 0..<50 {
            let asked = ContinuousClock.now
            #expect(try client.request("ping")["type"] == "pong")
            pings.append(ContinuousClock.now - asked)
        }
        let sortedPings = pings.sorted()
        print("pings while status is polled: median \(sortedPings[25]), slowest \(sortedPings[49])")
        // A ping waits for the request being answered when it arrives, and no more.
        #expect(sortedPings[25] < all.median * 2)
    }
}
