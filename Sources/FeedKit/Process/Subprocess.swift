import CSpawn
import Foundation
import Glibc

/// A child process on three pipes, for out-of-process adapters.
///
/// The child gets exactly the arguments and environment given, its pipes as stdin, stdout and
/// stderr and no other descriptor, every signal unblocked and at its default disposition, and a
/// process group of its own. Stdout arrives as lines through ``nextLine(timeout:)``; stderr lines
/// go to a closure.
public final class Subprocess: Sendable {
    /// The child's process id.
    public let pid: Int32
    private let input: Int32
    private let lines: LineChannel
    private let exitStatus = Locked<Int32?>(nil)

    /// The longest stdout line accepted; a longer one counts as a broken line.
    public static let maxLineBytes = 16 << 20

    /// Starts `executable` (an absolute path) with `arguments` (not including argv[0]).
    public init(
        executable: String, arguments: [String], environment: [String: String], onErrorLine: @escaping @Sendable (String) -> Void
    ) throws(SourceError) {
        let stdin = try Self.makePipe()
        let stdout = try Self.makePipe()
        let stderr = try Self.makePipe()
        var pid: pid_t = 0
        let argv = ([executable] + arguments).map { strdup($0) } + [nil]
        let envp = environment.sorted { $0.key < $1.key }.map { strdup("\($0.key)=\($0.value)") } + [nil]
        defer {
            argv.forEach { free($0) }
            envp.forEach { free($0) }
            close(stdin.read)
            close(stdout.write)
            close(stderr.write)
        }
        let result = feedd_spawn(executable, argv, envp, stdin.read, stdout.write, stderr.write, &pid)
        guard result == 0 else {
            close(stdin.write)
            close(stdout.read)
            close(stderr.read)
            throw SourceError.transient("cannot start \(executable): \(String(cString: strerror(result)))")
        }
        self.pid = pid
        input = stdin.write
        lines = LineChannel()
        Self.readLines(from: stdout.read, maxBytes: Self.maxLineBytes) { [lines] event in lines.push(event) }
        Self.readLines(from: stderr.read, maxBytes: 64 << 10) { event in
            if case .line(let bytes) = event { onErrorLine(String(decoding: bytes, as: UTF8.self)) }
        }
    }

    deinit {
        close(input)
    }

    /// Writes `line` and a newline to the child's stdin.
    public func send(_ line: [UInt8]) throws(SourceError) {
        var bytes = (line + [UInt8(ascii: "\n")])[...]
        while !bytes.isEmpty {
            let written = bytes.withUnsafeBytes { Glibc.write(input, $0.baseAddress, $0.count) }
            if written < 0 {
                if errno == EINTR { continue }
                throw SourceError.transient("cannot write to the plugin (pid \(pid)): \(String(cString: strerror(errno)))")
            }
            bytes = bytes.dropFirst(written)
        }
    }

    /// The next stdout line, or why there is none.
    public func nextLine(timeout: Duration) async -> LineEvent {
        await lines.next(timeout: timeout)
    }

    /// Sends `signal` to the child.
    public func kill(_ signal: Int32 = SIGKILL) {
        _ = Glibc.kill(pid, signal)
    }

    /// Waits for the child to exit (reaping it) and returns its wait status.
    public func waitForExit() async -> Int32 {
        if let status = exitStatus.withLock({ $0 }) { return status }
        let pid = pid
        let status = await withCheckedContinuation { (continuation: CheckedContinuation<Int32, Never>) in
            Thread.detachNewThread {
                var status: Int32 = 0
                while waitpid(pid, &status, 0) < 0 && errno == EINTR {}
                continuation.resume(returning: status)
            }
        }
        exitStatus.withLock { $0 = status }
        return status
    }

