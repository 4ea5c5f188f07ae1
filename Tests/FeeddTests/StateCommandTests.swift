import Foundation
import Testing
import TestSupport

/// `feedd state check` and `feedd state repair` on the state directory the config names.
@Suite struct StateCommandTests {
    private func feedd(_ arguments: [String], config: String) throws -> (status: Int32, output: String) {
        let result = try ChildProcess.run(FeeddBinaries.feedd, arguments + ["--config", config])
        return (result.status, result.output + result.errors)
    }

    @Test func test_state_check_and_repair_of_an_emptied_store() throws {
        let directory = try TemporaryDirectory()
        let state = directory.path("state")
        let config = try directory.write("feedd.toml", "[daemon]\nstate_dir = \"\(state)\"\n")

        let fresh = try feedd(["state", "check"], config: config)
        #expect(fresh.status == 0)
        #expect(fresh.output.contains("not created yet"))

        try FileManager.default.createDirectory(atPath: state, withIntermediateDirectories: true)
        FileManager.default.createFile(atPath: "\(state)/state.db", contents: Data())
        let damaged = try feedd(["state", "check"], config: config)
        #expect(damaged.status == 1)
        #expect(damaged.output.contains("\(state)/state.db is empty (0 bytes)"))
        #expect(damaged.output.contains("feedd state repair --config \(config)"))

        let repaired = try feedd(["state", "repair"], config: config)
        #expect(repaired.status == 0)
        #expect(repaired.output.contains("the damaged file is kept as \(state)/state.db.damaged-"))

        let healthy = try feedd(["state", "check"], config: config)
        #expect(healthy.status == 0)
        #expect(healthy.output == "\(state)/state.db: ok; 0 feeds, 0 pages (0 with their items), 0 consumers\n")
    }

    @Test func test_state_without_check_or_repair_is_a_usage_error() throws {
        let result = try ChildProcess.run(FeeddBinaries.feedd, ["state", "fix"])
        #expect(result.status == 2)
        #expect(result.errors.contains("\"feedd state\" needs \"check\" or \"repair\""))
    }

    @Test func repair_of_a_state_directory_that_does_not_exist_fails_and_creates_nothing() throws {
        let directory = try TemporaryDirectory()
        let state = directory.path("no-such-state")
        let config = try directory.write("feedd.toml", "[daemon]\nstate_dir = \"\(state)\"\n")
        let result = try feedd(["state", "repair"], config: config)
        #expect(result.status == 1)
        #expect(result.output == "feedd: the state directory \(state) does not exist; there is nothing to repair (is state_dir right?)\n")
        #expect(!FileManager.default.fileExists(atPath: state), "no directory, no lock file")
    }

    @Test func repair_does_not_tell_the_user_to_run_repair() throws {
        let directory = try TemporaryDirectory()
        let state = directory.path("state")
        let config = try directory.write("feedd.toml", "[daemon]\nstate_dir = \"\(state)\"\n")
        try FileManager.default.createDirectory(atPath: state, withIntermediateDirectories: true)
        FileManager.default.createFile(atPath: "\(state)/state.db", contents: Data(repeating: 0x5a, count: 8_192))
        let repaired = try feedd(["state", "repair"], config: config)
        #expect(repaired.status == 0)
        #expect(repaired.output.contains("  could not read: "), "\(repaired.output)")
        #expect(!repaired.output.contains("state repair"), "\(repaired.output)")
        #expect(repaired.output.contains(": 0 feeds, 0 pages, 0 consumers salvaged"))
    }

    @Test func check_counts_one_feed_and_one_consumer_in_the_singular() throws {
        let daemon = try ProtocolTests.numbersFeed(lines: 5, pageSize: 10)
        let client = try daemon.connect()
        #expect(try client.request(#"{"op":"subscribe","feed":"numbers","consumer":"only"}"#)["type"] == "subscribed")
        daemon.send(signal: SIGTERM)
        #expect(try daemon.waitForExit() == 0)
        let config = try daemon.directory.write("state.toml", "[daemon]\nstate_dir = \"\(daemon.directory.path("state"))\"\n")
        let check = try feedd(["state", "check"], config: config)
        #expect(check.status == 0)
        #expect(check.output.contains(": ok; 1 feed, ") && check.output.hasSuffix(", 1 consumer\n"), "\(check.output)")
    }
}
