import CSpawn
import Foundation
import Glibc

/// A child program on three pipes, in a process group of its own, for out-of-process adapters.
///
/// The program gets exactly the arguments and environment given, its pipes as stdin, stdout and
/// stderr and no other descriptor, every signal unblocked and at its default disposition. Stdout
/// arrives as lines through ``nextLine(timeout:)``; stderr lines go to a closure.
///
/// Its group is ended as a whole (``terminate(grace:)``): SIGTERM, then SIGKILL after the grace
/// period, so that children it started, even one that holds its stdout open, go with it. A small
/// keeper process leads the group and waits for the program (`feedd_spawn_kept`): when feedd
/// exits or is killed, even with SIGKILL, the keeper ends the group the same way. A child that
/// leaves the group (setsid, setpgid) escapes both; under systemd, the service's cgroup ends it.
///
/// One thread per program, which ends with its group: no thread, descriptor or process outlives
/// ``terminate(grace:)``.
public final class Subprocess: Sendable {
    /// The program's pid.
    public let pid: Int32
    /// The keeper's pid, which is also the id of the process group.
    public let processGroup: Int32
    /// The write end of the program's stdin; nil once closed.
    private let input: Locked<Int32?>
    private let lines: LineChannel
    private let monitor: ProcessMonitor

    /// The longest stdout line accepted; a longer one counts as a broken line.
    public static let maxLineBytes = 16 << 20

    /// How long a group has between SIGTERM and SIGKILL.
    public static let terminationGrace = Duration.seconds(2)

    private init(pid: Int32, processGroup: Int32, input: Int32, lines: LineChannel, monitor: ProcessMonitor) {
        self.pid = pid
        self.processGroup = processGroup
        self.input = Locked(input)
        self.lines = lines
        self.monitor = monitor
    }

    /// Starts `executable` (an absolute path) with `arguments` (not including argv[0]); returns
    /// once it runs.
    public static func start(
        executable: String, arguments: [String], environment: [String: String], onErrorLine: @escaping @Sendable (String) -> Void
    ) async throws(SourceError) -> Subprocess {
        let monitor = try ProcessMonitor()
        var made: [(read: Int32, write: Int32)] = []
        do {
            for _ in 0..<4 { made.append(try Pipe.make()) }
        } catch {
            for pipe in made { close(pipe.read); close(pipe.write) }
            throw error
        }
        let lines = LineChannel()
        let spawn = SpawnRequest(
            executable: executable, argv: ([executable] + arguments).map { strdup($0) } + [nil],
            envp: environment.sorted { $0.key < $1.key }.map { strdup("\($0.key)=\($0.value)") } + [nil],
            stdin: made[0], stdout: made[1], stderr: made[2], control: made[3], grace: terminationGrace)
        do {
            let (keeper, program) = try await monitor.start(spawn, lines: lines, onErrorLine: onErrorLine)
            return Subprocess(pid: program, processGroup: keeper, input: made[0].write, lines: lines, monitor: monitor)
        } catch {
            close(made[0].write)
            throw error
        }
    }

    deinit {
        input.withLock { $0.map { _ = close($0) } }
        monitor.requestTermination(grace: Self.terminationGrace)
    }

    /// Writes `line` and a newline to the program's stdin. Called by one task at a time, as is
    /// ``terminate(grace:)``.
    public func send(_ line: [UInt8]) throws(SourceError) {
        guard let descriptor = input.withLock({ $0 }) else {
            throw SourceError.transient("the plugin (pid \(pid)) has been stopped")
        }
        var bytes = (line + [UInt8(ascii: "\n")])[...]
        while !bytes.isEmpty {
            let written = bytes.withUnsafeBytes { Glibc.write(descriptor, $0.baseAddress, $0.count) }
            if written < 0 {
                if errno == EINTR { continue }
                throw SourceError.transient("cannot write to the plugin (pid \(pid)): \(String(cString: strerror(errno)))")
            }
            bytes = bytes.dropFirst(written)
        }
    }

    /// The next stdout line, or why there is none: ``LineEvent/closed`` once the program has exited
    /// (after the lines it wrote), even while a child it left behind holds stdout open.
    public func nextLine(timeout: Duration) async -> LineEvent {
        await lines.next(timeout: timeout)
    }

    /// The program's wait status, once it has exited.
    public var exitStatus: Int32? { monitor.programStatus }

    /// Ends the process group: closes the program's stdin, sends the group SIGTERM, and SIGKILL
    /// once the program has exited and nothing of the group holds its output, or after `grace`.
    /// Returns the program's wait status; nil if it was killed before it could be read.
    public func terminate(grace: Duration = terminationGrace) async -> Int32? {
        input.withLock { descriptor in
            descriptor.map { _ = close($0) }
            descriptor = nil
        }
        return await monitor.terminate(grace: grace)
    }

    /// A wait status as words: `exited with status 3`, `was killed by signal 9`.
    public static func describe(_ status: Int32?) -> String {
        guard let status else { return "was killed" }
        // WIFEXITED/WEXITSTATUS and WTERMSIG, which Swift's Glibc module does not import.
        if status & 0x7f == 0 { return "exited with status \((status >> 8) & 0xff)" }
        return "was killed by signal \(status & 0x7f)"
    }
}
