import CNATS

/// A libnats call that failed: which operation, why, and whether it is worth retrying.
///
/// The `code` separates what the engine reacts to differently: the cluster could not be reached
/// in time (degrade, retry later), a compare-and-set lost to another instance (re-read and decide
/// again), nothing stored under that name, or anything else (a bug or a misconfigured server).
public struct NATSError: Error, Sendable, CustomStringConvertible {
    /// What kind of failure this is; new kinds may be added.
    public struct Code: Hashable, Sendable, CustomStringConvertible {
        private enum Kind: Hashable, Sendable {
            case unavailable, conflict, notFound, failed
        }
        private let kind: Kind

        /// No server answered in time: disconnected, reconnecting, timed out, or no JetStream there.
        public static let unavailable = Code(kind: .unavailable)
        /// A compare-and-set found a newer revision than the one it expected.
        public static let conflict = Code(kind: .conflict)
        /// Nothing is stored under that key or subject.
        public static let notFound = Code(kind: .notFound)
        /// Any other failure; the message says what.
        public static let failed = Code(kind: .failed)

        public var description: String {
            switch kind {
            case .unavailable: "unavailable"
            case .conflict: "conflict"
            case .notFound: "not found"
            case .failed: "failed"
            }
        }
    }

    public let code: Code
    /// What was being done, such as `update key "users.1.3" in bucket "feedd-prod-leases"`.
    public let operation: String
    /// libnats's own words for the failure.
    public let reason: String

    public init(_ code: Code, operation: String, reason: String) {
        self.code = code
        self.operation = operation
        self.reason = reason
    }

    /// The failure `status` of the libnats call just made for `operation`.
    ///
    /// Must be called on the thread that made the call: libnats keeps its last error text per
    /// thread, and that text is what tells a lost compare-and-set from other server errors.
    init(status: natsStatus, operation: String, serverError: jsErrCode = jsErrCode(rawValue: 0)) {
        var text = nats_GetLastError(nil).map { String(cString: $0) } ?? String(cString: natsStatus_GetText(status))
        // libnats starts its messages with its own source location, "(opts.c:380): ".
        if text.hasPrefix("("), let end = text.range(of: "): ") { text = String(text[end.upperBound...]) }
        self.operation = operation
        self.reason = text
        switch status {
        case NATS_TIMEOUT, NATS_NO_RESPONDERS, NATS_CONNECTION_CLOSED, NATS_CONNECTION_DISCONNECTED,
            NATS_NOT_YET_CONNECTED, NATS_STALE_CONNECTION, NATS_IO_ERROR, NATS_NO_SERVER:
            code = .unavailable
        case NATS_NOT_FOUND:
            code = .notFound
        default:
            // The KV calls do not hand back the server's error code, only its text.
            if serverError == JSStreamWrongLastSequenceErr || text.contains("wrong last sequence") {
                code = .conflict
            } else if text.contains("JetStream not enabled") || text.contains("insufficient resources")
                || text.contains("no suitable peers") || serverError == JSClusterNoPeersErr
                || serverError == JSClusterNotAvailErr || serverError == JSStreamOfflineErr
            {
                // A cluster that lost its quorum or is still electing a leader: transient too.
                code = .unavailable
            } else {
                code = .failed
            }
        }
    }

    public var description: String { "\(operation): \(reason)" }
}
