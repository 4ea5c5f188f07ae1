import FeedKit
import FeedState

/// One connection's reading of one feed: where it is, what it asked for, how it wants pages.
///
/// A subscription owns its own reading state (position, cursor, outstanding `next`s); the feed
/// changes it only through the methods below, so every change to a position is one of: a page
/// delivered, an `end` answered, or a restart at page 0 of a new generation.
@MainActor
public final class Subscription {
    /// The feed read; a reload that changes the feed's pages moves the subscription to its replacement.
    public internal(set) unowned var feed: Feed
    public private(set) weak var output: (any SubscriptionOutput)?
    public let consumer: String?
    public let follows: Bool
    /// The last page delivered in the current generation (0 = none yet).
    public private(set) var position: Int
    /// The last page acknowledged.
    public private(set) var cursor: Int
    /// `next` requests not yet fully answered, oldest first: pages still owed, and the id to answer with.
    private var pendingNexts: [(remaining: Int, replyTo: JSONValue?)] = []
    /// Pages owed to all of `pendingNexts` together.
    private var owedPages = 0
    /// A follower is told `end` once when it reaches the end of a finite feed.
    private var toldEnd = false
    /// False while a consumer's starting point is being stored: no page flows before `subscribed`.
    public var isConfirmed = true

    init(feed: Feed, output: any SubscriptionOutput, consumer: String?, after: Int, follows: Bool) {
        self.feed = feed
        self.output = output
        self.consumer = consumer
        self.follows = follows
        position = PageNumber.clamped(after)
        cursor = position
    }

    /// Whether a `next` is still waiting for pages or `end`.
    public var hasPendingRequests: Bool { !pendingNexts.isEmpty }

    /// Whether this subscription wants another page now: it follows, or a `next` is waiting.
    public var wantsPage: Bool { isConfirmed && (follows || !pendingNexts.isEmpty) }

    /// The ids of the `next` requests still waiting, to answer them when the subscription fails.
    public var pendingReplyIDs: [JSONValue?] { pendingNexts.map(\.replyTo) }

    /// The page this subscription is waiting for right now, if it is waiting.
    var awaitedPage: Int? { wantsPage ? position + 1 : nil }

    /// The pages this subscription keeps fetched ahead: its position plus the prefetch depth, and
    /// every page its outstanding `next`s asked for (so catching up does not wait for delivery),
    /// at least the next page while it is waiting for one. At most `limit` pages.
    func wantedPages(prefetch: Int, limit: Int) -> ClosedRange<Int>? {
        let depth = min(max(prefetch, owedPages, wantsPage ? 1 : 0), max(limit, 1))
        return depth > 0 ? (position + 1)...(position + depth) : nil
    }

    /// Asks for `count` more pages, once every page delivered so far is acknowledged (for a
    /// consumer: durably). If that acknowledgement cannot be stored, no page is sent and
    /// `onStoreFailure` hears why (the server answers `store_failed`).
    public func requestPages(_ count: Int, replyTo: JSONValue?, onStoreFailure: @escaping (StoreError) -> Void = { _ in }) {
        acknowledge(through: position) { [self] result in
            switch result {
            case .success:
                let count = min(max(count, 1), PageNumber.maximum)
                pendingNexts.append((count, replyTo))
                owedPages = min(owedPages + count, PageNumber.maximum)
                feed.pump(self)
            case .failure(let error):
                onStoreFailure(error)
            }
        }
    }

    /// Marks pages up to `page` consumed (never beyond what was delivered) and calls `completion`
    /// with the new cursor. For a consumer that is once the cursor is durable; if it cannot be
    /// stored, the cursor stays where it was and `completion` gets why. Without a write to wait
    /// for, `completion` runs before this returns.
    public func acknowledge(through page: Int, completion: @escaping (Result<Int, StoreError>) -> Void) {
        let acknowledged = max(cursor, min(page, position))
        guard acknowledged != cursor, let consumer, feed.keepsCursors else {
            cursor = acknowledged
            return completion(.success(cursor))
        }
        let feed = feed
        let generation = feed.generation
        feed.storeCursor(consumer: consumer, cursor: acknowledged, generation: generation) { [self] result in
            if case .failure(let error) = result {
                feed.logger.error("cannot store the cursor of consumer \(consumer): \(error)")
                return completion(.failure(error))
            }
            // A refresh while the write was on its way has put the cursor back to 0 since.
            if generation == self.feed.generation { cursor = max(cursor, acknowledged) }
            completion(.success(cursor))
        }
    }

    /// Puts a consumer's subscription, not confirmed yet, after `page`: its cursor as the fleet
    /// knows it (SPEC §8), which only an asynchronous look-up finds.
    public func start(after page: Int) {
        precondition(!isConfirmed, "only a subscription not yet announced may move")
        position = PageNumber.clamped(page)
        cursor = position
    }

    /// Ends the subscription; its outstanding requests are dropped.
    public func cancel() {
        feed.remove(self)
    }

    // MARK: What the feed does to a subscription

    /// Sends `page`, the one after the position, counting it against the oldest `next`.
    func deliver(_ page: Page) {
        precondition(page.number == position + 1, "pages reach a subscription in order")
        let replyTo = pendingNexts.first?.replyTo
        if !pendingNexts.isEmpty {
            pendingNexts[0].remaining -= 1
            owedPages -= 1
            if pendingNexts[0].remaining == 0 { pendingNexts.removeFirst() }
        }
        position = page.number
        send(.page(page, replyTo: replyTo))
    }

    /// No page follows `page` (for good, or for now on a live source): every outstanding `next`
    /// is answered `end`; a follower hears it once, when the feed has ended for good.
    func answerEnd(at page: Int, feedEnded: Bool) {
        let pending = pendingNexts
        dropRequests()
        for request in pending {
            send(.end(feed: feed.name, page: page, replyTo: request.replyTo))
        }
        if follows, pending.isEmpty, !toldEnd, feedEnded {
            toldEnd = true
            send(.end(feed: feed.name, page: page, replyTo: nil))
        }
    }

    /// Puts the subscription at page 0 of generation `generation` and tells it so. Outstanding
    /// `next`s carry on in the new generation.
    func restart(generation: Int, replyTo: JSONValue?) {
        position = 0
        cursor = 0
        toldEnd = false
        send(.refreshed(feed: feed.name, generation: generation, replyTo: replyTo))
    }

    func dropRequests() {
        pendingNexts.removeAll()
        owedPages = 0
    }

    /// The id of the `next` the upcoming page answers, for notices about it.
    var oldestReplyTo: JSONValue? { pendingNexts.first?.replyTo }

    func send(_ event: SubscriptionEvent) {
        output?.receive(event, from: self)
    }
}

/// The range of page numbers and positions the engine works with. A position from a client or
/// from disk is checked against it where it enters, and clamped here again, so no page arithmetic
/// (a position plus a prefetch depth, a count of pages owed) can overflow.
public enum PageNumber {
    /// 2^40 pages: far beyond any real feed, far below `Int.max`.
    public static let maximum = 1 << 40

    static func clamped(_ value: Int) -> Int { min(max(value, 0), maximum) }
}
