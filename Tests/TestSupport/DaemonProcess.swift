import FeedClient
import FeedKit
import Foundation
import Synchronization

/// A real `feedd` process for a test: its own directory, config, socket and captured log.
///
/// The daemon is killed when the value is released, so a failing test leaves nothing behind.
public final class DaemonProcess: @unchecked Sendable {
    // Sendable: `process` is configured before launch and only read afterwards; the log has its own lock.
    public let directory: TemporaryDirectory
    public let socketPath: String
    public let configPath: String
    private let process = Process()
    public let log = LogCollector()

    /// Writes `config` to `feedd.toml` in a new directory and starts `feedd --config … --socket …`.
    /// Returns once the daemon logs that it is listening; throws if it exits first.
    public init(
        config: String, executable: String = FeeddBinaries.feedd, arguments: [String]? = nil, environment: [String: String] = [:],
        directory: TemporaryDirectory? = nil, waitUntilListening: Bool = true
    ) throws {
        self.directory = try directory ?? TemporaryDirectory()
        socketPath = self.directory.path("feedd.sock")
        configPath = self.directory.path("feedd.toml")
        try config.write(toFile: configPath, atomically: true, encoding: .utf8)
        process.executableURL = URL(fileURLWithPath: executable)
        process.arguments = arguments ?? ["--config", configPath, "--socket", socketPath]
        // A state directory of its own: as root the default would be /var/lib/feedd, shared
        // (and locked) by every daemon the tests start.
        var baseEnvironment = [
            "PATH": "/usr/bin:/bin", "HOME": self.directory.path, "XDG_RUNTIME_DIR": self.directory.path,
            "STATE_DIRECTORY": self.directory.path("state"),
        ]
        // Under `swift test --sanitize=…` the daemon is instrumented too; pass the sanitizer's
        // options on, so that with halt_on_error a race or memory error in it fails the test.
        for name in Sanitizer.optionVariables {
            if let value = ProcessInfo.processInfo.environment[name] { baseEnvironment[name] = value }
        }
        baseEnvironment.merge(environment) { _, new in new }
        process.environment = baseEnvironment
        process.currentDirectoryURL = URL(fileURLWithPath: self.directory.path)
        let (_, errors) = try ChildProcess.launch(process)
        log.collect(from: errors)
        if waitUntilListening {
            try log.waitForLine(containing: "listening on")
        }
    }

    deinit {
        if process.isRunning {
            kill(process.processIdentifier, SIGKILL)
            process.waitUntilExit()
        }
    }

    public var pid: Int32 { process.processIdentifier }
    public var isRunning: Bool { process.isRunning }

    /// A new client connection, past the `hello` line.
    public func connect() throws -> TestClient {
        let client = try TestClient(path: socketPath)
        let hello = try client.read()
        guard hello["type"] == "hello" else { throw TestFailure("expected hello, got \(hello.jsonText)") }
        return client
    }

    /// Asks `status` on one connection until `condition` holds of the answer, and returns that
    /// answer; throws, naming `what` was awaited, after `timeout`. The daemon announces no change of
    /// its status, so this polls, every 20 ms.
    @discardableResult
    public func waitForStatus(
        _ what: String, within timeout: Duration = .seconds(15), until condition: (JSONValue) -> Bool
    ) throws -> JSONValue {
        let client = try connect()
        let deadline = ContinuousClock.now + timeout
        while true {
            let status = try client.request("status")
            if condition(status) { return status }
            guard ContinuousClock.now < deadline else { throw TestFailure("status did not show that \(what) within \(timeout): \(status.jsonText)") }
            usleep(20_000)
        }
    }

    public func send(signal: Int32) {
        kill(process.processIdentifier, signal)
    }

    /// Waits for the process to exit and returns its exit status; throws after `timeout`.
    @discardableResult
    public func waitForExit(timeout: Duration = .seconds(15)) throws -> Int32 {
        let exited = DispatchSemaphore(value: 0)
        let process = process
        DispatchQueue.global().async {
            process.waitUntilExit()
            exited.signal()
        }
        guard exited.wait(timeout: .now() + .milliseconds(Int(timeout.wholeMilliseconds))) == .success else {
            throw TestFailure("feedd did not exit within \(timeout)")
        }
        try log.waitUntilClosed(timeout: .seconds(5))
        return process.terminationStatus
    }

    /// A value from /proc/PID/status in kB, such as `RssAnon` or `VmRSS`.
    /// The CPU time the daemon has used so far, user and system, in seconds; with `mainThreadOnly`,
    /// only its main thread's (the event loop's).
    public func cpuSeconds(mainThreadOnly: Bool = false) throws -> Double {
        let stat = try String(contentsOfFile: mainThreadOnly ? "/proc/\(pid)/task/\(pid)/stat" : "/proc/\(pid)/stat", encoding: .utf8)
        // Fields after the command name, which is in parentheses and may hold spaces: utime and
        // stime are the 12th and 13th of them.
        guard let afterName = stat.split(separator: ")").last?.split(separator: " "), afterName.count > 12,
              let user = Double(afterName[11]), let system = Double(afterName[12])
        else { throw TestFailure("cannot read /proc/\(pid)/stat") }
        return (user + system) / Double(sysconf(Int32(_SC_CLK_TCK)))
    }

