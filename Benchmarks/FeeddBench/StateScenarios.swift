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
        let nextMax: Double
        /// How many `next`s were timed.
        let samples: Int
        /// The daemon's CPU time per ack, all threads and its main thread alone (µs); the `next`
        /// each consumer sends before its ack is counted in it.
        let cpuPerAck: Double
        let mainThreadCPUPerAck: Double
        /// Another connection's `ping` round trip during the storm, p99 in ms.
        let pingP99: Double
    }

    /// The records of the prefetched feed that is timed during a storm, `usersPerPage` to a page.
    static let usersPerPage = 20

    /// The daemon of an ack storm, its files written into `directory`: the feed `numbers`,
    /// one-line pages of the numbers 1...`entries`, which the consumers ack; and the feed
    /// `users`, prefetched, whose `next` is timed meanwhile.
    static func stormConfig(in directory: TemporaryDirectory, entries: Int) throws -> String {
        let path = directory.path("numbers.ndjson")
        try (1...entries).map(String.init).joined(separator: "\n").appending("\n").write(toFile: path, atomically: false, encoding: .utf8)
        let usersPath = directory.path("users.ndjson")
        try writeUsers(to: usersPath)
        return """
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
        source = "file"
        path = "\(usersPath)"
        page_size = \(usersPerPage)
        prefetch = 8
        cache_pages = 4096
        """
    }

    /// User records like randomuser's, about 5 KB a page of `usersPerPage`, one a line. A file,
    /// not a loopback upstream: a fetch must keep ahead of one `next` every 10 ms however busy
    /// the machine is, or the figure would time the upstream, not the daemon.
    static func writeUsers(to path: String) throws {
        try (1...20_000).map { index in
            #"{"gender":"female","name":{"title":"Mx","first":"Zoë \#(index)","last":"O'Brien"},"email":"user\#(index)@example.com","#
                + #""location":{"city":"Zürich"},"login":{"uuid":"bench-\#(index)","username":"user_\#(index)"},"dob":{"age":30},"nat":"CH"}"#
        }.joined(separator: "\n").appending("\n").write(toFile: path, atomically: false, encoding: .utf8)
    }

    /// `consumers` durable consumers of one file feed, each acking page after page as fast as the
    /// daemon confirms, for `seconds`; meanwhile other clients time `next` on a prefetched feed.
    static func ackStorm(consumers: Int = 1_000, seconds: Double = 8) throws -> AckStorm {
        let directory = try TemporaryDirectory()
        let daemon = try DaemonProcess(config: stormConfig(in: directory, entries: 20_000), directory: directory)
        let connections = try (0..<consumers).map { _ in try FeedConnection(path: daemon.socketPath) }
        let counter = LineCounter(connections.map(\.descriptor))
        guard counter.read(untilEachHas: 1, deadline: .now + .seconds(30)) else { throw TestFailure("hello timed out") }
        for (index, connection) in connections.enumerated() {
            try connection.send(#"{"op":"subscribe","feed":"numbers","consumer":"c\#(index)"}"#)
        }
        guard counter.read(untilEachHas: 2, deadline: .now + .seconds(60)) else { throw TestFailure("subscribe timed out") }

        // Meanwhile: 15 readers of the prefetched feed, each asking for a page every 150 ms as a
        // person scrolling might, in turn: one `next` every 10 ms, some 750 timed in all, so that
        // the p99 is not just the slowest. (One reader asking every 10 ms would ask more often
        // than each consumer acks, and the loop's turns rightly serve first the clients that
        // asked least lately.)
        let latencies = Locked<[Double]>([])
        let stop = Locked(false)
        let socketPath = daemon.socketPath
        let warmedUp = Locked(false)
        let timing = Thread {
            // The readers belong to this thread alone.
            guard let readers = try? (0..<15).map({ _ in try TestClient(path: socketPath) }),
                readers.allSatisfy({ reader in
                    (try? reader.send("next users")) != nil && (try? reader.read(until: "page", timeout: .seconds(30))) != nil
                })
            else { return }
            warmedUp.withLock { $0 = true }
            for reader in readers.cycled() {
                guard !stop.withLock({ $0 }) else { return }
                Thread.sleep(forTimeInterval: 0.01)
                let started = ContinuousClock.now
                guard (try? reader.send("next users")) != nil, let line = try? reader.connection.readLine(),
                    line.starts(with: Array(#"{"type":"page""#.utf8))
                else { return }
                latencies.withLock { $0.append((ContinuousClock.now - started).milliseconds) }
            }
        }
        timing.start()
        while !warmedUp.withLock({ $0 }), !timing.isFinished { Thread.sleep(forTimeInterval: 0.01) }

        // Each round: every consumer takes its next page and acknowledges it (2 lines back each).
        let pinger = try PingTimer(daemon)
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
        let pings = pinger.stop()
        stop.withLock { $0 = true }
        while !timing.isFinished { Thread.sleep(forTimeInterval: 0.01) }
        let samples = latencies.withLock { $0 }
        withExtendedLifetime(connections) {}
        return AckStorm(
            acksPerSecond: acks / elapsed, nextP50: quantile(samples, 0.5), nextP99: quantile(samples, 0.99),
            nextMax: samples.max() ?? 0, samples: samples.count, cpuPerAck: cpuPerAck, mainThreadCPUPerAck: mainThreadCPUPerAck,
            pingP99: quantile(pings, 0.99))
    }
}

extension Array {
    /// The elements over and over, for as long as the caller iterates.
    fileprivate func cycled() -> some Sequence<Element> {
        sequence(state: 0) { index in
            defer { index = (index + 1) % count }
            return isEmpty ? nil : self[index]
        }
    }
}
