import CNATS

/// A libnats call that failed: which operation, why, and whether it is worth retrying.
///
/// The `code` separates what the engine reacts to differently: the cluster could not be reached
/// in time (degrade, retry later), a compare-and-set lost to another instance (re-read and decide
/// again), nothing stored under that name, a refusal that only the operator can fix (credentials,
/// TLS, permissions), a full JetStream, or anything else (a bug or a misconfigured server).
public struct NATSError: Error, Sendable, CustomStringConvertible {
    /// What kind of failure this is; new kinds may be added.
    public struct Code: Hashable, Sendable, CustomStringConvertible {
        private enum Kind: Hashable, Sendable {
            case unavailable, conflict, notFound, authentication, authorization, tls, full, failed
        }
        private let kind: Kind

        /// No server answered in time: disconnected, reconnecting, timed out, or no JetStream there.
        public static let unavailable = Code(kind: .unavailable)
        /// A compare-and-set found a newer revision than the one it expected.
        public static let conflict = Code(kind: .conflict)
        /// Nothing is stored under that key or subject.
        public static let notFound = Code(kind: .notFound)
        /// The servers refused this client's credentials (a wrong password, token, NKey or JWT).
        public static let authentication = Code(kind: .authentication)
        /// The client may not do that here: a permissions violation.
        public static let authorization = Code(kind: .authorization)
        /// TLS could not be agreed: an untrusted or refused certificate, or TLS on one side only.
        public static let tls = Code(kind: .tls)
        /// JetStream has no room left: the server's or the account's storage limit is reached.
        public static let full = Code(kind: .full)
        /// Any other failure; the message says what.
        public static let failed = Code(kind: .failed)

        public var description: String {
            switch kind {
            case .unavailable: "unavailable"
            case .conflict: "conflict"
            case .notFound: "not found"
            case .authentication: "authentication failed"
            case .authorization: "not permitted"
            case .tls: "TLS failed"
            case .full: "JetStream is full"
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
        var text = nats_GetLastError(nil).map { String(cString: $0) } ?? ""
        // libnats starts its messages with its own source location, "(opts.c:380): ".
        if text.hasPrefix("("), let end = text.range(of: "): ") { text = String(text[end.upperBound...]) }
        // A libnats call that looks something up after a failure clears the text when it finds
        // nothing (kvStore_Create did): the failure then has only its status to say what it was.
        if text.isEmpty { text = String(cString: natsStatus_GetText(status)) }
        self.operation = operation
        self.reason = text
        code = Self.code(of: status, text: text, serverError: serverError)
    }

    private static func code(of status: natsStatus, text: String, serverError: jsErrCode) -> Code {
        switch status {
        case NATS_CONNECTION_AUTH_FAILED: return .authentication
        case NATS_NOT_PERMITTED: return .authorization
        case NATS_SSL_ERROR, NATS_SECURE_CONNECTION_WANTED, NATS_SECURE_CONNECTION_REQUIRED: return .tls
        // A server that refuses the client's certificate (or has none) ends the connection
        // right after the handshake, which the client sees as its first write failing.
        case NATS_IO_ERROR where text.hasPrefix("SSL"): return .tls
        case NATS_TIMEOUT, NATS_NO_RESPONDERS, NATS_CONNECTION_CLOSED, NATS_CONNECTION_DISCONNECTED,
            NATS_NOT_YET_CONNECTED, NATS_STALE_CONNECTION, NATS_IO_ERROR, NATS_NO_SERVER:
            return .unavailable
        case NATS_NOT_FOUND:
            return .notFound
        default:
            break
        }
        // The KV calls do not hand back the server's error code, only its text.
        if serverError == JSStreamWrongLastSequenceErr || text.contains("wrong last sequence") { return .conflict }
        if text.contains("Permissions Violation") { return .authorization }
        if text.contains("Authorization Violation") || text.contains("authentication expired") { return .authentication }
        if serverError == JSInsufficientResourcesErr || serverError == JSStorageResourcesExceededErr
            || serverError == JSMemoryResourcesExceededErr || serverError == JSAccountResourcesExceededErr
            || text.contains("insufficient resources") || text.contains("insufficient storage")
            || text.contains("insufficient memory") || text.contains("resource limits exceeded")
        {
            return .full
        }
        if text.contains("JetStream not enabled") || text.contains("no suitable peers") || serverError == JSClusterNoPeersErr
            || serverError == JSClusterNotAvailErr || serverError == JSStreamOfflineErr
        {
            // A cluster that lost its quorum or is still electing a leader: transient too.
            return .unavailable
        }
        return .failed
    }

    /// The same failure, but transient: what a new cluster answers while it forms (it says
    /// "insufficient resources" until it has enough peers for a stream's replicas).
    var whileForming: NATSError {
        code == .full ? NATSError(.unavailable, operation: operation, reason: reason) : self
    }

    public var description: String {
        switch code {
        case .authentication, .authorization, .tls, .full: "\(operation): \(code) (\(reason))"
        default: "\(operation): \(reason)"
        }
    }
}
