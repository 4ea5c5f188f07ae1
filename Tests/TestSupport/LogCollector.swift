import Foundation

/// The lines a child process writes, collected as they arrive so tests can wait for one.
public final class LogCollector: @unchecked Sendable {
    // Sendable: every field is guarded by `condition`.
    private let condition = NSCondition()
    private var pending = Data()
    private var collected: [String] = []
    private var closed = false

    public init() {}

    /// Reads `handle` on a thread of its own until end of file, collecting its lines; the
    /// collector closes the moment the last writer is gone, so the log is complete then.
    public func collect(from handle: FileHandle) {
        Thread.detachNewThread { [self] in
            while true {
                let data = handle.availableData
                if data.isEmpty { break }
                append(data)
            }
            close()
        }
    }

    func append(_ data: Data) {
        condition.lock()
        pending.append(data)
        while let newline = pending.firstIndex(of: UInt8(ascii: "\n")) {
            collected.append(String(decoding: pending[pending.startIndex..<newline], as: UTF8.self))
            pending.removeSubrange(pending.startIndex...newline)
        }
        condition.broadcast()
        condition.unlock()
    }

    func close() {
        condition.lock()
        if !pending.isEmpty { collected.append(String(decoding: pending, as: UTF8.self)) }
        pending = Data()
        closed = true
        condition.broadcast()
        condition.unlock()
    }

    /// Every complete line so far.
    public var lines: [String] {
        condition.lock()
        defer { condition.unlock() }
        return collected
    }

    public var text: String { lines.joined(separator: "\n") }

    /// Waits until a line contains `text`; throws on timeout or when the process closes its stderr first.
    @discardableResult
    public func waitForLine(containing text: String, timeout: Duration = .seconds(15)) throws -> String {
        try wait(timeout: timeout, what: "a log line containing \"\(text)\"") { lines in lines.first { $0.contains(text) } }
    }

    func waitUntilClosed(timeout: Duration) throws {
        condition.lock()
        defer { condition.unlock() }
        let deadline = Date(timeIntervalSinceNow: Double(timeout.components.seconds))
        while !closed {
            guard condition.wait(until: deadline) else { throw TestFailure("stderr still open after \(timeout)") }
        }
    }

    private func wait<T>(timeout: Duration, what: String, _ find: ([String]) -> T?) throws -> T {
        let deadline = Date(timeIntervalSinceNow: Double(timeout.wholeMilliseconds) / 1000)
        condition.lock()
        defer { condition.unlock() }
        while true {
            if let found = find(collected) { return found }
            if closed { throw TestFailure("feedd closed its log before \(what) appeared; log:\n\(collected.joined(separator: "\n"))") }
            guard condition.wait(until: deadline) else {
                throw TestFailure("no \(what) within \(timeout); log:\n\(collected.joined(separator: "\n"))")
            }
        }
    }
}
