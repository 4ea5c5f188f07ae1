import FeedKit
import Foundation
import Testing
import TestSupport

/// An exec plugin runs in a process group of its own, which a restart or a stop ends as a whole,
/// and which does not outlive feedd, even killed with SIGKILL (issue 23, item 9).
@Suite struct ExecProcessGroupEndToEndTests {
    static let forkingPlugin = URL(fileURLWithPath: #filePath).deletingLastPathComponent()
        .appendingPathComponent("../plugins/forking-plugin").standardized.path

    static func daemon(exitAfterEachAnswer: Bool, in directory: TemporaryDirectory) throws -> DaemonProcess {
        try DaemonProcess(config: """
            [feeds.forking]
            source = "exec"
            command = ["\(forkingPlugin)"]
            pids = "\(directory.path("pids"))"
            exit_after = \(exitAfterEachAnswer)
            prefetch = 0
            retry_max_delay = "20ms"
            """, directory: directory)
    }

    /// The pids the plugins wrote, each start's program and the child it left.
    static func started(in directory: TemporaryDirectory) throws -> [(program: Int32, child: Int32)] {
        try String(contentsOfFile: directory.path("pids"), encoding: .utf8).split(separator: "\n").map { line in
            let fields = line.split(separator: " ").compactMap { Int32($0) }
            guard fields.count == 2 else { throw TestFailure("a line of pids reads \"\(line)\"") }
            return (fields[0], fields[1])
        }
    }

    static func waitUntilGone(_ pids: [Int32], within timeout: Duration = .seconds(10)) throws {
        let deadline = ContinuousClock.now + timeout
        while let alive = pids.first(where: { !ChildProcess.isGone($0) }) {
            guard ContinuousClock.now < deadline else { throw TestFailure("pid \(alive) is still there after \(timeout)") }
            Thread.sleep(forTimeInterval: 0.02)
        }
    }

    /// The daemon's threads but Dispatch's workers (`com.apple.root.default-qos` …), whose pool
    /// grows and shrinks on its own.
    static func ownThreads(of daemon: DaemonProcess) throws -> Int {
        try FileManager.default.contentsOfDirectory(atPath: "/proc/\(daemon.pid)/task").filter { task in
            let name = (try? String(contentsOfFile: "/proc/\(daemon.pid)/task/\(task)/comm", encoding: .utf8)) ?? ""
            return !name.contains("qos")
        }.count
    }

    /// Reads pages until page `last`, skipping the `upstream` notices each restart gives; throws
    /// if that takes longer than `timeout` in all.
    static func read(_ client: TestClient, through last: Int64, within timeout: Duration = .seconds(10)) throws {
        let deadline = ContinuousClock.now + timeout
        while true {
            let left = deadline - .now
            guard left > .zero else { throw TestFailure("page \(last) did not come within \(timeout)") }
            let message = try client.read(timeout: left)
            if message["type"] == "page", message["page"]?.integerValue == last { return }
            guard message["type"] == "page" || message["type"] == "error" || message["type"] == "subscribed" else {
                throw TestFailure("unexpected \(message.jsonText)")
            }
        }
    }

    @Test func a_hundred_restarts_of_a_forking_plugin_leave_no_thread_descriptor_or_process_behind() throws {
        let directory = try TemporaryDirectory()
        let daemon = try Self.daemon(exitAfterEachAnswer: true, in: directory)
        let client = try daemon.connect()
        try client.send("next forking 1")
        try Self.read(client, through: 1)
        let threadsBefore = try Self.ownThreads(of: daemon)
        let descriptorsBefore = try daemon.openDescriptorCount()

        try client.send(["op": "next", "feed": "forking", "count": 100])
        // Each restart costs a start of the plugin and a retry_max_delay: 100 in well under 30 s.
        try Self.read(client, through: 101, within: .seconds(30))
        let starts = try Self.started(in: directory)
        #expect(starts.count == 101, "every page came from a fresh start")
        // Each restart ended the group before the page after it was fetched.
        try Self.waitUntilGone(starts.dropLast().flatMap { [$0.program, $0.child] }, within: .seconds(5))
        #expect(try Self.ownThreads(of: daemon) == threadsBefore)
        #expect(try daemon.openDescriptorCount() == descriptorsBefore)

        daemon.send(signal: SIGTERM)
        try daemon.waitForExit()
        try Self.waitUntilGone([starts.last!.program, starts.last!.child])
    }

    @Test func after_feedd_is_killed_with_sigkill_its_plugins_whole_group_goes_too() throws {
        let directory = try TemporaryDirectory()
        let daemon = try Self.daemon(exitAfterEachAnswer: false, in: directory)
        let client = try daemon.connect()
        try client.send("next forking 1")
        try Self.read(client, through: 1)
        let start = try #require(try Self.started(in: directory).first)
        #expect(!ChildProcess.isGone(start.program) && !ChildProcess.isGone(start.child))
        daemon.send(signal: SIGKILL)
        try daemon.waitForExit()
        try Self.waitUntilGone([start.program, start.child])
    }
}
