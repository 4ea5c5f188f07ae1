import FeedClient
import Foundation
import Glibc
import TestSupport

/// The ack storm against Redis: one C client (CReferences/ack-storm.c) drives feedd and then
/// Redis with the same 1,000 consumers, each taking its next page (entry) and acknowledging it
/// durably, one round trip in flight per consumer; both servers keep their state in a temporary
/// directory on the same disk and sync before they answer.
enum AckStormReference {
    /// What one server did over the timed window.
    struct Storm {
        let acksPerSecond: Double
        /// `fsync` and `fdatasync` calls a second, from `perf stat`'s tracepoints; nil without perf.
        let syncsPerSecond: Double?
        /// Bytes the server caused to be written to storage (/proc/PID/io `write_bytes`) per ack.
        let bytesPerAck: Double
        /// The server's CPU time per ack, all threads (µs).
        let cpuPerAck: Double
        /// One more connection's round trips for a ready page of about 5 KB, one every 10 ms
        /// (feedd: `next` of a prefetched feed; Redis: `XRANGE` of one entry).
        let reader: RoundTrips
        /// Another connection's `ping` (Redis: `PING`), one every millisecond.
        let pinger: RoundTrips

        var acksPerSync: Double? { syncsPerSecond.map { acksPerSecond / $0 } }
    }

    /// A timed connection's round trips in the window, in ms, as the client printed them.
    struct RoundTrips {
        let samples: Int
        let p50: Double
        let p99: Double
        let slowest: Double

        /// From the client's line "NAME SAMPLES P50 P99 MAX"; nil if it is not that.
        init?(line: String) {
            let fields = line.split(separator: " ").dropFirst().compactMap { Double($0) }
            guard fields.count == 4 else { return nil }
            (samples, p50, p99, slowest) = (Int(fields[0]), fields[1], fields[2], fields[3])
        }
    }

    /// What a Redis consumer does each round (see ack-storm.c).
    enum RedisMode: String {
        /// `XREADGROUP` then `XACK`, a consumer group per consumer: Redis Streams' own durable cursor.
        case streams = "redis"
        /// `XRANGE` then `SET` of a cursor key: the least a durable ack can cost Redis.
        case cursorKey = "redis-cursor"

        var label: String {
            switch self {
            case .streams: "Redis Streams (XREADGROUP + XACK)"
            case .cursorKey: "Redis cursor key (XRANGE + SET)"
            }
        }
    }

    static let consumers = 1_000
    static let warmUp = 1.5
    static let seconds = 6.0
    static let entries = 20_000

    /// One round: feedd, then Redis each way, recorded side by side with their ratios; returns
    /// why Redis was skipped, if it was.
    static func run(record: (String, String, Double) -> Void) throws -> String? {
        let feedd = try feedd()
        recordStorm(feedd, as: "feedd", record)
        for mode in [RedisMode.streams, .cursorKey] {
            switch try redis(mode) {
            case .success(let redis):
                recordStorm(redis, as: mode.label, record)
                record("ack storm, one C client: feedd / \(mode.label) acks/s", "×", feedd.acksPerSecond / redis.acksPerSecond)
                record("ack storm, one C client: feedd / \(mode.label) CPU per ack", "×", feedd.cpuPerAck / redis.cpuPerAck)
                record("ack storm, one C client: feedd / \(mode.label) one reader's p99", "×", feedd.reader.p99 / redis.reader.p99)
                record("ack storm, one C client: feedd / \(mode.label) ping p99", "×", feedd.pinger.p99 / redis.pinger.p99)
            case .failure(let reason):
                return reason.description
            }
        }
        return nil
    }

