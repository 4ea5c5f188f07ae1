import FeedCluster
import FeedKit
import Foundation
import TestSupport

/// A plain NATS client on a fleet's cluster that is not an instance: it writes the fleet's
/// subjects and buckets directly, as anyone allowed to publish there could.
struct FleetForger {
    let client: NATSClient
    let fleet: String

    static func connect(_ url: String, fleet: String = "test", configure: (inout NATSClient.Options) -> Void = { _ in }) async throws -> FleetForger {
        var options = NATSClient.Options(servers: [url], name: "forger")
        configure(&options)
        let client = try await NATSClient.connect(options)
        _ = try await next(of: client.states(), within: .seconds(10), "the forger's connection") { $0 == .connected }
        return FleetForger(client: client, fleet: fleet)
    }

    func bucket(_ kind: String) async throws -> KeyValueBucket {
        try await client.keyValueBucket(BucketConfiguration(name: "feedd-\(fleet)-\(kind)", replicas: 1))
    }

    /// Writes `value` under `key` in the fleet's bucket of `kind` (`leases`, `cursors`, …).
    func put(_ kind: String, _ key: String, _ value: String) async throws {
        _ = try await bucket(kind).put(key, value: Array(value.utf8))
    }

    /// The fleet's generation record of `feed`, as JSON.
    func generation(of feed: String) async throws -> JSONValue? {
        try await bucket("generations").entry(feed).map { try JSONValue(parsing: $0.value) }
    }

    /// Publishes `line` on page `page`'s subject, with `header` as its `Feedd-Page` header.
    func publishPage(feed: String = "users", generation: Int, page: Int, line: String, header: String?) async throws {
        _ = try await client.publish(
            subject: "feedd.\(fleet).pages.\(feed).\(generation).\(page)", payload: Array(line.utf8),
            headers: header.map { ["Feedd-Page": $0] } ?? [:], messageID: "forged-\(generation)-\(page)-\(UUID())", onlyIfSubjectIsEmpty: false)
    }

    /// A page line as an instance writes it, with one forged item.
    static func pageLine(feed: String = "users", generation: Int, page: Int, id: String = "forged") -> String {
        #"{"type":"page","feed":"\#(feed)","generation":\#(generation),"page":\#(page),"items":[{"id":"\#(id)","data":{"name":"mallory"}}],"last":false}"#
            + "\n"
    }

    static let header = #"{"items":1,"next":"more","source_page":1}"#

    func close() async { await client.close() }
}

extension FleetTests {
    /// The generation `daemon` joined the fleet at, from its log.
    static func joinedGeneration(_ daemon: DaemonProcess) throws -> Int {
        let line = try daemon.log.waitForLine(containing: "joined the fleet")
        guard let number = line.split(separator: " ").last.flatMap({ Int($0) }) else { throw TestFailure("no generation in \(line)") }
        return number
    }

    /// `rejected` of `status`'s cluster object.
    static func rejected(_ daemon: DaemonProcess) throws -> Int64 {
        try status(daemon)["cluster"]?["rejected"]?.integerValue ?? -1
    }
}
