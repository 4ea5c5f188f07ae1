import CSystemd
import Foundation

/// Tells systemd how the daemon is doing, through libsystemd's sd_notify(3). Every call is a
/// no-op when the daemon was not started by systemd (`NOTIFY_SOCKET` unset).
public struct SystemdNotifier: Sendable {
    public init() {}

    /// Sends newline-separated `KEY=value` assignments, such as `READY=1`.
    public func notify(_ assignments: String...) {
        _ = sd_notify(0, assignments.joined(separator: "\n"))
    }

    public func ready() { notify("READY=1") }

    public func status(_ text: String) { notify("STATUS=\(text)") }

    public func stopping() { notify("STOPPING=1") }

    /// `RELOADING=1` with the `MONOTONIC_USEC` that systemd 253+ expects for `Type=notify-reload`.
    public func reloading() {
        var now = timespec()
        clock_gettime(CLOCK_MONOTONIC, &now)
        let microseconds = UInt64(now.tv_sec) * 1_000_000 + UInt64(now.tv_nsec) / 1_000
        notify("RELOADING=1", "MONOTONIC_USEC=\(microseconds)")
    }

    public func watchdog() { notify("WATCHDOG=1") }

    /// The watchdog interval systemd expects pings within, or nil when the watchdog is off.
    public func watchdogInterval() -> Duration? {
        var microseconds: UInt64 = 0
        guard sd_watchdog_enabled(0, &microseconds) > 0, microseconds > 0 else { return nil }
        return .microseconds(Int64(microseconds))
    }

    /// The listening sockets systemd passed (socket activation), in order, each with its
    /// `FileDescriptorName=` (by default the socket unit's name); empty when none. The
    /// environment variables are unset so child processes do not see them.
    public func listeningSockets() -> [(descriptor: Int32, name: String)] {
        var names: UnsafeMutablePointer<UnsafeMutablePointer<CChar>?>?
        let count = sd_listen_fds_with_names(1, &names)
        guard count > 0 else { return [] }
        defer {
            for index in 0..<Int(count) { free(names?[index]) }
            free(names)
        }
        return (0..<count).map { index in
            (SD_LISTEN_FDS_START + index, names?[Int(index)].map { String(cString: $0) } ?? "")
        }
    }
}
