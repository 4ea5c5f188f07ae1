import Foundation
import Testing
import TestSupport

/// `feedctl` against a real daemon (SPEC §2).
@Suite struct FeedctlTests {
    func feedctl(_ arguments: [String]) throws -> (status: Int32, output: String, errors: String) {
        try ChildProcess.run(FeeddBinaries.feedctl, arguments, environment: ["PATH": "/usr/bin:/bin", "XDG_RUNTIME_DIR": "/nonexistent"])
    }

    @Test func status_lists_every_feed() throws {
        let daemon = try ProtocolTests.numbersFeed()
        let result = try feedctl(["--socket", daemon.socketPath, "status"])
        #expect(result.status == 0)
        #expect(result.output.contains("numbers"))
        #expect(result.output.contains("file"))
        let json = try feedctl(["--socket", daemon.socketPath, "status", "--json"])
        #expect(json.output.hasPrefix(#"{"type":"status""#))
    }

    @Test func next_prints_page_lines() throws {
        let daemon = try ProtocolTests.numbersFeed(lines: 25, pageSize: 10)
        let result = try feedctl(["--socket", daemon.socketPath, "next", "numbers", "5"])
        #expect(result.status == 0)
        let lines = result.output.split(separator: "\n")
        #expect(lines.count == 3, "three pages, then end")
        #expect(lines.allSatisfy { $0.hasPrefix(#"{"type":"page","feed":"numbers""#) })
    }

    @Test func refresh_reports_the_new_generation() throws {
        let daemon = try ProtocolTests.numbersFeed()
        let result = try feedctl(["--socket", daemon.socketPath, "refresh", "numbers"])
        #expect(result.status == 0)
        #expect(result.output == "numbers: generation 2\n")
    }

    @Test func an_unknown_feed_is_an_error() throws {
        let daemon = try ProtocolTests.numbersFeed()
        let result = try feedctl(["--socket", daemon.socketPath, "next", "nope"])
        #expect(result.status == 1)
        #expect(result.errors.contains("unknown_feed"))
    }

    @Test func an_unreachable_daemon_exits_one_with_a_one_line_reason() throws {
        let directory = try TemporaryDirectory()
        let result = try feedctl(["--socket", directory.path("none.sock"), "status"])
        #expect(result.status == 1)
        #expect(result.errors.hasPrefix("feedctl: cannot reach feedd: "))
        #expect(result.errors.split(separator: "\n").count == 1)
    }
}
