import FeedKit

/// A fetched page as the feed caches it: fetched once, encoded once, shared by every subscriber.
///
/// Only the encoded line is kept: the items' parsed form costs many times their JSON (a page of
/// 200,000 small items, 3.5 MB of JSON, took 270 MB as `[Item]`), and nothing reads it again.
public final class Page: Sendable {
    public let feed: String
    public let generation: Int
    /// The feed's page number (which keeps counting on a `wrap` feed when the source starts over).
    public let number: Int
    public let itemCount: Int
    /// The source says no page follows this one.
    public let isLast: Bool
    /// The page as every subscriber is sent it (but for the line's closing).
    public let encoded: SharedBytes

    init(feed: String, generation: Int, number: Int, items: [Item], isLast: Bool, encoder: any PageEncoder) {
        self.feed = feed
        self.generation = generation
        self.number = number
        itemCount = items.count
        self.isLast = isLast
        encoded = encoder.encode(feed: feed, generation: generation, number: number, items: items, isLast: isLast)
    }

    /// A page another instance of the fleet fetched and published (SPEC §8); nil if its line is
    /// not a page line.
    init?(published: FleetPage, wrap: Bool) {
        let line = published.line
        guard line.starts(with: Array(#"{"type":"page""#.utf8)), line.count > 16, line.suffix(2).elementsEqual("}\n".utf8) else { return nil }
        feed = published.feed
        generation = published.generation
        number = published.number
        itemCount = published.itemCount
        isLast = Self.isLast(next: published.next, wrap: wrap, isEmpty: published.itemCount == 0, sourcePage: published.sourcePage)
        encoded = SharedBytes(Array(line.dropLast(2)))
    }

    /// Whether a page is the feed's last: the source ended there, and a `wrap` feed does not
    /// start over (it does unless the source is empty from its first page on).
    static func isLast(next: NextPage, wrap: Bool, isEmpty: Bool, sourcePage: Int) -> Bool {
        next == .end && !(wrap && !(isEmpty && sourcePage == 1))
    }

    /// The line a subscriber is sent for this page when it is pushed: what the fleet publishes.
    var publishedLine: [UInt8] { Array(encoded.buffer) + Array("}\n".utf8) }

    /// The memory this page takes while cached: its encoded bytes and a fixed allowance for the
    /// objects around them. `cache_bytes` bounds the sum.
    var cost: Int { encoded.count + Self.overhead }

    static let overhead = 256
}

/// Writes pages the way the server sends them. A feed encodes each page as it arrives from
/// upstream, off the main actor, so no reply and no fan-out waits for JSON work.
public protocol PageEncoder: Sendable {
    /// The page's line up to, not including, its closing brace: a reply's id goes there.
    func encode(feed: String, generation: Int, number: Int, items: [Item], isLast: Bool) -> SharedBytes
}

/// What a subscription's connection is told, besides the pages themselves.
public enum SubscriptionEvent {
    /// The next page, in reply to the `next` request with id `replyTo` (nil for a pushed page).
    case page(Page, replyTo: JSONValue?)
    /// No page follows `page` (for now, on a live source), in reply to a `next`.
    case end(feed: String, page: Int, replyTo: JSONValue?)
    /// The feed cannot fetch the page this subscription waits for and is retrying.
    case upstreamFailing(feed: String, message: String, retryIn: Duration, replyTo: JSONValue?)
    /// The feed started generation `generation`; the subscription's position is back at 0.
    /// `replyTo` is set for the subscription whose connection asked for the refresh.
    case refreshed(feed: String, generation: Int, replyTo: JSONValue?)
    /// The feed is gone (removed by a reload); the subscription has ended.
    case removed(feed: String)
    /// Another connection subscribed as the same consumer and took this subscription over.
    case takenOver(feed: String, consumer: String)
}

/// The connection end of a subscription: where its events go, and whether it can take a page now.
@MainActor
public protocol SubscriptionOutput: AnyObject {
    /// False while the connection already holds as many unsent pages as it may; the feed then
    /// stops advancing this subscription until ``Feed/pump(_:)`` is called again.
    var canTakePage: Bool { get }
    /// Pages are queued, to go out together at the next ``flush()``; other events go out at once.
    func receive(_ event: SubscriptionEvent, from subscription: Subscription)
    /// Writes what is queued, as far as the connection takes it now.
    func flush()
}
