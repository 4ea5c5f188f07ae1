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
    /// Whether the metrics give every consumer's lag (`daemon.metrics_consumers`).
    public var metricsConsumers: Bool

    public init(daemon: DaemonSettings) {
        maxClients = daemon.maxClients
        maxLineBytes = daemon.maxLineBytes
        maxSubscriptions = daemon.maxSubscriptions
        stallTimeout = daemon.stallTimeout
        metricsConsumers = daemon.metricsConsumers
        access = AccessPolicy(uids: daemon.allowUIDs, gids: daemon.allowGIDs, groupMembers: daemon.allowGroupMemberUIDs)
    }
}

/// Who may connect: everyone when both lists are empty, else the listed users and the members
/// (primary or listed supplementary) of the listed groups. Every name was resolved when the config
/// was loaded, so admitting a client is a set lookup.
public struct AccessPolicy: Sendable {
    private let uids: Set<UInt32>
    private let gids: Set<UInt32>

    public init(uids: [UInt32], gids: [UInt32], groupMembers: [UInt32]) {
        self.uids = Set(uids + groupMembers)
        self.gids = Set(gids)
    }

    public var isOpen: Bool { uids.isEmpty && gids.isEmpty }

    public func allows(_ peer: PeerCredentials) -> Bool {
        isOpen || uids.contains(peer.uid) || gids.contains(peer.gid)
    }
}