    /// The CPU time the daemon has used so far, all its threads together, those that have
    /// exited included, in seconds: fine enough for a span of a few milliseconds, where
    /// ``cpuSeconds(mainThreadOnly:)`` counts clock ticks of 10 ms (see ``processCPUSeconds(of:)``).
    public func processCPUSeconds() throws -> Double {
        try TestSupport.processCPUSeconds(of: pid)
    }

    public func memory(_ field: String) throws -> Int {
        let status = try String(contentsOfFile: "/proc/\(pid)/status", encoding: .utf8)
        for line in status.split(separator: "\n") where line.hasPrefix("\(field):") {
            if let kilobytes = Int(line.split(separator: " ", omittingEmptySubsequences: true).dropFirst().first ?? "") {
                return kilobytes
            }
        }
        throw TestFailure("no \(field) in /proc/\(pid)/status")
    }

    /// How many file descriptors the daemon has open.
    public func openDescriptorCount() throws -> Int {
        try FileManager.default.contentsOfDirectory(atPath: "/proc/\(pid)/fd").count
    }
}

/// Whether the tests run under a sanitizer, as `swift test --sanitize=…` with its options set.
public enum Sanitizer {
    /// The variables that configure the sanitizers, passed on to every daemon a test starts.
    public static let optionVariables = ["TSAN_OPTIONS", "ASAN_OPTIONS", "LSAN_OPTIONS"]

    /// True when a sanitizer's options are set: memory figures then include its shadow memory
    /// and quarantine, and mean nothing.
    public static var isActive: Bool {
        optionVariables.contains { ProcessInfo.processInfo.environment[$0] != nil }
    }
}

/// Where the built executables are: `$FEEDD_BINARY_DIR`, else beside the test bundle.
public enum FeeddBinaries {
    public static var directory: String {
        if let directory = ProcessInfo.processInfo.environment["FEEDD_BINARY_DIR"] { return directory }
        var url = URL(fileURLWithPath: CommandLine.arguments[0]).resolvingSymlinksInPath()
        while url.path != "/" {
            url.deleteLastPathComponent()
            if FileManager.default.isExecutableFile(atPath: url.appendingPathComponent("feedd").path) { return url.path }
        }
        return ".build/debug"
    }

    public static var feedd: String { "\(directory)/feedd" }
    public static var feedctl: String { "\(directory)/feedctl" }
}

/// A test's own directory under /tmp, removed when released.
public final class TemporaryDirectory: Sendable {
    public let path: String

    public init() throws {
        var template = Array("/tmp/feedd-test-XXXXXX".utf8CString)
        guard let created = template.withUnsafeMutableBufferPointer({ mkdtemp($0.baseAddress!) }) else {
            throw TestFailure("cannot create a temporary directory")
        }
        path = String(cString: created)
    }

    deinit {
        try? FileManager.default.removeItem(atPath: path)
    }

    public func path(_ name: String) -> String { "\(path)/\(name)" }

    /// Writes `text` to `name` in this directory and returns its path.
    @discardableResult
    public func write(_ name: String, _ text: String) throws -> String {
        let file = path(name)
        try FileManager.default.createDirectory(atPath: (file as NSString).deletingLastPathComponent, withIntermediateDirectories: true)
        try text.write(toFile: file, atomically: true, encoding: .utf8)
        return file
    }

    /// Writes `text` to `name` readable and writable by its owner only, as a secret must be, and
    /// returns its path.
    @discardableResult
    public func writeSecret(_ name: String, _ text: String) throws -> String {
        let file = try write(name, text)
        guard chmod(file, 0o600) == 0 else { throw TestFailure("cannot chmod \(file)") }
        return file
    }
}

/// A failed expectation inside a helper, with what was seen.
public struct TestFailure: Error, CustomStringConvertible {
    public let description: String

    public init(_ description: String) {
        self.description = description
    }
}

/// The CPU time process `pid` has used so far, in seconds: its CPU-time clock
/// (`clock_getcpuclockid`), which the kernel keeps in nanoseconds for all its threads, those that
/// have exited included. Summing the threads listed in `/proc/PID/task` misses a thread that
/// ended within the span measured, such as the thread that reads an `rss` document's body.
public func processCPUSeconds(of pid: pid_t) throws -> Double {
    var clock = clockid_t()
    guard clock_getcpuclockid(pid, &clock) == 0 else { throw TestFailure("process \(pid) has no CPU-time clock (it has exited?)") }
    var time = timespec()
    guard clock_gettime(clock, &time) == 0 else { throw TestFailure("cannot read the CPU-time clock of process \(pid): \(String(cString: strerror(errno)))") }
    return Double(time.tv_sec) + Double(time.tv_nsec) / 1e9
}
