import CSpawn
import Foundation
import Glibc

/// The one thread of a plugin's process group: it forks the keeper (see `feedd_spawn_kept`),
/// reads the program's stdout and stderr, learns of its exit from the keeper, and ends the group
/// when asked; then it reaps the keeper, closes every descriptor and ends.
///
/// The keeper is forked from this thread because its parent-death signal is bound to the thread
/// that forked it, not to the process: this thread lives exactly as long as the keeper, so the
/// signal comes only when feedd itself is gone. And the keeper, never reaped before the group has
/// been sent SIGKILL, holds the group's id, which therefore cannot name another group by then.
final class ProcessMonitor: Sendable {
    private struct State {
        /// The program's wait status, once the keeper has reported it.
        var programStatus: Int32?
        /// Set once ending the group was asked for: how long it has after SIGTERM.
        var grace: Duration?
        var finished = false
        var waiters: [CheckedContinuation<Int32?, Never>] = []
    }

    private let state = Locked(State())
    /// A byte written here wakes the thread out of poll(2). Closed in deinit only, when the
    /// thread, which holds this object, has ended.
    private let wake: (read: Int32, write: Int32)

    init() throws(SourceError) {
        wake = try Pipe.make()
        _ = feedd_set_nonblocking(wake.read)
        _ = feedd_set_nonblocking(wake.write)
    }

    deinit {
        close(wake.read)
        close(wake.write)
    }

    var programStatus: Int32? { state.withLock { $0.programStatus } }

    /// Asks the thread to end the group (SIGTERM, then SIGKILL after `grace`) and waits until it
    /// has; returns the program's wait status, nil if it was killed before the keeper could say.
    func terminate(grace: Duration) async -> Int32? {
        await withCheckedContinuation { continuation in
            let finishedStatus = state.withLock { state -> Int32?? in
                if state.finished { return .some(state.programStatus) }
                state.waiters.append(continuation)
                if state.grace == nil { state.grace = grace }
                return .none
            }
            if let finishedStatus { continuation.resume(returning: finishedStatus) } else { wakeUp() }
        }
    }

    /// Asks for the group's end without waiting for it.
    func requestTermination(grace: Duration) {
        let asked = state.withLock { state -> Bool in
            guard !state.finished, state.grace == nil else { return false }
            state.grace = grace
            return true
        }
        if asked { wakeUp() }
    }

    private func wakeUp() {
        var byte: UInt8 = 1
        _ = write(wake.write, &byte, 1)
    }

    /// Starts the thread, which starts the program; returns once it runs (its keeper's and its
    /// own pid), or throws why it could not start.
    func start(_ spawn: SpawnRequest, lines: LineChannel, onErrorLine: @escaping @Sendable (String) -> Void) async throws(SourceError) -> (
        keeper: pid_t, program: pid_t
    ) {
        let result = await withCheckedContinuation { (continuation: CheckedContinuation<Result<(pid_t, pid_t), SourceError>, Never>) in
            let thread = Thread { [self] in
                // Named for ps and /proc: Foundation's name stays inside Foundation on Linux.
                feedd_name_thread("feedd-plugin")
                guard var loop = MonitorLoop(spawn, monitor: self, lines: lines, onErrorLine: onErrorLine, started: continuation) else { return }
                loop.run()
            }
            thread.start()
        }
        return try result.get()
    }

    /// Called by the thread once the group is gone and the keeper reaped.
    fileprivate func finish() {
        let (waiters, status) = state.withLock { state in
            state.finished = true
            defer { state.waiters = [] }
            return (state.waiters, state.programStatus)
        }
        for waiter in waiters { waiter.resume(returning: status) }
    }

    fileprivate func programExited(status: Int32) {
        state.withLock { $0.programStatus = status }
    }

    fileprivate var requestedGrace: Duration? { state.withLock { $0.grace } }

    fileprivate var wakeDescriptor: Int32 { wake.read }
}

/// What to start, with the descriptors made for it: the child's ends of its three pipes, which
/// the thread closes once the program runs, and feedd's ends, which it keeps.
struct SpawnRequest: @unchecked Sendable {
    // Sendable: the C strings are allocated for this request, read by the thread that spawns,
    // and freed by it, once.
    let executable: String
    let argv: [UnsafeMutablePointer<CChar>?]
    let envp: [UnsafeMutablePointer<CChar>?]
    let stdin: (read: Int32, write: Int32)
    let stdout: (read: Int32, write: Int32)
    let stderr: (read: Int32, write: Int32)
    let control: (read: Int32, write: Int32)
    let grace: Duration

    func freeStrings() {
        argv.forEach { free($0) }
        envp.forEach { free($0) }
    }
}

/// The monitor thread's own state: the descriptors it reads and the lines they carry.
private struct MonitorLoop {
    let keeper: pid_t
    let monitor: ProcessMonitor
    let lines: LineChannel
    let onErrorLine: @Sendable (String) -> Void
    var stdout: Int32?
    var stderr: Int32?
    var control: Int32?
    var outputLines = LineSplitter(maxBytes: Subprocess.maxLineBytes)
    var errorLines = LineSplitter(maxBytes: 64 << 10)
    /// Whether the program has exited (or its keeper is gone, and it cannot be told).
    var programGone = false
    /// When SIGKILL follows the SIGTERM sent to the group, once its end was asked for.
    var killAt: ContinuousClock.Instant?

