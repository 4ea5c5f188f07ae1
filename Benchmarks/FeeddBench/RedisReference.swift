import FeedClient
import Foundation
import Glibc
import TestSupport

/// Redis pub/sub over a Unix socket, fed the same page bytes, as the yardstick for fan-out.
enum RedisReference {
    struct FanOut {
        let bytesPerSecond: Double
        /// Another connection's `PING` round trip meanwhile, p99 in ms: Redis's own fairness in
        /// the same load, feedd's `ping` figure's peer.
        let pingP99: Double
        let pings: Int
    }

    /// Bytes per second delivered to `subscribers` for `messages` publishes of `payload`, or a
    /// reason when redis-server is not installed.
    static func fanOut(subscribers: Int, messages: Int, payload: [UInt8]) throws -> Result<FanOut, SkipReason> {
        guard let server = serverPath else {
            return .failure(SkipReason(description: "redis-server is not installed (apt-get install redis-server)"))
        }
        let directory = try TemporaryDirectory()
        let socketPath = directory.path("redis.sock")
        let redis = try ReferenceServer(
            server,
            [
                "--port", "0", "--unixsocket", socketPath, "--save", "", "--appendonly", "no", "--maxclients", "20000",
                "--client-output-buffer-limit", "pubsub 0 0 0", "--dir", directory.path,
            ], ready: "ready to accept connections")
        defer { redis.stop() }

        let connections = try (0..<subscribers).map { _ in try FeedConnection(path: socketPath) }
        for connection in connections { try connection.sendRaw(command(["SUBSCRIBE", "bench"])) }
        let counter = LineCounter(connections.map(\.descriptor))
        let subscribeReply = Array("*3\r\n$9\r\nsubscribe\r\n$5\r\nbench\r\n:1\r\n".utf8)
        guard counter.read(bytes: subscribeReply.count, deadline: .now + .seconds(30)) else { throw TestFailure("SUBSCRIBE timed out") }
        let message = Array("*3\r\n$7\r\nmessage\r\n$5\r\nbench\r\n$\(payload.count)\r\n".utf8) + payload + Array("\r\n".utf8)
        let publisher = try FeedConnection(path: socketPath)
        let publish = command(["PUBLISH", "bench"], payload: payload)
        let pinger = try PingTimer(redisAt: socketPath)
        let started = ContinuousClock.now
        for _ in 0..<messages { try publisher.sendRaw(publish) }
        guard counter.read(bytes: subscribeReply.count + messages * message.count, deadline: .now + .seconds(120)) else {
            throw TestFailure("Redis fan-out timed out")
        }
        let elapsed = (ContinuousClock.now - started).seconds
        let pings = pinger.stop()
        withExtendedLifetime((connections, publisher)) {}
        return .success(FanOut(bytesPerSecond: Double(subscribers * messages * message.count) / elapsed, pingP99: quantile(pings, 0.99), pings: pings.count))
    }

    /// Where redis-server is installed, if it is.
    static var serverPath: String? {
        ["/usr/bin/redis-server", "/usr/local/bin/redis-server"].first { FileManager.default.isExecutableFile(atPath: $0) }
    }

    struct SkipReason: Error, CustomStringConvertible {
        let description: String
    }

    private static func command(_ words: [String], payload: [UInt8]? = nil) -> [UInt8] {
        var parts = words.map { Array($0.utf8) }
        if let payload { parts.append(payload) }
        var bytes = Array("*\(parts.count)\r\n".utf8)
        for part in parts { bytes += Array("$\(part.count)\r\n".utf8) + part + Array("\r\n".utf8) }
        return bytes
    }
}

/// A reference server the benchmark starts, waits for until it prints its `ready` line, and kills.
struct ReferenceServer {
    private let process: Process

    init(_ executable: String, _ arguments: [String], ready: String) throws {
        process = Process()
        process.executableURL = URL(fileURLWithPath: executable)
        process.arguments = arguments
        let (output, _) = try ChildProcess.launch(process)
        let log = LogCollector()
        log.collect(from: output)
        do {
            try log.waitForLine(containing: ready)
        } catch {
            stop()
            throw error
        }
    }

    var processIdentifier: Int32 { process.processIdentifier }

    /// SIGKILL, not SIGTERM: the benchmark's code may run on a Dispatch worker thread (it does
    /// after the fleet scenario), which blocks SIGTERM, and a server started from it inherits the
    /// block: the second run of `feedd-bench` waited for Redis forever. No reference keeps
    /// anything to save.
    func stop() {
        kill(process.processIdentifier, SIGKILL)
        process.waitUntilExit()
    }
}
