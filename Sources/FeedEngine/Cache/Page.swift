import FeedKit

/// A page as the engine holds it: fetched once, encoded once, shared by every subscriber, by the
/// fleet's publication and by the state directory.
///
/// Only the encoded line is kept: the items' parsed form costs many times their JSON, and nothing
/// reads it again.
public final class Page: Sendable {
    /// The feed the page belongs to.
    public let feed: String
    /// The generation it belongs to.
    public let generation: Int
    /// The feed's page number (which keeps counting on a `wrap` feed when the source starts over).
    public let number: Int
    /// How many items the page holds.
    public let itemCount: Int
    /// The source says no page follows this one.
    public let isLast: Bool
    /// The whole line, as a follower is pushed it and the fleet publishes it: `{"type":"page",…}\n`.
    public let line: SharedBytes
    /// ``line`` without its closing `}\n`, where a reply's id goes; the same memory.
    public let body: SharedBytes

    init(feed: String, generation: Int, number: Int, itemCount: Int, isLast: Bool, line: SharedBytes) {
        self.feed = feed
        self.generation = generation
        self.number = number
        self.itemCount = itemCount
        self.isLast = isLast
        self.line = line
        body = line.prefix(line.count - Self.closing.count)
    }

    convenience init(feed: String, generation: Int, number: Int, items: [Item], isLast: Bool, encoder: any PageEncoder) {
        self.init(feed: feed, generation: generation, number: number, items: WrittenItems(items), isLast: isLast, encoder: encoder)
    }

    convenience init(feed: String, generation: Int, number: Int, items: WrittenItems, isLast: Bool, encoder: any PageEncoder) {
        let line = encoder.encode(feed: feed, generation: generation, number: number, written: items, isLast: isLast)
        self.init(feed: feed, generation: generation, number: number, itemCount: items.count, isLast: isLast, line: line)
    }

    /// The page another instance of the fleet published (SPEC §8), or the state directory kept,
    /// sharing its bytes; nil if its line is not a page line.
    convenience init?(_ published: FleetPage, wrap: Bool) {
        let line = published.line.buffer
        guard line.starts(with: Self.opening), line.count > Self.opening.count + Self.closing.count, line.suffix(2).elementsEqual(Self.closing)
        else { return nil }
        let isLast = Self.isLast(next: published.next, wrap: wrap, isEmpty: published.itemCount == 0, sourcePage: published.sourcePage)
        self.init(
            feed: published.feed, generation: published.generation, number: published.number, itemCount: published.itemCount, isLast: isLast,
            line: published.line)
    }

    private static let opening = Array(#"{"type":"page""#.utf8)
    private static let closing = Array("}\n".utf8)

    /// Whether a page is the feed's last: the source ended there, and a `wrap` feed does not
    /// start over (it does unless the source is empty from its first page on).
    static func isLast(next: NextPage, wrap: Bool, isEmpty: Bool, sourcePage: Int) -> Bool {
        next == .end && !(wrap && !(isEmpty && sourcePage == 1))
    }

    /// The page as the fleet publishes it and the state directory keeps it: its line and what its
    /// source said of the page after it.
    func published(next: NextPage, sourcePage: Int) -> FleetPage {
        FleetPage(feed: feed, generation: generation, number: number, line: line, itemCount: itemCount, next: next, sourcePage: sourcePage)
    }

    /// The memory this page takes while cached: its encoded bytes and a fixed allowance for the
    /// objects around them. `cache_bytes` bounds the sum.
    var cost: Int { line.count + Self.overhead }

    static let overhead = 256
}

/// Writes pages the way the fronts send them. A feed encodes each page as it arrives from
/// upstream, off the main actor, so no reply and no fan-out waits for JSON work.
public protocol PageEncoder: Sendable {
    /// The page's whole line, ending in `}\n`: the fronts put a reply's id before that closing.
    func encode(feed: String, generation: Int, number: Int, items: [Item], isLast: Bool) -> SharedBytes

    /// The same line for items an adapter wrote (``SourceAdapter/fetch(_:writtenPages:)``), or
    /// that were wrapped to be written now; the default makes ``Item``s of them.
    func encode(feed: String, generation: Int, number: Int, written: WrittenItems, isLast: Bool) -> SharedBytes
}

extension PageEncoder {
    /// The line of ``encode(feed:generation:number:items:isLast:)`` for the items, made from
    /// their written bytes if need be: an encoder that can copy those (the server's) says so.
    public func encode(feed: String, generation: Int, number: Int, written: WrittenItems, isLast: Bool) -> SharedBytes {
        encode(feed: feed, generation: generation, number: number, items: written.items, isLast: isLast)
    }
}
