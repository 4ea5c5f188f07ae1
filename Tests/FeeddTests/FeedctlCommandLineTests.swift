import FeedKit
import Foundation
import Testing
import TestSupport

/// feedctl checks its command line before it connects (issue 28): a bad one exits 2 with the
/// usage on stderr, whether or not a daemon is there, and never reaches the socket.
@Suite struct FeedctlCommandLineTests {
    func feedctl(_ arguments: [String]) throws -> (status: Int32, output: String, errors: String) {
        try ChildProcess.run(FeeddBinaries.feedctl, arguments, environment: ["PATH": "/usr/bin:/bin", "XDG_RUNTIME_DIR": "/nonexistent"])
    }

    static let badCommandLines: [(arguments: [String], message: String)] = [
        ([], "feedctl: no command given"),
        (["bogus"], "feedctl: unknown command \"bogus\""),
        (["stauts"], "feedctl: unknown command \"stauts\"; did you mean \"status\"?"),
        (["status", "--jsn"], "feedctl: unknown option \"--jsn\"; did you mean \"--json\"?"),
        (["status", "extra"], "feedctl: status takes no arguments, not also \"extra\""),
        (["status", "--wait", "1s"], "feedctl: status does not take --wait"),
        (["next"], "feedctl: next needs FEED"),
        (["next", "numbers", "0"], "feedctl: N must be a whole number from 1 to 10000, not \"0\""),
        (["next", "numbers", "2", "3"], "feedctl: next takes FEED [N], not also \"3\""),
        (["next", "numbers", "--wait", "soon"], "feedctl: --wait needs a duration such as 30s, 500ms or 2m"),
        (["ack", "numbers", "reader"], "feedctl: ack needs PAGE"),
        (["ack", "numbers", "reader", "-1"], "feedctl: unknown option \"-1\""),
        (["ack", "numbers", "reader", "x"], "feedctl: PAGE must be a page number from 0 to 1000000000, not \"x\""),
        (["forget", "numbers"], "feedctl: forget needs CONSUMER"),
        (["lag", "a", "b"], "feedctl: lag takes [FEED], not also \"b\""),
        (["help", "nxt"], "feedctl: no command \"nxt\"; did you mean \"next\"?"),
        (["status", "--socket"], "feedctl: --socket needs PATH"),
        (["ping", "--json=yes"], "feedctl: --json takes no value"),
    ]

    @Test func a_bad_command_line_exits_two_with_the_usage_and_never_connects() throws {
        let socket = try FakeDaemon.silent()
        for (arguments, message) in Self.badCommandLines {
            let result = try feedctl(["--socket", socket.socketPath] + arguments)
            #expect(result.status == 2, "\(arguments)")
            #expect(result.output == "", "\(arguments)")
            #expect(result.errors.hasPrefix(message + "\n"), "\(arguments): \(result.errors)")
            #expect(result.errors.contains("Usage: feedctl "), "\(arguments): \(result.errors)")
            #expect(!socket.wasConnected, "\(arguments) connected to the socket")
        }
    }

    @Test func without_a_daemon_a_bad_command_line_is_still_a_usage_error() throws {
        let result = try feedctl(["bogus"])
        #expect(result.status == 2)
        #expect(result.errors.hasPrefix("feedctl: unknown command \"bogus\"\n"))
    }

    @Test func version_prints_the_version_anywhere() throws {
        for arguments in [["--version"], ["-V"], ["status", "--version"]] {
            let result = try feedctl(arguments)
            #expect(result.status == 0)
            #expect(result.output == "feedctl \(feeddVersion)\n", "\(arguments)")
        }
    }

    @Test func help_lists_every_command_and_explains_one() throws {
        let help = try feedctl(["--help"])
        #expect(help.status == 0)
        for name in ["status", "next FEED [N]", "follow FEED", "refresh FEED", "consumers FEED", "lag [FEED]", "ack FEED CONSUMER PAGE", "forget FEED CONSUMER"] {
            #expect(help.output.contains("\n  \(name)"), "\(name)")
        }
        let ack = try feedctl(["help", "ack"])
        #expect(ack.output.hasPrefix("Usage: feedctl [--socket PATH] [--json] ack FEED CONSUMER PAGE [--force]\n"))
        #expect(try feedctl(["ack", "--help"]).output == ack.output, "--help after a command is that command's help")
    }

    /// Every command takes --json and then prints JSON lines, the daemon's own where it has one.
    @Test func json_is_taken_by_every_command() throws {
        let daemon = try ProtocolTests.numbersFeed(lines: 25, pageSize: 10)
        let types = ["status": "status", "refresh numbers": "refreshed", "metrics": "metrics", "feeds": "hello", "ping": "pong", "next numbers 2": "page"]
        for (command, type) in types {
            let result = try feedctl(["--socket", daemon.socketPath] + command.split(separator: " ").map(String.init) + ["--json"])
            #expect(result.status == 0, "\(command): \(result.errors)")
            let lines = result.output.split(separator: "\n")
            #expect(!lines.isEmpty)
            for line in lines {
                #expect(try JSONValue(parsing: Array(line.utf8))["type"]?.stringValue == type, "\(command): \(line)")
            }
        }
    }
}
