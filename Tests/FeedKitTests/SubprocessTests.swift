import FeedKit
import Foundation
import Testing
import TestSupport

/// A plugin's process group ends as a whole, and leaves nothing of feedd's behind: no thread, no
/// descriptor, no process (issue 23, item 9).
@Suite(.serialized) struct SubprocessTests {
    static func start(_ script: String) async throws -> Subprocess {
        try await Subprocess.start(executable: "/bin/sh", arguments: ["-c", script], environment: ["PATH": "/usr/bin:/bin"]) { _ in }
    }

    /// The pid the script printed first.
    static func printedPid(_ process: Subprocess) async throws -> Int32 {
        guard case .line(let line) = await process.nextLine(timeout: .seconds(10)), let pid = Int32(String(decoding: line, as: UTF8.self)) else {
            throw TestFailure("the script printed no pid")
        }
        return pid
    }

    /// What each open descriptor of process `pid` refers to (`pipe:[81234]`, `socket:[…]`, a path).
    static func openFiles(of pid: String) -> [String] {
        let directory = "/proc/\(pid)/fd"
        let descriptors = (try? FileManager.default.contentsOfDirectory(atPath: directory)) ?? []
        return descriptors.compactMap { try? FileManager.default.destinationOfSymbolicLink(atPath: "\(directory)/\($0)") }
    }

    /// The pipes a running group holds, read from its processes: feedd holds the other end of each,
    /// and must have closed it once the group has ended. Only these are checked, not a count of
    /// every descriptor, because other suites run beside this one and open their own (libcurl's
    /// wake-up pipes among them).
    static func pipes(of pids: [Int32]) -> Set<String> {
        Set(pids.flatMap { openFiles(of: String($0)) }.filter { $0.hasPrefix("pipe:") })
    }

    static func stillOpenHere(_ pipes: Set<String>) -> Set<String> {
        pipes.intersection(openFiles(of: "self"))
    }

    static var descriptors: Int { openFiles(of: "self").count }

    /// A bound on what other suites open meanwhile, for the checks that can only count: one
    /// descriptor left by every start would exceed it.
    static let othersMargin = 40

    static var pluginThreads: Int {
        let tasks = (try? FileManager.default.contentsOfDirectory(atPath: "/proc/self/task")) ?? []
        return tasks.filter { (try? String(contentsOfFile: "/proc/self/task/\($0)/comm", encoding: .utf8))?.hasPrefix("feedd-plugin") == true }.count
    }

    /// `condition`, within 5 s: a thread that has finished its work still takes a moment to end.
    static func eventually(_ condition: () -> Bool) async -> Bool {
        let deadline = ContinuousClock.now + .seconds(5)
        while !condition() {
            guard ContinuousClock.now < deadline else { return false }
            try? await Task.sleep(for: .milliseconds(10))
        }
        return true
    }

    /// Starts a program, reads a line of it and ends it, so that what Dispatch opens on first use
    /// (for a read with a timeout too) is open before descriptors are counted.
    static func warmUp() async throws {
        let program = try await start("echo ready; exec sleep 600")
        _ = await program.nextLine(timeout: .seconds(10))
        _ = await program.terminate()
        #expect(await eventually { pluginThreads == 0 })
    }

    @Test func ending_a_program_ends_its_group_even_a_child_holding_its_stdout() async throws {
        try await Self.warmUp()
        var process: Subprocess? = try await Self.start("sleep 600 & echo $!; exec sleep 600")
        let child = try await Self.printedPid(process!)
        let (program, keeper) = (process!.pid, process!.processGroup)
        #expect(!ChildProcess.isGone(program) && !ChildProcess.isGone(child) && !ChildProcess.isGone(keeper) && Self.pluginThreads == 1)
        let groupPipes = Self.pipes(of: [program, keeper])
        #expect(groupPipes.count >= 4, "stdin, stdout, stderr and the keeper's control pipe: \(groupPipes)")
        #expect(Self.stillOpenHere(groupPipes).count >= 4, "feedd holds an end of each")
        #expect(Subprocess.describe(await process!.terminate()) == "was killed by signal 15")
        process = nil
        #expect(await Self.eventually { [program, child, keeper].allSatisfy(ChildProcess.isGone) }, "the program, its child and the keeper")
        #expect(await Self.eventually { Self.pluginThreads == 0 && Self.stillOpenHere(groupPipes).isEmpty }, "still open: \(Self.stillOpenHere(groupPipes))")
    }

    @Test func a_group_that_ignores_sigterm_is_killed_after_the_grace_period() async throws {
        let process = try await Self.start("trap '' TERM; sleep 600 & echo $!; wait")
        let child = try await Self.printedPid(process)
        let started = ContinuousClock.now
        let status = await process.terminate(grace: .milliseconds(300))
        #expect(ContinuousClock.now - started >= .milliseconds(300))
        #expect(Subprocess.describe(status) == "was killed by signal 9")
        #expect(await Self.eventually { ChildProcess.isGone(process.pid) && ChildProcess.isGone(child) })
    }

    /// Before, the end of stdout was the only sign, and a child holding it open hid the exit until
    /// the request's timeout.
    @Test func the_exit_of_a_program_whose_child_holds_its_stdout_is_told_at_once() async throws {
        let process = try await Self.start("sleep 600 & echo $!")
        let child = try await Self.printedPid(process)
        #expect(await process.nextLine(timeout: .seconds(10)) == .closed)
        #expect(process.exitStatus.map { Subprocess.describe($0) } == "exited with status 0")
        #expect(!ChildProcess.isGone(child), "the child is left until the group is ended")
        #expect(Subprocess.describe(await process.terminate()) == "exited with status 0")
        #expect(await Self.eventually { ChildProcess.isGone(child) })
    }

    @Test func a_program_that_cannot_be_started_says_why_and_leaves_nothing() async throws {
        try await Self.warmUp()
        let descriptorsBefore = Self.descriptors
        for _ in 1...(2 * Self.othersMargin) {
            do {
                _ = try await Subprocess.start(executable: "/nonexistent/plugin", arguments: [], environment: [:]) { _ in }
                Issue.record("a missing program was started")
            } catch {
                #expect(error.message == "cannot start /nonexistent/plugin: No such file or directory")
            }
        }
        #expect(await Self.eventually { Self.pluginThreads == 0 && Self.descriptors < descriptorsBefore + Self.othersMargin }, "\(Self.descriptors) descriptors, \(descriptorsBefore) before")
    }

    @Test func a_hundred_starts_and_ends_leave_no_thread_and_no_descriptor() async throws {
        try await Self.warmUp()
        let descriptorsBefore = Self.descriptors
        var children: [Int32] = []
        var groupPipes: Set<String> = []
        for _ in 1...100 {
            let process = try await Self.start("sleep 600 & echo $!")
            children.append(try await Self.printedPid(process))
            groupPipes.formUnion(Self.pipes(of: [process.pid, process.processGroup]))
            _ = await process.terminate()
        }
        #expect(await Self.eventually { children.allSatisfy(ChildProcess.isGone) })
        #expect(await Self.eventually { Self.pluginThreads == 0 && Self.stillOpenHere(groupPipes).isEmpty }, "still open: \(Self.stillOpenHere(groupPipes))")
        // The monitor's own wake-up pipe is seen by no child: a leak of it, once a start, shows in the count.
        #expect(await Self.eventually { Self.descriptors < descriptorsBefore + Self.othersMargin }, "\(Self.descriptors) descriptors, \(descriptorsBefore) before")
    }
}
