import Glibc

/// The file descriptors clients may not take. Feeds open files and upstream sockets, the state
/// store opens its journal, and libdispatch opens `/proc/<tid>/stat` once a second while a global
/// queue has work waiting, and traps if it cannot (`_dispatch_workq_count_runnable_workers`): a
/// daemon whose clients took its last descriptor could crash a second later. So a connection is
/// accepted only while the descriptor it would get is below ``line``, and the rest wait in the
/// kernel's queue until a client leaves.
public struct DescriptorReserve: Sendable, Equatable {
    /// What the daemon keeps for itself under a limit fit for `max_clients` (`LimitNOFILE=` of
    /// the unit is `max_clients` + this).
    public static let wanted = 256

    /// The soft open files limit, and how many descriptors under it clients may not take.
    public let limit: Int
    public let kept: Int
    /// The first descriptor number a client may not take.
    var line: Int32 { Int32(clamping: limit - kept) }

    /// Under an open files limit of `limit`: the last 256 descriptors, or the last quarter of a
    /// limit too low for that, so that a low limit still admits clients.
    public init(openFilesLimit limit: Int) {
        self.limit = limit
        kept = min(Self.wanted, limit / 4)
    }

    /// Under the process's soft `RLIMIT_NOFILE` as it is now.
    public static func current() -> DescriptorReserve {
        var limit = rlimit()
        guard getrlimit(Int32(RLIMIT_NOFILE.rawValue), &limit) == 0, limit.rlim_cur < rlim_t(Int32.max) else {
            return DescriptorReserve(openFilesLimit: Int(Int32.max))
        }
        return DescriptorReserve(openFilesLimit: Int(clamping: limit.rlim_cur))
    }

    /// Why clients get no more descriptors, for the log line of either front.
    public var explanation: String { "the last \(kept) of \(limit) are kept for feeds and the state" }

    /// Whether the next descriptor the process opens would be below the line. The kernel gives
    /// the lowest free number, which duplicating `descriptor` finds (and the copy is closed).
    /// Another thread may open one in between: then a client takes one past the line, and the
    /// accept that runs out of descriptors altogether still pauses accepting.
    public func hasRoomBelowLine(duplicating descriptor: Int32) -> Bool {
        let next = fcntl(descriptor, F_DUPFD_CLOEXEC, 0)
        guard next >= 0 else { return false }
        close(next)
        return next < line
    }
}