    private static func recordStorm(_ storm: Storm, as server: String, _ record: (String, String, Double) -> Void) {
        let name = "ack storm, one C client (ack-storm.c), \(server)"
        record("\(name): acks made durable", "acks/s", storm.acksPerSecond)
        if let syncs = storm.syncsPerSecond, let perSync = storm.acksPerSync {
            record("\(name): syncs", "/s", syncs)
            record("\(name): acks per sync", "", perSync)
        }
        record("\(name): bytes written to disk per ack", "B", storm.bytesPerAck)
        record("\(name): CPU per ack, all threads", "µs", storm.cpuPerAck)
        for (label, trips) in [
            ("one reader, a ready page every 10 ms (feedd next, Redis XRANGE)", storm.reader), ("a ping every 1 ms (feedd ping, Redis PING)", storm.pinger),
        ] {
            record("\(name): \(label): p50", "ms", trips.p50)
            record("\(name): \(label): p99", "ms", trips.p99)
            record("\(name): \(label): slowest", "ms", trips.slowest)
            record("\(name): \(label): timed", "count", Double(trips.samples))
        }
    }

    static func feedd() throws -> Storm {
        let directory = try TemporaryDirectory()
        let daemon = try DaemonProcess(config: StateScenarios.stormConfig(in: directory, entries: entries), directory: directory)
        return try storm("feedd", socketPath: daemon.socketPath, pid: daemon.pid, users: directory.path("users.ndjson"))
    }

    /// The same storm against Redis 7 with `appendonly yes`, `appendfsync always` (it syncs its
    /// log before answering the commands of an event-loop pass), or nil with why not.
    static func redis(_ mode: RedisMode) throws -> Result<Storm, RedisReference.SkipReason> {
        guard let server = RedisReference.serverPath else {
            return .failure(RedisReference.SkipReason(description: "redis-server is not installed (apt-get install redis-server)"))
        }
        let directory = try TemporaryDirectory()
        let socketPath = directory.path("redis.sock")
        let usersPath = directory.path("users.ndjson")
        try StateScenarios.writeUsers(to: usersPath)
        // No log rewrite during the window: a rewrite is a forked child's work, which neither the
        // server's CPU time nor its write_bytes would show.
        let redis = try ReferenceServer(
            server,
            [
                "--port", "0", "--unixsocket", socketPath, "--save", "", "--appendonly", "yes", "--appendfsync", "always",
                "--auto-aof-rewrite-percentage", "0", "--maxclients", "20000", "--dir", directory.path,
            ], ready: "ready to accept connections")
        defer { redis.stop() }
        return .success(try storm(mode.rawValue, socketPath: socketPath, pid: redis.processIdentifier, users: usersPath))
    }

    /// Runs the client in `mode` against the server `pid` listening on `socketPath`, and measures
    /// the server between the client's `start` and `stop` lines; `users` is the file of the
    /// reader's pages.
    private static func storm(_ mode: String, socketPath: String, pid: Int32, users: String) throws -> Storm {
        let client = try CReference.build("ack-storm.c", libraries: ["pthread"])
        let process = Process()
        process.executableURL = URL(fileURLWithPath: client.executable)
        process.arguments = [
            mode, socketPath, String(consumers), String(warmUp), String(seconds), String(entries), users, String(StateScenarios.usersPerPage),
        ]
        let (output, errors) = try ChildProcess.launch(process)
        let lines = LogCollector()
        lines.collect(from: output)
        let problems = LogCollector()
        problems.collect(from: errors)
        defer {
            if process.isRunning { kill(process.processIdentifier, SIGKILL) }
            process.waitUntilExit()
        }
        do {
            try lines.waitForLine(containing: "start", timeout: .seconds(120))
        } catch {
            throw TestFailure("the ack-storm client (\(mode)) did not start: \(problems.text)")
        }
        let before = try ServerCounters(pid: pid)
        // Counted inside the window, for a little less than it: perf's own start takes a while.
        let syncs = SyncCounter(pid: pid, seconds: seconds - 1)
        let stop = try lines.waitForLine(containing: "stop", timeout: .seconds(Int(seconds) + 60))
        let after = try ServerCounters(pid: pid)
        let syncsPerSecond = syncs.syncsPerSecond()
        let fields = stop.split(separator: " ").dropFirst().compactMap { Double($0) }
        guard fields.count == 2, fields[0] > 0, fields[1] > 0 else { throw TestFailure("the ack-storm client (\(mode)) said \(stop): \(problems.text)") }
        func roundTrips(_ name: String) throws -> RoundTrips {
            let line: String
            do {
                line = try lines.waitForLine(containing: name, timeout: .seconds(30))
            } catch {
                throw TestFailure("the ack-storm client (\(mode)) gave no \(name) line: \(problems.text)")
            }
            guard let trips = RoundTrips(line: line) else { throw TestFailure("the ack-storm client (\(mode)) said \(line): \(problems.text)") }
            return trips
        }
        return Storm(
            acksPerSecond: fields[0] / fields[1], syncsPerSecond: syncsPerSecond,
            bytesPerAck: (after.writtenBytes - before.writtenBytes) / fields[0], cpuPerAck: (after.cpuSeconds - before.cpuSeconds) * 1e6 / fields[0],
            reader: try roundTrips("reader"), pinger: try roundTrips("pinger"))
    }
}

