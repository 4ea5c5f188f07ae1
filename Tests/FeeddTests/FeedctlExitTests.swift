import FeedClient
import Foundation
import Glibc
import Testing
import TestSupport

/// `feedctl` ends when there is nothing more to wait for, and says why (issue 14).
@Suite struct FeedctlExitTests {
    func feedctl(_ arguments: [String]) throws -> (status: Int32, output: String, errors: String) {
        try ChildProcess.run(FeeddBinaries.feedctl, arguments, environment: ["PATH": "/usr/bin:/bin", "XDG_RUNTIME_DIR": "/nonexistent"])
    }

    @Test func follow_exits_zero_at_the_end_of_a_finite_feed() throws {
        let daemon = try ProtocolTests.numbersFeed(lines: 25, pageSize: 10)
        let result = try feedctl(["--socket", daemon.socketPath, "follow", "numbers"])
        #expect(result.status == 0)
        let lines = result.output.split(separator: "\n")
        #expect(lines.count == 3 && lines.allSatisfy { $0.hasPrefix(#"{"type":"page""#) }, "\(result.output)")
    }

    @Test func next_on_a_failing_feed_exits_one_with_the_reason() throws {
        let upstream = try LoopbackUpstream()
        let daemon = try NetworkAdapterTests.users(upstream, "seed = \"s\"\nprefetch = 0")
        upstream.inject(.status(404), times: 1_000)
        let result = try feedctl(["--socket", daemon.socketPath, "next", "users"])
        #expect(result.status == 1)
        #expect(result.errors.hasPrefix("feedctl: users: upstream: "), "\(result.errors)")
        #expect(result.errors.contains("HTTP 404"))
    }

    @Test func next_with_wait_gives_up_after_that_long() throws {
        let upstream = try LoopbackUpstream()
        let daemon = try NetworkAdapterTests.users(upstream, "seed = \"s\"\nprefetch = 0")
        upstream.inject(.status(503), times: 1_000)
        let started = ContinuousClock.now
        let result = try feedctl(["--socket", daemon.socketPath, "next", "users", "--wait", "1500ms"])
        let elapsed = ContinuousClock.now - started
        #expect(result.status == 1)
        #expect(elapsed >= .milliseconds(1400) && elapsed < .seconds(10))
        #expect(result.errors.contains("users: no page within 1500 ms; upstream: "), "\(result.errors)")
    }

    @Test func status_says_one_client_not_one_clients() throws {
        let daemon = try ProtocolTests.numbersFeed()
        let result = try feedctl(["--socket", daemon.socketPath, "status"])
        #expect(result.output.hasPrefix("feedd ") && result.output.split(separator: "\n")[0].hasSuffix(", 1 client"), "\(result.output)")
    }
}

/// `FeedConnection.readLine` looks at each byte once, however long the line (issue 14).
@Suite struct FeedConnectionTests {
    /// Linear time is a ratio, not a deadline: ten times the line takes about ten times as long
    /// (a rescan of what was read before each chunk would take a hundred), on a busy machine too.
    @Test func a_twelve_megabyte_line_is_read_in_linear_time() throws {
        let short = try (0..<3).map { _ in try Self.timeToRead(lineOf: 12 << 20 / 10) }.min()!
        let long = try (0..<3).map { _ in try Self.timeToRead(lineOf: 12 << 20) }.min()!
        print("a 1.2 MB line read in \(short), a 12 MB one in \(long)")
        #expect(long < short * 30, "12 MB took \(long), 1.2 MB \(short): more than linear")
    }

    /// How long `readLine` takes for one line of `length` bytes, sent in 4 KiB writes.
    private static func timeToRead(lineOf length: Int) throws -> Duration {
        let directory = try TemporaryDirectory()
        let path = directory.path("s.sock")
        let listener = socket(AF_UNIX, Int32(SOCK_STREAM.rawValue), 0)
        defer { close(listener) }
        try #require(try UnixSocketAddress(path: path).withSocketAddress { bind(listener, $0, $1) } == 0)
        try #require(listen(listener, 1) == 0)
        let line = [UInt8](repeating: UInt8(ascii: "x"), count: length) + [UInt8(ascii: "\n")]
        let writer = Thread {
            let client = accept(listener, nil, nil)
            var offset = 0
            while offset < line.count {
                let written = line[offset..<min(offset + 4096, line.count)].withUnsafeBytes { send(client, $0.baseAddress, $0.count, Int32(MSG_NOSIGNAL)) }
                if written <= 0 { break }
                offset += written
            }
            close(client)
        }
        writer.start()
        let connection = try FeedConnection(path: path)
        let started = ContinuousClock.now
        let read = try connection.readLine(timeout: .seconds(30))
        let elapsed = ContinuousClock.now - started
        try #require(read?.count == length)
        return elapsed
    }
}
