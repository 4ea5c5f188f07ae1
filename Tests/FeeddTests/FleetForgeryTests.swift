import FeedCluster
import FeedKit
import Foundation
import Testing
import TestSupport

/// SPEC §8: a fleet believes nothing it has not checked. Each record an instance reads is
/// forged by a plain NATS client on the fleet's cluster, without credentials or a fleet key;
/// no instance serves, stores or crashes on it, and the honest instances carry on.
@Suite(.serialized, .timeLimit(.minutes(3))) struct FleetForgeryTests {
    /// An instance that joined the fleet of `nats`, and a forger on it.
    struct World {
        let upstream: LoopbackUpstream
        let nats: NATSServer
        let daemon: DaemonProcess
        let generation: Int
        let forger: FleetForger

        static func start() async throws -> World {
            let upstream = try LoopbackUpstream()
            let nats = try NATSServer()
            let daemon = try FleetTests.instance([nats.url], upstream)
            return World(
                upstream: upstream, nats: nats, daemon: daemon, generation: try FleetTests.joinedGeneration(daemon),
                forger: try await FleetForger.connect(nats.url))
        }

        func end() async {
            await forger.close()
            nats.stop()
        }
    }

    /// Pages forged in every way a page can be wrong, each at its own address of the
    /// generation the instance serves, before anyone asks for them.
    static func forgedPages(generation: Int) -> [(line: String, header: String?)] {
        let valid = { (page: Int) in FleetForger.pageLine(generation: generation, page: page) }
        return [
            // Served as is, its second line would reach clients as a message of its own.
            (valid(1) + #"{"type":"bye","reason":"forged"}"# + "\n", FleetForger.header),
            (#"{"type":"page","feed":"users","generation":\#(generation),"page":2,"items":[{"id":"x","data":{}}],"last":false"# + "\n", FleetForger.header),
            (valid(5), FleetForger.header),  // at page 3: its line says page 5
            (#"{"type":"page","feed":"users","generation":\#(generation),"page":4,"items":[{"id":"x","data":{}}],"last":false,"id":"reply"}"# + "\n", FleetForger.header),
            (#"{"type":"page","feed":"users","generation":\#(generation),"page":5,"items":[{"data":{}}],"last":false}"# + "\n", #"{"items":1,"next":"more","source_page":5}"#),
            (valid(6), nil),
            (valid(7), #"{"items":1,"next":"more","source_page":7,"token":"\#(String(repeating: "t", count: 20_000))"}"#),
            (valid(8), #"{"items":4,"next":"more","source_page":8}"#),
            (#"{"type":"page","feed":"users","feed":"users","generation":\#(generation),"page":9,"items":[],"last":false}"# + "\n", #"{"items":0,"next":"more","source_page":9}"#),
            (#"{"type":"page","feed":"users","generation":\#(generation),"page":10,"items":[{"id":7,"data":{}}],"last":false}"# + "\n", FleetForger.header),
        ]
    }

    @Test func a_forged_page_of_any_kind_is_never_served_and_the_page_is_fetched_instead() async throws {
        let world = try await World.start()
        let (upstream, daemon, generation, forger) = (world.upstream, world.daemon, world.generation, world.forger)
        let forged = Self.forgedPages(generation: generation)
        for (index, page) in forged.enumerated() {
            try await forger.publishPage(generation: generation, page: index + 1, line: page.line, header: page.header)
        }

        let client = try daemon.connect()
        try client.send("next users \(forged.count)")
        try client.expect("subscribed")
        for number in 1...forged.count {
            let page = try client.expect("page")
            #expect(page["page"]?.integerValue == Int64(number))
            #expect(!FleetTests.ids(page).contains("forged") && !FleetTests.ids(page).contains("x"), "page \(number): \(page)")
            #expect(page["items"]?.arrayValue?.count == 3)
        }
        // Nothing else came: no forged `bye`, no page beyond those asked for.
        #expect(try client.request(["op": "ping"])["type"] == "pong")
        #expect(upstream.received.count == forged.count)
        #expect(try FleetTests.rejected(daemon) >= Int64(forged.count))
        #expect(daemon.isRunning)
        await world.end()
    }

    /// SPEC §8: a page token is used only as its adapter's own rules allow. A forged page 1 of an
    /// `http` feed whose token names another origin cannot point the page 2 fetch, or the bearer
    /// token, at that origin: the fetch is refused with the error a `Link` header there gets.
    @Test func a_forged_page_token_never_points_a_fetch_or_the_bearer_token_at_another_origin() async throws {
        let home = try LoopbackUpstream()
        let elsewhere = try LoopbackUpstream()
        home.setResource("/posts", .json([["id": 1]], headers: [("Link", "<\(home.baseURL)/posts?page=2>; rel=\"next\"")]))
        let secrets = try TemporaryDirectory()
        let tokenFile = try secrets.writeSecret("api.token", "t0ken-\(UInt32.random(in: 0...UInt32.max))")
        let nats = try NATSServer()
        let daemon = try FleetTests.instance([nats.url], home, feeds: """
            [feeds.users]
            source = "http"
            url = "\(home.baseURL)/posts"
            items = ""
            id = "id"
            next = "link"
            bearer_token_file = "\(tokenFile)"
            prefetch = 0
            retry_max_delay = "500ms"
            """)
        let generation = try FleetTests.joinedGeneration(daemon)
        let forger = try await FleetForger.connect(nats.url)
        let stolen = "\(elsewhere.baseURL)/steal"
        try await forger.publishPage(
            generation: generation, page: 1, line: FleetForger.pageLine(generation: generation, page: 1),
            header: #"{"items":1,"next":"more","source_page":1,"token":"url \#(stolen)"}"#)

        try HTTPTrustEndToEndTests.expectOriginRefused(reading: "users", of: daemon, next: stolen, asked: elsewhere)
        #expect(daemon.isRunning)
        await forger.close()
        nats.stop()
    }

    @Test func a_second_publication_never_replaces_a_page_and_an_instance_joining_later_serves_the_first() async throws {
        let upstream = try LoopbackUpstream()
        let nats = try NATSServer()
        defer { nats.stop() }
        let first = try FleetTests.instance([nats.url], upstream)
        let generation = try FleetTests.joinedGeneration(first)
        let reader = try first.connect()
        try reader.send("next users 1")
        try reader.expect("subscribed")
        let served = try reader.expect("page")

        let forger = try await FleetForger.connect(nats.url)
        await #expect(throws: NATSError.self) {
            try await forger.publishPage(generation: generation, page: 1, line: FleetForger.pageLine(generation: generation, page: 1), header: FleetForger.header)
        }
        let later = try FleetTests.instance([nats.url], upstream)
        let laterReader = try later.connect()
        try laterReader.send("next users 1")
        try laterReader.expect("subscribed")
        #expect(FleetTests.ids(try laterReader.expect("page")) == FleetTests.ids(served))
        #expect(upstream.received.count == 1)
        await forger.close()
    }

    @Test func a_forged_generation_out_of_range_is_not_adopted_and_refresh_still_works() async throws {
        let world = try await World.start()
        let (daemon, generation, forger) = (world.daemon, world.generation, world.forger)
        let fingerprint = try #require(try await forger.generation(of: "users")?["fingerprint"]?.stringValue)
        let subscriber = try daemon.connect()
        #expect(try subscriber.request(["op": "subscribe", "feed": "users"])["generation"]?.integerValue == Int64(generation))
        // Adopted, the next refresh would add one to it and trap.
        try await forger.put("generations", "users", #"{"generation":9223372036854775807,"seed":"s","fingerprint":"\#(fingerprint)"}"#)
        try await forger.put("generations", "users", #"{"generation":1099511627777,"seed":"s","fingerprint":"\#(fingerprint)"}"#)
        let refreshed = try subscriber.request(["op": "refresh", "feed": "users"])
        #expect(refreshed["type"] == "refreshed", "\(refreshed)")
        #expect(refreshed["generation"]?.integerValue == Int64(generation + 1))
        #expect(daemon.isRunning)
        #expect(try FleetTests.rejected(daemon) >= 2)
        await world.end()
    }

    @Test func a_forged_cursor_never_makes_a_consumer_skip_pages_it_did_not_acknowledge() async throws {
        let upstream = try LoopbackUpstream()
        let nats = try NATSServer()
        defer { nats.stop() }
        let first = try FleetTests.instance([nats.url], upstream)
        let second = try FleetTests.instance([nats.url], upstream)
        let generation = try FleetTests.joinedGeneration(first)
        let reader = try first.connect()
        _ = try reader.request(["op": "subscribe", "feed": "users", "consumer": "app"])
        try reader.send("next users 2")
        _ = try (reader.expect("page"), reader.expect("page"))
        #expect(try reader.request(["op": "ack", "feed": "users", "page": 2])["page"] == 2)

        // Without a fleet key a cursor is range-checked: one past every page number, or in a
        // generation the fleet never started, is not resumed from (FleetKeyTests: with a key, none is).
        let forger = try await FleetForger.connect(nats.url)
        for forged in [#"{"generation":\#(generation),"page":2199023255552}"#, #"{"generation":\#(generation + 9),"page":1}"#] {
            try await forger.put("cursors", "users.app", forged)
            let resumed = try second.connect().request(["op": "subscribe", "feed": "users", "consumer": "app"])
            let after = try #require(resumed["after"]?.integerValue)
            #expect(after <= 2, "resumed after page \(after): pages 3 to \(after) were never acknowledged")
        }
        #expect(try FleetTests.rejected(second) >= 2)
        await forger.close()
    }

    @Test func a_forged_lease_that_runs_for_a_day_does_not_stall_its_page() async throws {
        let world = try await World.start()
        let (upstream, daemon, generation, forger) = (world.upstream, world.daemon, world.generation, world.forger)
        let aDayAhead = Int64(Date().timeIntervalSince1970 * 1_000) + 86_400_000
        try await forger.put("leases", "users.\(generation).1", #"{"holder":"mallory","expires_ms":\#(aDayAhead)}"#)
        let client = try daemon.connect()
        try client.send("next users 1")
        try client.expect("subscribed")
        #expect(try client.expect("page", timeout: .seconds(3))["page"] == 1)
        #expect(upstream.received.count == 1)
        await world.end()
    }
}
