import Glibc

/// Whether a descriptor is the stream systemd connected to the journal, as `JOURNAL_STREAM`
/// (`DEVICE:INODE`) names it. A service's stderr is the journal only while the two match: a
/// process that inherited the variable but writes elsewhere must not talk to journald.
public struct JournalStream: Sendable, Equatable {
    public let device: UInt64
    public let inode: UInt64

    /// Parses `JOURNAL_STREAM`; nil when it is missing or malformed.
    public init?(environment: [String: String]) {
        guard let value = environment["JOURNAL_STREAM"] else { return nil }
        let parts = value.split(separator: ":", omittingEmptySubsequences: false)
        guard parts.count == 2, let device = UInt64(parts[0]), let inode = UInt64(parts[1]) else { return nil }
        self.device = device
        self.inode = inode
    }

    /// Whether `descriptor` is this stream.
    public func matches(descriptor: Int32) -> Bool {
        var status = stat()
        guard fstat(descriptor, &status) == 0 else { return false }
        return UInt64(status.st_dev) == device && UInt64(status.st_ino) == inode
    }
}