    /// Spawns the program from this thread and tells `started`; nil if it could not start.
    init?(
        _ spawn: SpawnRequest, monitor: ProcessMonitor, lines: LineChannel, onErrorLine: @escaping @Sendable (String) -> Void,
        started: CheckedContinuation<Result<(pid_t, pid_t), SourceError>, Never>
    ) {
        var keeper: pid_t = 0
        var program: pid_t = 0
        let result = feedd_spawn_kept(
            spawn.executable, spawn.argv, spawn.envp, spawn.stdin.read, spawn.stdout.write, spawn.stderr.write, spawn.control.read,
            spawn.control.write, Int32(clamping: spawn.grace.wholeMilliseconds), &keeper, &program)
        spawn.freeStrings()
        for descriptor in [spawn.stdin.read, spawn.stdout.write, spawn.stderr.write] { close(descriptor) }
        guard result == 0 else {
            for descriptor in [spawn.stdout.read, spawn.stderr.read, spawn.control.read] { close(descriptor) }
            monitor.finish()
            started.resume(returning: .failure(.transient("cannot start \(spawn.executable): \(String(cString: strerror(result)))")))
            return nil
        }
        for descriptor in [spawn.stdout.read, spawn.stderr.read, spawn.control.read] { _ = feedd_set_nonblocking(descriptor) }
        self.keeper = keeper
        self.monitor = monitor
        self.lines = lines
        self.onErrorLine = onErrorLine
        stdout = spawn.stdout.read
        stderr = spawn.stderr.read
        control = spawn.control.read
        started.resume(returning: .success((keeper, program)))
    }

    /// Until the group has ended: then the keeper is killed with what is left of it, and reaped.
    mutating func run() {
        while !groupIsDone {
            var descriptors = [stdout, stderr, control, monitor.wakeDescriptor].compactMap { $0 }.map {
                pollfd(fd: $0, events: Int16(POLLIN), revents: 0)
            }
            let timeout = killAt.map { Int32(clamping: max(0, (($0 - .now).wholeMilliseconds))) } ?? -1
            guard poll(&descriptors, nfds_t(descriptors.count), timeout) >= 0 || errno == EINTR else { break }
            for ready in descriptors where ready.revents != 0 { handle(ready.fd) }
        }
        kill(-keeper, SIGKILL)
        // The keeper dies with the program, and can no longer say how it ended: by this SIGKILL.
        if monitor.programStatus == nil { monitor.programExited(status: SIGKILL) }
        while waitpid(keeper, nil, 0) < 0 && errno == EINTR {}
        for descriptor in [stdout, stderr, control].compactMap({ $0 }) { close(descriptor) }
        lines.push(.closed)
        monitor.finish()
    }

    /// Done once the program has exited and whatever it left holding its output is gone too, or
    /// once the grace has run out.
    private var groupIsDone: Bool {
        guard let killAt else { return false }
        return ContinuousClock.now >= killAt || (programGone && stdout == nil && stderr == nil)
    }

    private mutating func handle(_ descriptor: Int32) {
        switch descriptor {
        case stdout: readOutput()
        case stderr: readErrors()
        case control: readControl()
        default: readWake()
        }
    }

    /// Reads what stdout has now; at its end, the program's output is over.
    @discardableResult
    private mutating func readOutput() -> ReadOutcome {
        guard let descriptor = stdout else { return .end }
        let outcome = Self.read(descriptor)
        switch outcome {
        case .bytes(let bytes): for event in outputLines.split(bytes[...]) { lines.push(event) }
        case .end:
            close(descriptor)
            stdout = nil
            lines.push(.closed)
        case .none: break
        }
        return outcome
    }

    private mutating func readErrors() {
        guard let descriptor = stderr else { return }
        switch Self.read(descriptor) {
        case .bytes(let bytes):
            for case .line(let line) in errorLines.split(bytes[...]) { onErrorLine(String(decoding: line, as: UTF8.self)) }
        case .end:
            close(descriptor)
            stderr = nil
        case .none: break
        }
    }

    /// The keeper's messages: the program has exited (all it wrote before is in the stdout pipe
    /// by then, and is read first), or, at the pipe's end, the keeper itself is gone.
    private mutating func readControl() {
        guard let descriptor = control else { return }
        var message = feedd_keeper_message()
        let count = Glibc.read(descriptor, &message, MemoryLayout<feedd_keeper_message>.size)
        if count < 0, errno == EAGAIN || errno == EINTR { return }
        if count == MemoryLayout<feedd_keeper_message>.size, message.kind == FEEDD_KEEPER_EXITED {
            monitor.programExited(status: message.value)
        } else {
            close(descriptor)
            control = nil
        }
        programGone = true
        // A child the program left behind may hold stdout open: its end is not waited for.
        while case .bytes = readOutput() {}
        lines.push(.closed)
    }

    private mutating func readWake() {
        var bytes = [UInt8](repeating: 0, count: 64)
        _ = Glibc.read(monitor.wakeDescriptor, &bytes, bytes.count)
        guard killAt == nil, let grace = monitor.requestedGrace else { return }
        kill(-keeper, SIGTERM)
        killAt = .now + grace
    }

    private enum ReadOutcome {
        case bytes([UInt8])
        case end
        case none
    }

    /// One read of a non-blocking descriptor.
    private static func read(_ descriptor: Int32) -> ReadOutcome {
        var chunk = [UInt8](repeating: 0, count: 65_536)
        let count = chunk.withUnsafeMutableBytes { Glibc.read(descriptor, $0.baseAddress, $0.count) }
        if count > 0 { return .bytes(Array(chunk[..<count])) }
        if count == 0 { return .end }
        return errno == EAGAIN || errno == EINTR ? .none : .end
    }
}

/// Pipes whose both ends are close-on-exec.
enum Pipe {
    static func make() throws(SourceError) -> (read: Int32, write: Int32) {
        var descriptors: [Int32] = [0, 0]
        let result = feedd_pipe(&descriptors)
        guard result == 0 else { throw SourceError.transient("cannot create a pipe: \(String(cString: strerror(result)))") }
        return (descriptors[0], descriptors[1])
    }
}
