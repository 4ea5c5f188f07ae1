import Foundation
import Testing
import TestSupport

/// `check-config` catches what would otherwise only show when the daemon runs (issue 14).
@Suite struct CheckConfigHostileTests {
    func checkConfig(_ config: String, in directory: TemporaryDirectory) throws -> (status: Int32, output: String, path: String) {
        let path = try directory.write("feedd.toml", config)
        let result = try ChildProcess.run(FeeddBinaries.feedd, ["check-config", "--config", path])
        return (result.status, result.output + result.errors, path)
    }

    /// A plugin that refuses any option it does not know, as a real one would.
    func strictPlugin(in directory: TemporaryDirectory) throws -> String {
        let path = try directory.write("strict-plugin", """
            #!/usr/bin/env python3
            import json, sys
            for line in sys.stdin:
                request = json.loads(line)
                unknown = sorted(set(request["options"]) - {"command", "limit"})
                print(json.dumps({"error": f"unknown option {unknown[0]}"} if unknown else {"ok": True}), flush=True)
            """)
        chmod(path, 0o755)
        return path
    }

    @Test func an_exec_plugin_refusing_its_configuration_fails_check_config_at_its_table() throws {
        let directory = try TemporaryDirectory()
        let plugin = try strictPlugin(in: directory)
        let result = try checkConfig("""
            [feeds.good]
            source = "exec"
            command = ["\(plugin)"]
            limit = 3

            [feeds.typo]
            source = "exec"
            command = ["\(plugin)"]
            limt = 3
            """, in: directory)
        #expect(result.status == 2)
        #expect(result.output == "\(result.path):6:8: feeds.typo: plugin \(plugin) refused its configuration: unknown option limt\n")
    }

    /// A plugin's refusal is reported in the same run as the config's own mistakes (issue 28).
    @Test func a_plugin_refusal_and_a_config_mistake_are_reported_together() throws {
        let directory = try TemporaryDirectory()
        let plugin = try strictPlugin(in: directory)
        let result = try checkConfig("""
            [daemon]
            prefech = 1

            [feeds.typo]
            source = "exec"
            command = ["\(plugin)"]
            limt = 3
            """, in: directory)
        #expect(result.status == 2)
        #expect(result.output == """
            \(result.path):2:1: daemon.prefech: unknown key; did you mean "prefetch"?
            \(result.path):4:8: feeds.typo: plugin \(plugin) refused its configuration: unknown option limt

            """)
    }

    @Test func a_valid_exec_feed_passes_check_config_silently() throws {
        let directory = try TemporaryDirectory()
        let plugin = try strictPlugin(in: directory)
        let result = try checkConfig("[feeds.good]\nsource = \"exec\"\ncommand = [\"\(plugin)\"]\nlimit = 3\n", in: directory)
        #expect(result.status == 0)
        #expect(result.output == "")
    }

    @Test func an_unresolvable_allow_groups_name_exits_two_with_its_position() throws {
        let directory = try TemporaryDirectory()
        let result = try checkConfig("[daemon]\nallow_groups = [\"feedreaders-missing\"]\n", in: directory)
        #expect(result.status == 2)
        #expect(result.output == "\(result.path):2:1: daemon.allow_groups: no group named \"feedreaders-missing\" on this host\n")
    }

    @Test func an_unresolvable_name_at_start_exits_two() throws {
        let directory = try TemporaryDirectory()
        let daemon = try DaemonProcess(config: "[daemon]\nallow_uids = [\"no-such-user-here\"]\n", directory: directory, waitUntilListening: false)
        #expect(try daemon.waitForExit() == 2)
        #expect(daemon.log.text.contains("daemon.allow_uids: no user named \"no-such-user-here\" on this host"))
    }

    @Test func a_socket_in_a_missing_directory_is_refused_not_created() throws {
        let directory = try TemporaryDirectory()
        let socket = directory.path("missing/feedd.sock")
        let daemon = try DaemonProcess(
            config: "", arguments: ["--config", directory.path("feedd.toml"), "--socket", socket], directory: directory, waitUntilListening: false)
        #expect(try daemon.waitForExit() == 1)
        #expect(daemon.log.text.contains("the directory \(directory.path("missing")) of the socket does not exist"), "\(daemon.log.text)")
        #expect(!FileManager.default.fileExists(atPath: directory.path("missing")))
    }

    /// A reload naming a group that does not exist is rejected; the running allow list stays.
    @Test func a_reload_with_an_unresolvable_name_keeps_the_running_config() throws {
        let daemon = try ProtocolTests.numbersFeed(extraDaemon: "allow_uids = [\(getuid())]")
        let config = try String(contentsOfFile: daemon.configPath, encoding: .utf8)
        try config.replacingOccurrences(of: "allow_uids = [\(getuid())]", with: "allow_groups = [\"feedreaders-missing\"]")
            .write(toFile: daemon.configPath, atomically: true, encoding: .utf8)
        daemon.send(signal: SIGHUP)
        try daemon.log.waitForLine(containing: "reload rejected, keeping the running configuration: \(daemon.configPath):3:1: daemon.allow_groups: no group named")
        let client = try daemon.connect()
        #expect(try client.request("ping")["type"] == "pong")
    }
}
