import FeedCluster
import FeedKit
import Foundation
import Glibc
import Testing
import TestSupport

/// A fleet (SPEC §8): real feedd processes sharing a randomuser feed through a real nats-server
/// on loopback. One at a time: each test runs several daemons and servers.
@Suite(.serialized) struct FleetTests {
    /// A daemon in the fleet `test` of `servers`, serving `users` from `upstream`; returns once
    /// it has joined the fleet's generation of it (unless `waitUntilJoined` is false).
    /// `cluster` is added to the `[cluster]` table (authentication, a fleet key).
    static func instance(
        _ servers: [String], _ upstream: LoopbackUpstream, lease: String = "1s", replicas: Int = 1, waitUntilJoined: Bool = true,
        name: String = "test", cluster: String = "", feeds: String? = nil
    ) throws -> DaemonProcess {
        let daemon = try DaemonProcess(config: """
            [cluster]
            nats = [\(servers.map { "\"\($0)\"" }.joined(separator: ", "))]
            name = "\(name)"
            lease = "\(lease)"
            replicas = \(replicas)
            \(cluster)
            \(feeds ?? """
            [feeds.users]
            source = "randomuser"
            url = "\(upstream.baseURL)/api/"
            results = 3
            prefetch = 0
            timeout = "8s"
            retry_max_delay = "300ms"
            """)
            """)
        if waitUntilJoined { try daemon.log.waitForLine(containing: "joined the fleet") }
        return daemon
    }

    static func status(_ daemon: DaemonProcess) throws -> JSONValue {
        let client = try daemon.connect()
        return try client.request(["op": "status"])
    }

    /// Waits until `status` says the cluster is `state`.
    static func waitForCluster(_ daemon: DaemonProcess, _ state: String, within timeout: Duration = .seconds(15)) throws {
        _ = try waitForCluster(daemon, "become \(state)", within: timeout) { $0["state"]?.stringValue == state }
    }

    /// Waits until `status`'s `cluster` object satisfies `condition` (`what`, for the failure), and returns it.
    static func waitForCluster(
        _ daemon: DaemonProcess, _ what: String, within timeout: Duration = .seconds(15), until condition: (JSONValue) -> Bool
    ) throws -> JSONValue {
        let status = try daemon.waitForStatus("the cluster did \(what)", within: timeout) { $0["cluster"].map(condition) ?? false }
        return try #require(status["cluster"])
    }

    static func ids(_ page: JSONValue) -> [String] {
        page["items"]?.arrayValue?.compactMap { $0["id"]?.stringValue } ?? []
    }

    @Test func status_has_the_cluster_and_an_unreachable_one_is_not_fatal() throws {
        let upstream = try LoopbackUpstream()
        let port = try NATSServer.freePort()
        let daemon = try Self.instance(["nats://127.0.0.1:\(port)"], upstream, waitUntilJoined: false)
        let disconnected = try Self.status(daemon)["cluster"]
        #expect(disconnected?["state"] == "disconnected")
        #expect(disconnected?["name"] == "test")
        // Pages are served meanwhile, fetched here alone.
        let client = try daemon.connect()
        try client.send("next users 1")
        try client.expect("subscribed")
        #expect(try client.expect("page")["page"] == 1)
        let nats = try NATSServer(port: port)
        defer { nats.stop() }
        try daemon.log.waitForLine(containing: "joined the fleet")
        try Self.waitForCluster(daemon, "connected")
        #expect(try Self.status(daemon)["cluster"]?["joined"] == ["users"])

        let alone = try NetworkAdapterTests.users(upstream)
        #expect(try Self.status(alone)["cluster"] == nil)
    }

    @Test func every_instance_serves_the_same_pages_and_each_is_fetched_once() throws {
        let upstream = try LoopbackUpstream()
        let nats = try NATSServer()
        defer { nats.stop() }
        let first = try Self.instance([nats.url], upstream)
        let second = try Self.instance([nats.url], upstream)
        let firstClient = try first.connect()
        try firstClient.send("next users 3")
        try firstClient.expect("subscribed")
        let firstPages = try (1...3).map { _ in try firstClient.expect("page") }
        let secondClient = try second.connect()
        try secondClient.send("next users 3")
        try secondClient.expect("subscribed")
        let secondPages = try (1...3).map { _ in try secondClient.expect("page") }
        #expect(firstPages.map(Self.ids) == secondPages.map(Self.ids))
        #expect(firstPages.map { $0["generation"] } == secondPages.map { $0["generation"] })
        #expect(upstream.received.count == 3)
        // Each instance counts the requests it made itself.
        #expect(try Self.status(first)["feeds"]?.arrayValue?.first?["upstream_requests"] == 3)
        #expect(try Self.status(second)["feeds"]?.arrayValue?.first?["upstream_requests"] == 0)
    }

