import FeedKit

/// Who a front serves: one socket connection, one HTTP request or event stream, one member read
/// of a `merge` feed. ``FeedService/connect()`` gives each a new one.
public struct ClientID: Hashable, Sendable, CustomStringConvertible {
    let value: Int

    public var description: String { "client \(value)" }
}

/// A client as the engine knows it: its id (from ``FeedService/connect()``, kept for its life),
/// and the sink its events go to, which is the client itself. A front passes it to every
/// ``FeedService`` call and ends it with ``FeedService/disconnect(_:)``; the engine holds it only
/// weakly, so a client a front let go is simply told nothing more.
@MainActor
public protocol ClientHandle: ClientSink {
    /// The id ``FeedService/connect()`` gave this client.
    var clientID: ClientID { get }
}

/// A front's own token for a request (a socket request's `id`), handed back untouched with the
/// events that answer it; the engine never looks inside.
public struct ReplyTag: Sendable, Hashable {
    /// What the front put in.
    public let bytes: [UInt8]

    /// A tag carrying `bytes`.
    public init(_ bytes: [UInt8]) {
        self.bytes = bytes
    }
}

/// Where a client's events go, with flow control: the engine hands a client pages only while it
/// ``canTakePage``, queues them with ``receive(_:)`` and calls ``flush()`` once a batch is queued.
///
/// A sink that cannot take a page now is not asked again until its front calls
/// ``FeedService/resume(_:)``, so a client that stops reading costs a bounded amount of memory
/// and slows nobody else (SPEC §5). Events are delivered on the main actor, in order; a sink may
/// call the ``FeedService`` from ``receive(_:)`` (to disconnect, say).
@MainActor
public protocol ClientSink: AnyObject, Sendable {
    /// False while the client already holds as many unsent pages as it may.
    var canTakePage: Bool { get }
    /// One event for the client. Pages may be held back until ``flush()``; other events should go out at once.
    func receive(_ event: ClientEvent)
    /// Sends what is queued, as far as the client takes it now.
    func flush()
}

/// What a client is told besides the direct answers to its requests.
public enum ClientEvent {
    /// The next page of a feed the client reads, answering the `next` tagged `replyTo` (nil for
    /// a page pushed to a follower).
    case page(Page, replyTo: ReplyTag?)
    /// No page follows `page` (for good, or for now on a live source), answering a `next`; a
    /// follower is told once, untagged, when the feed has ended for good.
    case end(feed: String, page: Int, replyTo: ReplyTag?)
    /// The feed cannot fetch the page the client waits for and retries in `retryIn`.
    case upstreamFailing(feed: String, message: String, retryIn: Duration, replyTo: ReplyTag?)
    /// The feed started generation `generation`: the client's position is back at 0. `replyTo`
    /// is the tag of the client's own `refresh`, if it asked for it.
    case refreshed(feed: String, generation: Int, replyTo: ReplyTag?)
    /// The subscription ended without the client asking: the feed was removed by a reload, or
    /// another client (here or on another instance) subscribed as the same consumer.
    case unsubscribed(feed: String, reason: UnsubscribeReason)
}

/// Why a subscription ended by itself.
public enum UnsubscribeReason: Sendable, Equatable {
    /// A reload removed the feed.
    case feedRemoved
    /// Another connection subscribed as `consumer` and took it over (SPEC §8's `takeover`).
    case takenOver(consumer: String)
}
