import FeedEngine
import Glibc

/// The limits and access rules the server enforces, taken from `[daemon]`.
public struct ServerSettings: Sendable {
    public var maxClients: Int
    public var maxLineBytes: Int
    public var maxSubscriptions: Int
    /// A client whose output stays unwritable this long is disconnected.
    public var stallTimeout: Duration
    public var access: AccessPolicy
    /// Pages a connection may hold unsent before its subscriptions stop advancing.
    public var pageWindow = 4
    /// Unsent bytes above which the server stops reading a connection's requests.
    public var inputPauseBytes = 1 << 20

    public init(daemon: DaemonSettings) {
        maxClients = daemon.maxClients
        maxLineBytes = daemon.maxLineBytes
        maxSubscriptions = daemon.maxSubscriptions
        stallTimeout = daemon.stallTimeout
        access = AccessPolicy(uids: daemon.allowUIDs, groups: daemon.allowGroups)
    }
}

/// Who may connect: everyone when both lists are empty, else the listed users and the members
/// (primary or supplementary) of the listed groups.
public struct AccessPolicy: Sendable {
    private let uids: Set<UInt32>
    private let gids: Set<UInt32>
    private let memberNames: Set<String>

    public init(uids: [UInt32], groups: [String]) {
        self.uids = Set(uids)
        var gids: Set<UInt32> = []
        var memberNames: Set<String> = []
        for name in groups {
            guard let group = getgrnam(name) else { continue }
            gids.insert(group.pointee.gr_gid)
            var member = group.pointee.gr_mem
            while let name = member?.pointee {
                memberNames.insert(String(cString: name))
                member = member?.advanced(by: 1)
            }
        }
        self.gids = gids
        self.memberNames = memberNames
    }

    public var isOpen: Bool { uids.isEmpty && gids.isEmpty }

    public func allows(_ peer: PeerCredentials) -> Bool {
        if isOpen || uids.contains(peer.uid) || gids.contains(peer.gid) { return true }
        guard !memberNames.isEmpty, let user = getpwuid(peer.uid) else { return false }
        return memberNames.contains(String(cString: user.pointee.pw_name))
    }
}
