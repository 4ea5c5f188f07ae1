import FeedKit
import Foundation
import Glibc
import Synchronization

/// Writes log lines to stderr, one line each, the way systemd's own daemons do: with the
/// sd-daemon(3) priority prefix (`<4>`) when stderr is the journal (`JOURNAL_STREAM` is set),
/// and with the level's name otherwise.
public final class JournalLogSink: LogSink {
    private let minimumLevel: Mutex<LogLevel>
    private let toJournal: Bool

    public init(minimumLevel: LogLevel = .info, environment: [String: String] = ProcessInfo.processInfo.environment) {
        self.minimumLevel = Mutex(minimumLevel)
        toJournal = environment["JOURNAL_STREAM"] != nil
    }

    /// Changes which lines are written (the config's `log_level`, applied again on reload).
    public func setMinimumLevel(_ level: LogLevel) {
        minimumLevel.withLock { $0 = level }
    }

    public func write(_ level: LogLevel, _ message: String) {
        minimumLevel.withLock { minimum in
            guard level <= minimum else { return }
            // Lines written under the lock never interleave, and one write(2) per line keeps
            // journald from splitting them.
            var line = toJournal ? "<\(level.rawValue)>" : "\(level.name): "
            line += message.replacingOccurrences(of: "\n", with: " ")
            line += "\n"
            // write(2) rather than FileHandle, which traps when stderr's reader has gone away:
            // a lost log line must never take the daemon down.
            var bytes = Array(line.utf8)[...]
            while !bytes.isEmpty {
                let written = bytes.withUnsafeBytes { Glibc.write(STDERR_FILENO, $0.baseAddress, $0.count) }
                if written < 0 && errno == EINTR { continue }
                guard written > 0 else { return }
                bytes = bytes.dropFirst(written)
            }
        }
    }
}