    @Test func every_page_is_published_on_its_subject_as_the_exact_page_line() async throws {
        let upstream = try LoopbackUpstream()
        let nats = try NATSServer()
        defer { nats.stop() }
        let daemon = try Self.instance([nats.url], upstream)
        let reader = try await NATSClient.connect(NATSClient.Options(servers: [nats.url], name: "reader"))
        let messages = await reader.subscribe(to: "feedd.test.pages.users.>")
        let client = try daemon.connect()
        try client.send("next users 2")
        try client.expect("subscribed")
        let pages = try [client.expect("page"), client.expect("page")]
        var iterator = messages.makeAsyncIterator()
        for page in pages {
            let message = try #require(await iterator.next())
            #expect(message.subject == "feedd.test.pages.users.\(page["generation"]?.integerValue ?? 0).\(page["page"]?.integerValue ?? 0)")
            #expect(message.payload.last == UInt8(ascii: "\n"))
            #expect(try JSONValue(parsing: message.payload) == page)
        }
        await reader.close()
    }

    @Test func an_instance_whose_definition_differs_serves_the_feed_alone_and_says_why() throws {
        let upstream = try LoopbackUpstream()
        let nats = try NATSServer()
        defer { nats.stop() }
        _ = try Self.instance([nats.url], upstream)
        let other = try Self.instance([nats.url], upstream, waitUntilJoined: false, feeds: """
            [feeds.users]
            source = "randomuser"
            url = "\(upstream.baseURL)/api/"
            results = 5
            """)
        try other.log.waitForLine(containing: "serving this feed alone")
        #expect(try Self.status(other)["cluster"]?["alone"] == ["users"])
        let client = try other.connect()
        try client.send("next users 1")
        try client.expect("subscribed")
        #expect(try client.expect("page")["items"]?.arrayValue?.count == 5)
    }