/// A server's CPU time and bytes written to storage so far.
private struct ServerCounters {
    let cpuSeconds: Double
    let writtenBytes: Double

    init(pid: Int32) throws {
        let stat = try String(contentsOfFile: "/proc/\(pid)/stat", encoding: .utf8)
        let io = try String(contentsOfFile: "/proc/\(pid)/io", encoding: .utf8)
        // utime and stime are the 12th and 13th fields after the command name's parenthesis.
        guard let afterName = stat.split(separator: ")").last?.split(separator: " "), afterName.count > 12,
            let user = Double(afterName[11]), let system = Double(afterName[12]),
            let written = io.split(separator: "\n").first(where: { $0.hasPrefix("write_bytes:") })?.split(separator: " ").last.flatMap({ Double($0) })
        else { throw TestFailure("cannot read /proc/\(pid)/stat and io") }
        cpuSeconds = (user + system) / Double(sysconf(Int32(_SC_CLK_TCK)))
        writtenBytes = written
    }
}

/// `perf stat` counting a process's `fsync` and `fdatasync` calls for a while. It runs for a
/// set time rather than until a signal: after the fleet scenario the benchmark runs on a
/// Dispatch thread, whose blocked signals a child inherits.
private struct SyncCounter {
    private let process = Process()
    private let report = LogCollector()

    init(pid: Int32, seconds: Double) {
        process.executableURL = URL(fileURLWithPath: "/usr/bin/perf")
        process.arguments = ["stat", "-e", "syscalls:sys_enter_fsync,syscalls:sys_enter_fdatasync", "-p", String(pid), "--", "sleep", String(seconds)]
        process.environment = ["LC_ALL": "C", "PATH": "/usr/bin:/bin"]
        guard FileManager.default.isExecutableFile(atPath: "/usr/bin/perf"), let (_, errors) = try? ChildProcess.launch(process) else { return }
        report.collect(from: errors)
    }

    /// Syncs a second over the time perf counted, or nil when perf could not count them.
    func syncsPerSecond() -> Double? {
        guard (try? report.waitForLine(containing: "seconds time elapsed", timeout: .seconds(60))) != nil else { return nil }
        guard let elapsed = report.lines.first(where: { $0.contains("seconds time elapsed") }),
            let seconds = elapsed.split(separator: " ").first.flatMap({ Double($0) }), seconds > 0
        else { return nil }
        // "<not counted>" (no call at all) counts as none.
        let counts = report.lines.filter { $0.contains("syscalls:sys_enter_f") }.map { line in
            line.split(separator: " ").first.flatMap { Double($0) } ?? 0
        }
        return counts.count == 2 ? counts.reduce(0, +) / seconds : nil
    }
}
