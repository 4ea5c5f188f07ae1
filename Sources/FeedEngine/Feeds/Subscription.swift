import FeedKit

/// One connection's reading of one feed: where it is, what it asked for, how it wants pages.
@MainActor
public final class Subscription {
    /// The feed read; a reload that changes the feed's config moves the subscription to its replacement.
    public internal(set) unowned var feed: Feed
    public private(set) weak var output: (any SubscriptionOutput)?
    public let consumer: String?
    public let follows: Bool
    /// The last page delivered in the current generation (0 = none yet).
    public internal(set) var position: Int
    /// The last page acknowledged.
    public internal(set) var cursor: Int
    /// `next` requests not yet fully answered: pages still owed, and the id to answer with.
    var pendingNexts: [(remaining: Int, replyTo: JSONValue?)] = []
    /// A follower is told `end` once when it reaches the end of a finite feed.
    var toldEnd = false

    init(feed: Feed, output: any SubscriptionOutput, consumer: String?, after: Int, follows: Bool) {
        self.feed = feed
        self.output = output
        self.consumer = consumer
        self.follows = follows
        position = after
        cursor = after
    }

    /// Whether a `next` is still waiting for pages or `end`.
    public var hasPendingRequests: Bool { !pendingNexts.isEmpty }

    /// Whether this subscription wants another page now: it follows, or a `next` is waiting.
    public var wantsPage: Bool { follows || !pendingNexts.isEmpty }

    /// The pages this subscription keeps fetched ahead: its position plus the prefetch depth,
    /// and at least the next page while it is waiting for one.
    func wantedPages(prefetch: Int) -> ClosedRange<Int>? {
        let depth = max(prefetch, wantsPage ? 1 : 0)
        return depth > 0 ? (position + 1)...(position + depth) : nil
    }

    /// Asks for `count` more pages; acknowledges every page delivered so far.
    public func requestPages(_ count: Int, replyTo: JSONValue?) {
        do {
            try acknowledge(through: position)
        } catch {
            feed.logger.error("cannot store the cursor of consumer \(consumer ?? "?"): \(error)")
        }
        pendingNexts.append((count, replyTo))
        feed.pump(self)
    }

    /// Marks pages up to `page` consumed (never beyond what was delivered). For a consumer the new
    /// cursor is durable when this returns; if it cannot be stored, nothing changes.
    public func acknowledge(through page: Int) throws(StoreError) {
        let acknowledged = max(cursor, min(page, position))
        guard acknowledged != cursor else { return }
        if let consumer { try feed.store?.store(feed: feed.name, consumer: consumer, cursor: acknowledged) }
        cursor = acknowledged
    }

    /// Ends the subscription; its outstanding requests are dropped.
    public func cancel() {
        feed.remove(self)
    }

    func send(_ event: SubscriptionEvent) {
        output?.receive(event, from: self)
    }
}
