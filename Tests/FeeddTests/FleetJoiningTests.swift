import FeedKit
import Foundation
import Testing
import TestSupport

/// Joining never mixes generations (issue 22, the engine's part): an instance that serves a shared
/// feed alone (started while NATS is down) serves it under a local generation, numbered past every
/// generation a fleet uses; once it joins, its readers get `refreshed` into the fleet's generation,
/// and no (generation, page) is ever served with two item lists.
@Suite(.serialized) struct FleetJoiningTests {
    /// A seedless randomuser feed: every generation's seed is random, so pages of two
    /// generations hold different users.
    static func instance(_ nats: String, _ upstream: LoopbackUpstream, waitUntilJoined: Bool) throws -> DaemonProcess {
        try FleetTests.instance([nats], upstream, waitUntilJoined: waitUntilJoined, feeds: """
            [feeds.users]
            source = "randomuser"
            url = "\(upstream.baseURL)/api/"
            results = 3
            prefetch = 0
            retry_max_delay = "300ms"
            """)
    }

    @Test func an_instance_started_while_nats_is_down_serves_alone_under_a_local_generation_then_joins() throws {
        let upstream = try LoopbackUpstream()
        let nats = try NATSServer()
        defer { nats.stop() }
        let joined = try Self.instance(nats.url, upstream, waitUntilJoined: true)
        let fleetReader = try joined.connect()
        try fleetReader.send("next users 2")
        let fleetGeneration = try #require(try fleetReader.expect("subscribed")["generation"]?.integerValue)
        let fleetPages = try (1...2).map { _ in try fleetReader.expect("page") }
        #expect(fleetGeneration <= 1 << 40)

        nats.stop()
        let alone = try Self.instance(nats.url, upstream, waitUntilJoined: false)
        let reader = try alone.connect()
        try reader.send("next users 1")
        let local = try #require(try reader.expect("subscribed")["generation"]?.integerValue)
        #expect(local > 1 << 40, "served alone: not a generation the fleet uses")
        let served = try reader.expect("page")
        #expect(served["generation"]?.integerValue == local && served["page"] == 1)
        #expect(FleetTests.ids(served) != FleetTests.ids(fleetPages[0]), "its own seed, as alone it must")

        try nats.start()
        try alone.log.waitForLine(containing: "joined the fleet")
        let refreshed = try reader.expect("refreshed", timeout: .seconds(15))
        #expect(refreshed["generation"]?.integerValue == fleetGeneration)
        try reader.send("next users 2")
        let rejoined = try (1...2).map { _ in try reader.expect("page") }
        #expect(rejoined.map { $0["generation"]?.integerValue } == [fleetGeneration, fleetGeneration])
        #expect(rejoined.map(FleetTests.ids) == fleetPages.map(FleetTests.ids), "the fleet's pages, the same users")
    }
}
