import CSystemd
import FeedKit
import Foundation
import Glibc

/// Writes log records the way systemd's own daemons do. When stderr is the journal
/// (`JOURNAL_STREAM` names it), each record goes to journald through libsystemd's
/// sd_journal_sendv(3) with its priority and structured fields, so
/// `journalctl -u feedd FEEDD_FEED=users` works. Otherwise it is one line on stderr, prefixed
/// with the level's name (`warning: …`).
public final class JournalLogSink: LogSink {
    private let minimumLevel: Locked<LogLevel>
    private let toJournal: Bool
    private let identifier: String

    public init(
        minimumLevel: LogLevel = .info, environment: [String: String] = ProcessInfo.processInfo.environment,
        identifier: String = "feedd"
    ) {
        self.minimumLevel = Locked(minimumLevel)
        toJournal = JournalStream(environment: environment)?.matches(descriptor: STDERR_FILENO) ?? false
        self.identifier = identifier
    }

    /// Changes which lines are written (the config's `log_level`, applied again on reload).
    public func setMinimumLevel(_ level: LogLevel) {
        minimumLevel.withLock { $0 = level }
    }

    public func write(_ level: LogLevel, _ message: String) {
        write(level, message, fields: LogFields())
    }

    public func write(_ level: LogLevel, _ message: String, fields: LogFields) {
        minimumLevel.withLock { minimum in
            guard level <= minimum else { return }
            // Under the lock, so records keep their order and stderr lines never interleave.
            if toJournal, send(JournalRecord(level: level, message: message, fields: fields, identifier: identifier)) { return }
            // With journald unreachable, stderr still reaches it as a stream: the sd-daemon(3)
            // prefix keeps the priority.
            let prefix = toJournal ? "<\(level.rawValue)>" : "\(level.name): "
            writeToStandardError(prefix + message.replacingOccurrences(of: "\n", with: " ") + "\n")
        }
    }

    /// Whether journald took the record.
    private func send(_ record: JournalRecord) -> Bool {
        // Every field in one buffer, so each iovec points into memory that lives through the call.
        var bytes: [UInt8] = []
        var ranges: [Range<Int>] = []
        for field in record.fields {
            let start = bytes.count
            bytes += field.utf8
            ranges.append(start..<bytes.count)
        }
        return bytes.withUnsafeMutableBytes { buffer in
            withUnsafeTemporaryAllocation(of: iovec.self, capacity: ranges.count) { vectors in
                for (index, range) in ranges.enumerated() {
                    vectors[index] = iovec(iov_base: buffer.baseAddress! + range.lowerBound, iov_len: range.count)
                }
                return sd_journal_sendv(vectors.baseAddress, Int32(ranges.count)) >= 0
            }
        }
    }

    /// write(2) rather than FileHandle, which traps when stderr's reader has gone away: a lost
    /// log line must never take the daemon down. One write per line keeps journald from splitting it.
    private func writeToStandardError(_ line: String) {
        var bytes = Array(line.utf8)[...]
        while !bytes.isEmpty {
            let written = bytes.withUnsafeBytes { Glibc.write(STDERR_FILENO, $0.baseAddress, $0.count) }
            if written < 0 && errno == EINTR { continue }
            guard written > 0 else { return }
            bytes = bytes.dropFirst(written)
        }
    }
}
