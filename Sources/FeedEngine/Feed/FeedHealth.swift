/// How a feed's upstream is doing, for `status` and systemd's STATUS line.
public struct FeedHealth: Sendable, Equatable {
    /// `ok`, `retrying` (transient failures) or `failing` (the upstream rejects the requests).
    public enum State: String, Sendable {
        case ok, retrying, failing
    }

    /// Where the upstream stands.
    public var state: State
    /// What the last failure was, while the feed is not ok.
    public var lastError: String?

    /// An upstream that answers.
    public static let ok = FeedHealth(state: .ok, lastError: nil)
}
