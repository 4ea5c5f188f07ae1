import FeedKit
import Foundation
import Testing
import TestSupport

/// feedd's own command line (SPEC §2): mistakes exit 2 with the closest word, and
/// `config-keys` prints the key table the loader uses (issue 28).
@Suite struct DaemonCommandLineTests {
    func feedd(_ arguments: String...) throws -> (status: Int32, output: String, errors: String) {
        try ChildProcess.run(FeeddBinaries.feedd, arguments, environment: ["PATH": "/usr/bin:/bin"])
    }

    @Test func a_mistyped_command_or_option_exits_two_with_the_closest() throws {
        let cases: [([String], String)] = [
            (["chek-config"], "feedd: unknown argument \"chek-config\"; did you mean \"check-config\"?"),
            (["--conifg", "x"], "feedd: unknown argument \"--conifg\"; did you mean \"--config\"?"),
            (["check-config", "--socket", "x"], "feedd: check-config takes only --config PATH, not \"--socket\""),
            (["plugin", "chek"], "feedd: \"feedd plugin\" needs \"check\""),
            (["config-keys", "--jsn"], "feedd: unknown option \"--jsn\"; did you mean \"--json\"?"),
        ]
        for (arguments, message) in cases {
            let result = try ChildProcess.run(FeeddBinaries.feedd, arguments)
            #expect(result.status == 2, "\(arguments)")
            #expect(result.errors.hasPrefix(message + "\n"), "\(arguments): \(result.errors)")
            #expect(result.errors.contains("Usage: feedd"), "\(arguments)")
        }
    }

    @Test func config_keys_lists_every_table_and_source() throws {
        let result = try feedd("config-keys")
        #expect(result.status == 0)
        for heading in ["[daemon]", "[feeds.NAME]", "[cluster]", "source = \"file\"", "source = \"http\"", "source = \"rss\"", "source = \"merge\""] {
            #expect(result.output.contains("\n\(heading)\n") || result.output.hasPrefix("\(heading)\n"), "\(heading)")
        }
        #expect(result.output.contains("  cache_bytes "))
    }

    @Test func config_keys_of_one_table_as_json_lines() throws {
        let result = try feedd("config-keys", "--json", "cluster")
        #expect(result.status == 0)
        let keys = try result.output.split(separator: "\n").map { try JSONValue(parsing: Array($0.utf8)) }
        #expect(keys.allSatisfy { $0["table"] == "cluster" })
        #expect(keys.first { $0["name"] == "nats" }?["required"] == true)
        #expect(keys.first { $0["name"] == "lease" }?["default"] == "\"10s\"")
        let unknown = try feedd("config-keys", "htp")
        #expect(unknown.status == 2)
        #expect(unknown.errors.hasPrefix("feedd: no table or source \"htp\"; did you mean \"http\"?"))
    }

    /// The embedded default's sample file is written when the daemon starts: not a warning before.
    @Test func the_embedded_default_checks_silently_on_a_fresh_machine() throws {
        if FileManager.default.fileExists(atPath: "/etc/feedd/feedd.toml") { try Test.cancel("/etc/feedd/feedd.toml exists here") }
        let directory = try TemporaryDirectory()
        let result = try ChildProcess.run(
            FeeddBinaries.feedd, ["check-config"], environment: ["PATH": "/usr/bin:/bin", "HOME": directory.path, "XDG_RUNTIME_DIR": directory.path("run")])
        #expect(result.status == 0)
        #expect(result.output + result.errors == "")
    }
}

/// The daemon counts in words that agree with the number (issue 28: "goodbye to 1 clients").
@Suite struct DaemonMessageTests {
    @Test func one_client_and_one_feed_are_singular() throws {
        let daemon = try ProtocolTests.numbersFeed()
        let client = try daemon.connect()
        #expect(try client.request("ping")["type"] == "pong")
        daemon.send(signal: SIGHUP)
        try daemon.log.waitForLine(containing: "configuration reloaded: 1 feed")
        daemon.send(signal: SIGTERM)
        #expect(try daemon.waitForExit() == 0)
        #expect(daemon.log.text.contains("saying goodbye to 1 client\n"), "\(daemon.log.text)")
        #expect(!daemon.log.text.contains("1 clients") && !daemon.log.text.contains("1 feeds"))
    }
}
