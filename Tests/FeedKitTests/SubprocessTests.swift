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

    static var descriptors: Int { (try? FileManager.default.contentsOfDirectory(atPath: "/proc/self/fd").count) ?? -1 }

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
        let descriptorsBefore = Self.descriptors
        var process: Subprocess? = try await Self.start("sleep 600 & echo $!; exec sleep 600")
        let child = try await Self.printedPid(process!)
        let (program, keeper) = (process!.pid, process!.processGroup)
        #expect(!ChildProcess.isGone(program) && !ChildProcess.isGone(child) && !ChildProcess.isGone(keeper) && Self.pluginThreads == 1)
        #expect(Subprocess.describe(await process!.terminate()) == "was killed by signal 15")
        process = nil
        #expect(await Self.eventually { [program, child, keeper].allSatisfy(ChildProcess.isGone) }, "the program, its child and the keeper")
        #expect(await Self.eventually { Self.pluginThreads == 0 && Self.descriptors == descriptorsBefore }, "\(Self.descriptors) descriptors, \(descriptorsBefore) before")
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
        do {
            _ = try await Subprocess.start(executable: "/nonexistent/plugin", arguments: [], environment: [:]) { _ in }
            Issue.record("a missing program was started")
        } catch {
            #expect(error.message == "cannot start /nonexistent/plugin: No such file or directory")
        }
        #expect(await Self.eventually { Self.pluginThreads == 0 && Self.descriptors == descriptorsBefore })
    }

    @Test func a_hundred_starts_and_ends_leave_the_thread_and_descriptor_counts_where_they_were() async throws {
        try await Self.warmUp()
        let descriptorsBefore = Self.descriptors
        var children: [Int32] = []
        for _ in 1...100 {
            let process = try await Self.start("sleep 600 & echo $!")
            children.append(try await Self.printedPid(process))
            _ = await process.terminate()
        }
        #expect(await Self.eventually { children.allSatisfy(ChildProcess.isGone) })
        #expect(await Self.eventually { Self.pluginThreads == 0 && Self.descriptors == descriptorsBefore })
    }
}
