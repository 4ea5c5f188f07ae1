import FeedClient
import Foundation
import Glibc
import TestSupport

/// The same page bytes written by C straight to many Unix sockets (CReferences/fanout-writer.c)
/// and read by the same ``LineCounter`` as feedd's followers: the bandwidth a fan-out can reach
/// on this machine, which the fan-out's own figure is a fraction of.
enum RawFanOut {
    /// Bytes per second delivered to `subscribers` sockets, each sent `payload` `messages` times.
    static func bytesPerSecond(subscribers: Int, messages: Int, payload: [UInt8]) throws -> Double {
        let writer = try CReference.build("fanout-writer.c")
        let directory = try TemporaryDirectory()
        let socketPath = directory.path("raw.sock")
        let payloadPath = directory.path("page.json")
        guard FileManager.default.createFile(atPath: payloadPath, contents: Data(payload)) else { throw TestFailure("cannot write \(payloadPath)") }
        let server = try ReferenceServer(writer.executable, [socketPath, String(subscribers), payloadPath, String(messages)], ready: "listening")
        defer { server.stop() }

        let connections = try (0..<subscribers).map { _ in try FeedConnection(path: socketPath) }
        let counter = LineCounter(connections.map(\.descriptor))
        let started = ContinuousClock.now
        try connections[0].sendRaw([UInt8(ascii: "g")])
        guard counter.read(bytes: messages * payload.count, deadline: .now + .seconds(120)) else { throw TestFailure("the raw fan-out timed out") }
        let elapsed = (ContinuousClock.now - started).seconds
        withExtendedLifetime(connections) {}
        return Double(subscribers * messages * payload.count) / elapsed
    }
}