    @Test func a_reload_that_changes_a_feeds_sharing_applies_it_and_one_that_changes_the_cluster_says_it_takes_a_restart() throws {
        let upstream = try LoopbackUpstream()
        let nats = try NATSServer()
        defer { nats.stop() }
        let daemon = try Self.instance([nats.url], upstream)
        let client = try daemon.connect()
        try client.send("next users")
        try client.expect("subscribed")
        try client.expect("page")
        let shared = try String(contentsOfFile: daemon.configPath, encoding: .utf8)
        try shared.replacingOccurrences(of: #"name = "test""#, with: #"name = "other""#)
            .appending("\nshared = false\n")
            .write(toFile: daemon.configPath, atomically: true, encoding: .utf8)
        daemon.send(signal: SIGHUP)
        _ = try daemon.log.waitForLine(containing: "[cluster] changed: the daemon keeps the one it started with until it is restarted")
        _ = try daemon.log.waitForLine(containing: "feed users is now served by this instance alone; its subscribers continue on a new generation")
        try client.expect("refreshed")
        #expect(try Self.status(daemon)["cluster"]?["joined"] == [])

        // And back: the feed joins the fleet again, on the fleet's generation.
        try shared.write(toFile: daemon.configPath, atomically: true, encoding: .utf8)
        daemon.send(signal: SIGHUP)
        _ = try daemon.log.waitForLine(containing: "feed users is now shared with the fleet; its subscribers continue on a new generation")
        _ = try Self.waitForCluster(daemon, "join users again") { $0["joined"] == ["users"] }
        try client.send("next users")
        #expect(try client.read(until: "page", timeout: .seconds(10)).found["type"] == "page")
    }

    @Test func a_page_one_instance_publishes_reaches_a_follower_on_another_at_once() throws {
        let upstream = try LoopbackUpstream()
        let nats = try NATSServer()
        defer { nats.stop() }
        // A long lease: the follower's instance, waiting for the page, looks again only every second.
        let fetcher = try Self.instance([nats.url], upstream, lease: "10s")
        let followerInstance = try Self.instance([nats.url], upstream, lease: "10s")
        upstream.setLatency(.milliseconds(1_500))
        let reader = try fetcher.connect()
        try reader.send("next users 1")
        try upstream.waitForRequests(1)
        let follower = try followerInstance.connect()
        #expect(try follower.request(["op": "subscribe", "feed": "users", "follow": true])["type"] == "subscribed")
        _ = try reader.read(until: "page")
        let fetchedAt = ContinuousClock.now
        let pushed = try follower.expect("page", timeout: .seconds(3))
        #expect(pushed["page"] == 1)
        #expect(ContinuousClock.now - fetchedAt < .milliseconds(250))
        #expect(upstream.received.filter { $0.query["page"] == "1" }.count == 1)
    }

    @Test func a_polled_source_is_looked_at_by_one_instance_at_a_time_and_its_new_page_fetched_once() throws {
        let upstream = try LoopbackUpstream()
        upstream.setFeedPages([["a"], ["b"]])
        let nats = try NATSServer()
        defer { nats.stop() }
        let feeds = """
            [feeds.donny]
            source = "s3"
            url = "\(upstream.baseURL)/feed-{page}.json"
            poll = "300ms"
            retry_max_delay = "300ms"
            """
        let instances = try (0..<3).map { _ in try Self.instance([nats.url], upstream, lease: "2s", feeds: feeds) }
        let followers = try instances.map { instance in
            let follower = try instance.connect()
            try follower.send("follow donny")
            try follower.expect("subscribed")
            #expect(try JSONValue.pageNumbers([follower.expect("page"), follower.expect("page")]) == [1, 2])
            return follower
        }
        // Each look re-reads the last page: three instances looking on their own would make
        // about 3 × 10 of them in 3 s.
        let looksBefore = upstream.received.filter { $0.path == "/feed-2.json" }.count
        usleep(3_000_000)
        let looks = upstream.received.filter { $0.path == "/feed-2.json" }.count - looksBefore
        #expect(looks >= 5 && looks <= 14, "\(looks) looks in 3 s at poll = 300ms")

        upstream.setFeedPages([["a"], ["b"], ["c"]])
        for follower in followers {
            #expect(try follower.expect("page", timeout: .seconds(3))["page"] == 3)
        }
        #expect(upstream.received.filter { $0.path == "/feed-3.json" }.count == 1)
    }

    @Test func a_refresh_on_one_instance_reaches_subscribers_on_every_instance_within_a_second() throws {
        let upstream = try LoopbackUpstream()
        let nats = try NATSServer()
        defer { nats.stop() }
        let first = try Self.instance([nats.url], upstream)
        let second = try Self.instance([nats.url], upstream)
        let subscriber = try second.connect()
        let subscribed = try subscriber.request(["op": "subscribe", "feed": "users"])
        let generation = try #require(subscribed["generation"]?.integerValue)
        // The refresher reads the feed too: its own `refreshed` answers its request, with its id.
        let refresher = try first.connect()
        #expect(try refresher.request(["op": "subscribe", "feed": "users"])["type"] == "subscribed")
        let refreshed = try refresher.request(["op": "refresh", "feed": "users", "id": 7])
        #expect(refreshed["type"] == "refreshed")
        #expect(refreshed["id"] == 7)
        #expect(refreshed["generation"]?.integerValue == generation + 1)
        let heard = try subscriber.expect("refreshed", timeout: .seconds(1))
        #expect(heard["generation"] == refreshed["generation"])
    }

    @Test func a_consumer_resumes_on_another_instance_which_takes_it_over() throws {
        let upstream = try LoopbackUpstream()
        let nats = try NATSServer()
        defer { nats.stop() }
        let first = try Self.instance([nats.url], upstream)
        let second = try Self.instance([nats.url], upstream)
        let reader = try first.connect()
        #expect(try reader.request(["op": "subscribe", "feed": "users", "consumer": "app"])["after"] == 0)
        try reader.send("next users 2")
        #expect(try JSONValue.pageNumbers([reader.expect("page"), reader.expect("page")]) == [1, 2])
        #expect(try reader.request(["op": "ack", "feed": "users", "page": 2])["page"] == 2)

        let elsewhere = try second.connect()
        #expect(try elsewhere.request(["op": "subscribe", "feed": "users", "consumer": "app"])["after"] == 2)
        let dropped = try reader.expect("unsubscribed", timeout: .seconds(2))
        #expect(dropped["reason"] == "takeover")
        try elsewhere.send("next users 1")
        #expect(try elsewhere.expect("page")["page"] == 3)
    }

    @Test func an_instance_killed_mid_fetch_delays_the_page_by_at_most_the_lease() throws {
        let upstream = try LoopbackUpstream()
        let nats = try NATSServer()
        defer { nats.stop() }
        let doomed = try Self.instance([nats.url], upstream)
        let survivor = try Self.instance([nats.url], upstream)
        upstream.setLatency(.seconds(30))
        let doomedClient = try doomed.connect()
        try doomedClient.send("next users 1")
        try upstream.waitForRequests(1)
        // The survivor's reader waits for the holder's publication, which never comes.
        let reader = try survivor.connect()
        try reader.send("next users 1")
        try reader.expect("subscribed")
        doomed.send(signal: SIGKILL)
        _ = try doomed.waitForExit()
        upstream.setLatency(.zero)
        let killedAt = ContinuousClock.now
        let page = try reader.expect("page", timeout: .seconds(5))
        #expect(page["page"] == 1)
        // The lease is 1 s; the survivor looks again at least every second.
        #expect(ContinuousClock.now - killedAt < .milliseconds(2_500))
        #expect(upstream.received.count == 2)
    }

    @Test func with_every_nats_server_down_consumers_and_refresh_answer_store_failed_then_the_fleet_rejoins_with_every_cursor()
        throws
    {
        let upstream = try LoopbackUpstream()
        let nats = try NATSServer()
        defer { nats.stop() }
        let first = try Self.instance([nats.url], upstream)
        let second = try Self.instance([nats.url], upstream)
        let reader = try first.connect()
        _ = try reader.request(["op": "subscribe", "feed": "users", "consumer": "app"])
        try reader.send("next users 2")
        _ = try (reader.expect("page"), reader.expect("page"))
        #expect(try reader.request(["op": "ack", "feed": "users", "page": 2])["page"] == 2)

        nats.stop()
        try Self.waitForCluster(first, "disconnected")
        // Pages are still served, fetched here alone under a local generation, never one of the
        // fleet's: the reader is told so, and starts at its page 1. Acknowledging them is not possible.
        try reader.send("next users 1")
        let local = try #require(try reader.expect("refreshed")["generation"]?.integerValue)
        #expect(local > 1 << 40)
        let alone = try reader.expect("page")
        #expect(alone["page"] == 1 && alone["generation"]?.integerValue == local)
        #expect(try reader.request(["op": "ack", "feed": "users", "page": 1])["code"] == "store_failed")
        // The implicit ack of the next `next` cannot be stored either: no page is sent.
        #expect(try reader.request("next users 1")["code"] == "store_failed")
        let other = try first.connect()
        #expect(try other.request(["op": "subscribe", "feed": "users", "consumer": "other"])["code"] == "store_failed")
        #expect(try other.request(["op": "refresh", "feed": "users"])["code"] == "store_failed")
        #expect(try other.request(["op": "forget", "feed": "users", "consumer": "app"])["code"] == "store_failed")
        // Readers without a consumer are still served, from this instance alone.
        let anonymous = try first.connect()
        try anonymous.send("next users 1")
        try anonymous.expect("subscribed")
        #expect(try anonymous.expect("page")["page"] == 1)

        try nats.start()
        try Self.waitForCluster(first, "connected")
        try Self.waitForCluster(second, "connected")
        let resumed = try second.connect()
        #expect(try resumed.request(["op": "subscribe", "feed": "users", "consumer": "app"])["after"] == 2)
    }

    @Test func a_frozen_nats_server_does_not_delay_answers_to_local_clients() throws {
        let upstream = try LoopbackUpstream()
        let nats = try NATSServer()
        defer {
            nats.thaw()
            nats.stop()
        }
        let daemon = try Self.instance([nats.url], upstream)
        let client = try daemon.connect()
        try client.send("next users 2")
        _ = try (client.expect("subscribed"), client.expect("page"), client.expect("page"))

        nats.freeze()
        let frozenUntil = ContinuousClock.now + .seconds(5)
        var slowest = Duration.zero
        var round = 0
        while ContinuousClock.now < frozenUntil {
            let reader = try daemon.connect()
            let asked = ContinuousClock.now
            #expect(try reader.request(["op": "ping"])["type"] == "pong")
            try reader.send("next users 1")
            try reader.expect("subscribed", timeout: .seconds(1))
            #expect(try reader.expect("page", timeout: .seconds(1))["page"] == 1)
            #expect(try Self.status(daemon)["type"] == "status")
            slowest = max(slowest, ContinuousClock.now - asked)
            round += 1
            usleep(200_000)
        }
        #expect(round > 10)
        #expect(slowest < .milliseconds(250))
    }

    /// Subscribes as `consumer` on a new connection, again every 200 ms while the answer is an
    /// error (a JetStream cluster still electing its leaders answers none in time).
    static func subscribeWhileElecting(_ daemon: DaemonProcess, as consumer: String) throws -> (client: TestClient, answer: JSONValue) {
        let deadline = ContinuousClock.now + .seconds(20)
        while true {
            let client = try daemon.connect()
            let answer = try client.request(["op": "subscribe", "feed": "users", "consumer": .string(consumer)])
            if answer["type"] == "subscribed" { return (client, answer) }
            guard ContinuousClock.now < deadline else { throw TestFailure("consumer \(consumer) could not subscribe: \(answer)") }
            usleep(200_000)
        }
    }

    /// The JetStream streams of the fleet named "test": its pages, and its buckets' streams.
    static let streams = ["feedd-test-pages"] + ["leases", "generations", "cursors", "consumers"].map { "KV_feedd-test-\($0)" }

    /// Waits until every stream of the fleet named "test" has a leader other than `gone`: until
    /// then, a feed whose lease or page the fleet cannot answer is served alone, on a generation
    /// of its own (SPEC §8), and its subscribers are moved there with a `refreshed`.
    static func waitForStreamLeaders(_ nodes: [NATSServer], other gone: NATSServer? = nil) async throws {
        let observer = try await NATSClient.connect(NATSClient.Options(servers: nodes.filter { $0 !== gone }.map(\.url), name: "observer"))
        defer { Task { await observer.close() } }
        let deadline = ContinuousClock.now + .seconds(30)
        for stream in streams {
            while true {
                let leader = try? await observer.streamLeader(stream)
                if let leader, leader != gone?.name { break }
                guard ContinuousClock.now < deadline else { throw TestFailure("stream \(stream) has no leader but \(leader ?? "none")") }
                try await Task.sleep(for: .milliseconds(100))
            }
        }
    }

    @Test func with_one_nats_node_of_three_stopped_nothing_is_lost_and_service_continues() async throws {
        let upstream = try LoopbackUpstream()
        let nodes = try NATSServer.cluster(of: 3)
        defer { for node in nodes { node.stop() } }
        let urls = nodes.map(\.url)
        let first = try Self.instance(urls, upstream, replicas: 3)
        let second = try Self.instance(urls, upstream, replicas: 3)
        // While the cluster elects its leaders, a feed is served alone, on a generation of its
        // own, and moves its subscribers to the fleet's (a `refreshed`) once it joins: the pages
        // counted here are the fleet's, asked for once every stream has its leader.
        for instance in [first, second] { _ = try Self.waitForCluster(instance, "join users", within: .seconds(20)) { $0["joined"] == ["users"] } }
        try await Self.waitForStreamLeaders(nodes)
        let (reader, subscribed) = try Self.subscribeWhileElecting(first, as: "app")
        #expect(subscribed["after"] == 0)
        try reader.send("next users 2")
        #expect(try JSONValue.pageNumbers([reader.expect("page"), reader.expect("page")]) == [1, 2])
        #expect(try reader.request(["op": "ack", "feed": "users", "page": 2])["page"] == 2)

        nodes[0].stop()
        try await Self.waitForStreamLeaders(nodes, other: nodes[0])
        let (elsewhere, resumed) = try Self.subscribeWhileElecting(second, as: "app")
        #expect(resumed["after"] == 2)
        try elsewhere.send("next users 1")
        #expect(try elsewhere.expect("page")["page"] == 3)
        #expect(upstream.received.count == 3)
    }
}
