import FeedCluster
import FeedKit
import Foundation
import Testing
import TestSupport

/// SPEC §8 with `[cluster] key_file`: a NATS user who may publish but has no fleet key cannot
/// make any instance serve or store anything, even records that are otherwise perfectly valid.
@Suite(.serialized, .timeLimit(.minutes(3))) struct FleetKeyTests {
    static func keyedInstance(_ nats: NATSServer, _ upstream: LoopbackUpstream, key: String, files: TemporaryDirectory) throws -> DaemonProcess {
        try FleetTests.instance([nats.url], upstream, cluster: "key_file = \"\(try files.write("fleet-\(UUID()).key", key + "\n"))\"")
    }

    @Test func with_a_fleet_key_a_valid_looking_forgery_of_each_kind_is_refused_while_the_fleet_works() async throws {
        let upstream = try LoopbackUpstream()
        let nats = try NATSServer()
        defer { nats.stop() }
        let files = try TemporaryDirectory()
        let key = String(repeating: "5eed", count: 16)
        let first = try Self.keyedInstance(nats, upstream, key: key, files: files)
        let second = try Self.keyedInstance(nats, upstream, key: key, files: files)
        let generation = try FleetTests.joinedGeneration(first)
        let forger = try await FleetForger.connect(nats.url)
        let fingerprint = try #require(try await forger.generation(of: "users")?["fingerprint"]?.stringValue)

        // A consumer reads pages 1 and 2 on the first instance and acknowledges page 1.
        let reader = try first.connect()
        #expect(try reader.request(["op": "subscribe", "feed": "users", "consumer": "app"])["after"] == 0)
        try await forger.publishPage(generation: generation, page: 2, line: FleetForger.pageLine(generation: generation, page: 2), header: FleetForger.header)
        try reader.send("next users 2")
        let pages = try [reader.expect("page"), reader.expect("page")]
        #expect(!pages.flatMap(FleetTests.ids).contains("forged"), "a page without the fleet's seal was served")
        #expect(try reader.request(["op": "ack", "feed": "users", "page": 1])["page"] == 1)

        // Each forgery is a record an instance would write, but for its seal.
        try await forger.put("consumers", "users.app", #"{"feed":"users","consumer":"app","instance":"mallory"}"#)
        try await forger.put("generations", "users", #"{"generation":\#(generation + 1),"seed":"forged","fingerprint":"\#(fingerprint)"}"#)
        try await forger.put("cursors", "users.other", #"{"generation":\#(generation),"page":2}"#)
        // The consumer is neither taken over nor moved to a new generation.
        #expect(try reader.request(["op": "ping"])["type"] == "pong")
        #expect(try reader.request(["op": "ack", "feed": "users", "page": 2])["type"] == "ack")
        let status = try FleetTests.status(first)
        #expect(status["feeds"]?.arrayValue?.first?["generation"]?.integerValue == Int64(generation))

        // The second instance resumes the consumer where it acknowledged, and ignores the forged cursor.
        let elsewhere = try second.connect()
        #expect(try elsewhere.request(["op": "subscribe", "feed": "users", "consumer": "app"])["after"] == 2)
        #expect(try elsewhere.request(["op": "subscribe", "feed": "users", "consumer": "other"])["after"] == 0)
        #expect(try FleetTests.rejected(first) + FleetTests.rejected(second) >= 3)
        // Only the honest instances fetched: page 1 once, page 2 once (the forged one was refused).
        #expect(upstream.received.count == 2)
        await forger.close()
    }
}