    private static func makePipe() throws(SourceError) -> (read: Int32, write: Int32) {
        var descriptors: [Int32] = [0, 0]
        let result = feedd_pipe(&descriptors)
        guard result == 0 else { throw SourceError.transient("cannot create a pipe: \(String(cString: strerror(result)))") }
        return (descriptors[0], descriptors[1])
    }

    /// Reads `descriptor` on a thread of its own until end of file, handing over each line.
    private static func readLines(from descriptor: Int32, maxBytes: Int, _ deliver: @escaping @Sendable (LineEvent) -> Void) {
        Thread.detachNewThread {
            defer { close(descriptor) }
            var pending: [UInt8] = []
            var chunk = [UInt8](repeating: 0, count: 65_536)
            var discarding = false
            while true {
                let count = chunk.withUnsafeMutableBytes { read(descriptor, $0.baseAddress, $0.count) }
                if count < 0 && errno == EINTR { continue }
                guard count > 0 else { break }
                var start = 0
                while let newline = chunk[start..<count].firstIndex(of: UInt8(ascii: "\n")) {
                    if discarding {
                        discarding = false
                    } else {
                        deliver(.line(pending + chunk[start..<newline]))
                    }
                    pending = []
                    start = newline + 1
                }
                if !discarding { pending += chunk[start..<count] }
                if pending.count > maxBytes {
                    pending = []
                    discarding = true
                    deliver(.tooLong)
                }
            }
            deliver(.closed)
        }
    }
}

/// What reading a child's output gives.
public enum LineEvent: Sendable, Equatable {
    case line([UInt8])
    /// A line longer than the limit (it is skipped).
    case tooLong
    /// End of file: the child closed its output or exited.
    case closed
    /// Nothing within the timeout.
    case timedOut
}

/// Lines from a reader thread to one async reader at a time.
private final class LineChannel: Sendable {
    private struct State {
        var queued: [LineEvent] = []
        var closed = false
        var waiter: CheckedContinuation<LineEvent, Never>?
        var waiterNumber = 0
    }

    private let state = Locked(State())

    func push(_ event: LineEvent) {
        let waiter = state.withLock { state -> CheckedContinuation<LineEvent, Never>? in
            if event == .closed { state.closed = true }
            if let waiter = state.waiter {
                state.waiter = nil
                return waiter
            }
            if event != .closed { state.queued.append(event) }
            return nil
        }
        waiter?.resume(returning: event)
    }

    /// The next line, or `.timedOut` after `timeout` or once the calling task is cancelled: either
    /// way the line that may still come belongs to an abandoned request, and the caller must not
    /// read on as if it answered the next one.
    func next(timeout: Duration) async -> LineEvent {
        let number = state.withLock { state -> Int in
            state.waiterNumber += 1
            return state.waiterNumber
        }
        return await withTaskCancellationHandler {
            await withCheckedContinuation { continuation in
                let (immediate, replaced) = state.withLock { state -> (LineEvent?, CheckedContinuation<LineEvent, Never>?) in
                    if !state.queued.isEmpty { return (state.queued.removeFirst(), nil) }
                    if state.closed { return (.closed, nil) }
                    // One reader at a time; a second one would otherwise leak the first's continuation.
                    let replaced = state.waiter
                    state.waiter = continuation
                    return (nil, replaced)
                }
                replaced?.resume(returning: .timedOut)
                if let immediate {
                    continuation.resume(returning: immediate)
                    return
                }
                // Cancelled before the waiter was registered: the handler found nothing to end.
                if Task.isCancelled { expire(waiter: number) }
                Task {
                    try? await Task.sleep(for: timeout)
                    self.expire(waiter: number)
                }
            }
        } onCancel: {
            expire(waiter: number)
        }
    }

    private func expire(waiter number: Int) {
        let waiter = state.withLock { state -> CheckedContinuation<LineEvent, Never>? in
            guard state.waiterNumber == number, let waiter = state.waiter else { return nil }
            state.waiter = nil
            return waiter
        }
        waiter?.resume(returning: .timedOut)
    }
}
