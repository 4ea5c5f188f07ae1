import FeedClient
import Glibc
import TestSupport

/// Reads many sockets at once with poll(2) and notes when each received each of its lines,
/// without parsing anything: the reading side of a fan-out must cost as little as possible.
final class LineCounter {
    private var descriptors: [pollfd]
    private(set) var lineCounts: [Int]
    private(set) var byteCounts: [Int]
    /// For each line number (1-based), when the last socket received it, and how many have.
    private(set) var lineCompletions: [Int: (count: Int, last: ContinuousClock.Instant)] = [:]
    /// For each socket, when it received each of its lines; empty unless asked for at `init`
    /// (a fleet's followers are timed one by one, a plain fan-out needs only the last of each line).
    private(set) var receipts: [[ContinuousClock.Instant]]
    private let recordsReceipts: Bool
    private var buffer = [UInt8](repeating: 0, count: 1 << 20)

    init(_ sockets: [Int32], recordingReceipts: Bool = false) {
        descriptors = sockets.map { pollfd(fd: $0, events: Int16(POLLIN), revents: 0) }
        lineCounts = Array(repeating: 0, count: sockets.count)
        byteCounts = Array(repeating: 0, count: sockets.count)
        recordsReceipts = recordingReceipts
        receipts = Array(repeating: [], count: recordingReceipts ? sockets.count : 0)
    }

    /// Reads until every socket has `lines` lines (or `bytes` bytes); false if `deadline` passes
    /// or a socket is closed first.
    func read(untilEachHas lines: Int? = nil, bytes: Int? = nil, deadline: ContinuousClock.Instant) -> Bool {
        func done(_ index: Int) -> Bool {
            if let lines, lineCounts[index] < lines { return false }
            if let bytes, byteCounts[index] < bytes { return false }
            return true
        }
        var pending = Set(descriptors.indices.filter { !done($0) })
        while !pending.isEmpty {
            guard ContinuousClock.now < deadline else { return false }
            let ready = poll(&descriptors, nfds_t(descriptors.count), 100)
            guard ready > 0 else { continue }
            for index in descriptors.indices where descriptors[index].revents != 0 {
                descriptors[index].revents = 0
                let count = buffer.withUnsafeMutableBytes { recv(descriptors[index].fd, $0.baseAddress, $0.count, Int32(MSG_DONTWAIT)) }
                if count == 0 || (count < 0 && errno != EAGAIN && errno != EINTR) { return false }
                guard count > 0 else { continue }
                let now = ContinuousClock.now
                byteCounts[index] += count
                let newlines = Self.newlines(in: buffer, count: count)
                for line in (lineCounts[index] + 1)..<(lineCounts[index] + 1 + newlines) {
                    let previous = lineCompletions[line]?.count ?? 0
                    lineCompletions[line] = (previous + 1, now)
                }
                lineCounts[index] += newlines
                if recordsReceipts { receipts[index] += repeatElement(now, count: newlines) }
                if done(index) { pending.remove(index) }
            }
        }
        return true
    }

    /// The line breaks among the first `count` bytes of `bytes`, found with `memchr`. A loop over
    /// the bytes took 97% of `read`'s samples and 17% of all of a fan-out run's (`perf record` of
    /// the benchmark and its servers), on the two cores the reader shares with the writers it measures.
    private static func newlines(in bytes: [UInt8], count: Int) -> Int {
        bytes.withUnsafeBytes { buffer in
            var found = 0
            var cursor = buffer.baseAddress!
            let end = cursor + count
            while cursor < end, let hit = memchr(cursor, Int32(UInt8(ascii: "\n")), end - cursor) {
                found += 1
                cursor = UnsafeRawPointer(hit) + 1
            }
            return found
        }
    }
}

/// `count` connections to each of some daemons' sockets, that have had their `hello`, read
/// together by one ``LineCounter`` (its sockets in the order of the paths given).
final class Followers {
    let connections: [FeedConnection]
    let counter: LineCounter

    init(_ count: Int, on socketPaths: [String], recordingReceipts: Bool = false) throws {
        connections = try socketPaths.flatMap { path in try (0..<count).map { _ in try FeedConnection(path: path) } }
        counter = LineCounter(connections.map(\.descriptor), recordingReceipts: recordingReceipts)
        guard counter.read(untilEachHas: 1, deadline: .now + .seconds(30)) else { throw TestFailure("hello timed out") }
    }

    /// Sends `line` on every connection; returns when the first was sent.
    func send(_ line: String) throws -> ContinuousClock.Instant {
        try send { _ in line }
    }

    /// Sends each connection the line `line` makes of its index; returns when the first was sent.
    func send(_ line: (Int) -> String) throws -> ContinuousClock.Instant {
        let started = ContinuousClock.now
        for (index, connection) in connections.enumerated() { try connection.send(line(index)) }
        return started
    }
}
