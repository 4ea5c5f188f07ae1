import FeedClient
import FeedKit
import Foundation
import TestSupport

/// Durable state under load: how many acknowledgements a second the store makes durable, and
/// what that does to a prefetched `next` on another feed meanwhile.
enum StateScenarios {
    struct AckStorm {
        let acksPerSecond: Double
        /// `next` on a prefetched feed while the consumers ack (ms).
        let nextP50: Double
        let nextP99: Double
        /// The daemon's CPU time per ack, all threads and its main thread alone (µs); the `next`
        /// each consumer sends before its ack is counted in it.
        let cpuPerAck: Double
        let mainThreadCPUPerAck: Double
    }

    /// `consumers` durable consumers of one file feed, each acking page after page as fast as the
    /// daemon confirms, for `seconds`; one more client times `next` on a prefetched feed.
    static func ackStorm(consumers: Int = 1_000, seconds: Double = 8) throws -> AckStorm {
        let directory = try TemporaryDirectory()
        let path = directory.path("numbers.ndjson")
        try (1...20_000).map(String.init).joined(separator: "\n").appending("\n").write(toFile: path, atomically: false, encoding: .utf8)
        let upstream = try LoopbackUpstream()
        upstream.setLatency(.milliseconds(100))
        let daemon = try DaemonProcess(config: """
            [daemon]
            max_clients = 20000
            log_level = "notice"

            [feeds.numbers]
            source = "file"
            path = "\(path)"
            page_size = 1
            prefetch = 4
            cache_pages = 4096

            [feeds.users]
            source = "randomuser"
            url = "\(upstream.baseURL)/api/"
            results = 20
            seed = "bench"
            prefetch = 3
            cache_pages = 4096
            """, directory: directory)
        let connections = try (0..<consumers).map { _ in try FeedConnection(path: daemon.socketPath) }
        let counter = LineCounter(connections.map(\.descriptor))
        guard counter.read(untilEachHas: 1, deadline: .now + .seconds(30)) else { throw TestFailure("hello timed out") }
        for (index, connection) in connections.enumerated() {
            try connection.send(#"{"op":"subscribe","feed":"numbers","consumer":"c\#(index)"}"#)
        }
        guard counter.read(untilEachHas: 2, deadline: .now + .seconds(60)) else { throw TestFailure("subscribe timed out") }

        // Meanwhile: one reader of a prefetched feed, one `next` every 150 ms (the upstream takes
        // 100 ms a page, so prefetch keeps ahead of it).
        let latencies = LockedSamples()
        let stop = LockedFlag()
        let socketPath = daemon.socketPath
        let warmedUp = LockedFlag()
        let timing = Thread {
            // The reader belongs to this thread alone.
            guard let reader = try? TestClient(path: socketPath), (try? reader.send("next users")) != nil,
                (try? reader.read(until: "page", timeout: .seconds(30))) != nil
            else { return }
            warmedUp.set()
            while !stop.isSet {
                Thread.sleep(forTimeInterval: 0.15)
                let started = ContinuousClock.now
                guard (try? reader.send("next users")) != nil, let line = try? reader.connection.readLine(),
                    line.starts(with: Array(#"{"type":"page""#.utf8))
                else { return }
                latencies.append((ContinuousClock.now - started).milliseconds)
            }
        }
        timing.start()
        while !warmedUp.isSet, !timing.isFinished { Thread.sleep(forTimeInterval: 0.01) }

        // Each round: every consumer takes its next page and acknowledges it (2 lines back each).
        let started = ContinuousClock.now
        let cpuBefore = (all: try daemon.cpuSeconds(), main: try daemon.cpuSeconds(mainThreadOnly: true))
        var rounds = 0
        var lines = 2
        while (ContinuousClock.now - started).seconds < seconds {
            rounds += 1
            for connection in connections { try connection.send("next numbers\nack numbers \(rounds)") }
            lines += 2
            guard counter.read(untilEachHas: lines, deadline: .now + .seconds(60)) else { throw TestFailure("acks timed out") }
        }
        let elapsed = (ContinuousClock.now - started).seconds
        let acks = Double(rounds * consumers)
        let cpuPerAck = (try daemon.cpuSeconds() - cpuBefore.all) * 1e6 / acks
        let mainThreadCPUPerAck = (try daemon.cpuSeconds(mainThreadOnly: true) - cpuBefore.main) * 1e6 / acks
        stop.set()
        while !timing.isFinished { Thread.sleep(forTimeInterval: 0.01) }
        let samples = latencies.values
        withExtendedLifetime(connections) {}
        return AckStorm(
            acksPerSecond: acks / elapsed, nextP50: quantile(samples, 0.5), nextP99: quantile(samples, 0.99),
            cpuPerAck: cpuPerAck, mainThreadCPUPerAck: mainThreadCPUPerAck)
    }
}

/// Samples one thread adds while another reads them at the end.
private final class LockedSamples: @unchecked Sendable {
    // Sendable by its lock: every access to `samples` holds it.
    private let lock = NSLock()
    private var samples: [Double] = []

    func append(_ value: Double) { lock.withLock { samples.append(value) } }
    var values: [Double] { lock.withLock { samples } }
}

private final class LockedFlag: @unchecked Sendable {
    // Sendable by its lock, as above.
    private let lock = NSLock()
    private var value = false

    func set() { lock.withLock { value = true } }
    var isSet: Bool { lock.withLock { value } }
}
