/// An upstream failure, as an adapter reports it.
///
/// The kind decides how the daemon retries: a transient failure (network error, timeout, HTTP 5xx
/// or 429) with exponential backoff, a rejection (HTTP 4xx, a body that does not decode) at the
/// slowest rate. Either way the feed stays up and the page is asked for again, never skipped.
public struct SourceError: Error, Sendable, Hashable, CustomStringConvertible {
    /// How a failure is retried. New kinds may be added; match with `==`.
    public struct Kind: Sendable, Hashable, CustomStringConvertible {
        private enum Base: Hashable { case transient, rejected }
        private let base: Base

        /// Worth retrying soon, with exponential backoff.
        public static let transient = Kind(base: .transient)
        /// Unlikely to change soon: retried at `retry_max_delay`.
        public static let rejected = Kind(base: .rejected)

        /// `transient` or `rejected`.
        public var description: String { base == .transient ? "transient" : "rejected" }
    }

    /// How the daemon retries it.
    public let kind: Kind
    /// What went wrong, for `status` and subscribers' `upstream` notices: say which URL or program.
    public let message: String
    /// How long the upstream asked us to wait (HTTP `Retry-After`), honoured even past the maximum backoff.
    public let retryAfter: Duration?

    /// A failure worth retrying soon: a network error, a timeout, HTTP 5xx or 429 (with the
    /// upstream's `Retry-After`, if it sent one).
    public static func transient(_ message: String, retryAfter: Duration? = nil) -> SourceError {
        SourceError(kind: .transient, message: message, retryAfter: retryAfter)
    }

    /// A failure unlikely to change soon: HTTP 4xx but 429, a body that does not decode.
    public static func rejected(_ message: String) -> SourceError {
        SourceError(kind: .rejected, message: message, retryAfter: nil)
    }

    /// The message.
    public var description: String { message }
}
