import FeedKit

/// One client's reading of one feed: where it is, what it asked for, how it wants pages.
///
/// Its reading state is one value of ``State``, so no combination of flags can disagree: a
/// consumer being confirmed moves nothing, a reader asks, a follower is pushed pages, a follower
/// at the end of a finite feed is told so once. Only its feed changes it, through the methods
/// below; each returns what the client is to be told, and the feed tells it once the change is
/// made. The feed's ``SubscriptionTable`` holds the only reference: a class, so that visiting a
/// thousand subscriptions for a page costs a thousand references, not a thousand copies.
final class Subscription {
    let client: ClientID
    private(set) weak var sink: (any ClientSink)?
    let consumer: String?
    let follows: Bool
    private(set) var state: State
    /// Set once its table let it go (unsubscribed, replaced, taken over, its feed closed): what
    /// is under way for it stops.
    var isEnded = false

    enum State {
        /// A consumer whose starting point is being made durable (or read from the fleet): no
        /// page flows, and its `subscribe` and its `next`s wait here with their answers.
        case starting(Start)
        /// Nothing asked and nothing pushed: a reader between its `next`s.
        case idle(Place)
        /// `next`s wait for pages (a follower's pushed pages answer them first).
        case asking(Place, Nexts)
        /// A follower: every page is pushed as soon as it is ready.
        case following(Place)
        /// A follower told that the feed has ended for good: nothing more until a new generation.
        case followedToEnd(Place)
    }

    /// Where a confirmed subscription is in its generation.
    struct Place {
        /// The last page delivered (0 = none yet).
        var position: Int
        /// The last page acknowledged, at most ``position``.
        var cursor: Int
    }

    /// The `next`s not yet fully answered, oldest first, and the pages owed to all of them.
    struct Nexts {
        fileprivate(set) var waiting: [(remaining: Int, replyTo: ReplyTag?)] = []
        fileprivate(set) var owed = 0
        /// Asked by a follower already told that the feed ended: it is not told again.
        fileprivate(set) var afterEnd = false
    }

    /// A starting subscription's answers: its `subscribe`'s, and those of the `next`s that came.
    struct Start {
        /// The `after` the consumer subscribed with, if any.
        let after: Int?
        let announce: (Result<Subscribed, ServiceError>) -> Void
        var queued: [QueuedNext] = []
    }

    /// A `next` that came while the subscription was starting, with whoever waits for its answer.
    struct QueuedNext {
        let count: Int
        let replyTo: ReplyTag?
        let answer: (Result<Subscribed?, ServiceError>) -> Void
    }

    /// A subscription after `after`, or, without one, starting: its start is being confirmed and
    /// `announce` is told when it is.
    init(
        client: ClientID, sink: (any ClientSink)?, consumer: String?, follows: Bool, after: Int?, requestedAfter: Int? = nil,
        announce: @escaping (Result<Subscribed, ServiceError>) -> Void = { _ in }
    ) {
        self.client = client
        self.sink = sink
        self.consumer = consumer
        self.follows = follows
        if let after {
            let place = Place(position: PageNumber.clamped(after), cursor: PageNumber.clamped(after))
            state = follows ? .following(place) : .idle(place)
        } else {
            state = .starting(Start(after: requestedAfter, announce: announce))
        }
    }

    // MARK: What it is doing

    /// Where it is; nil while starting.
    var place: Place? {
        switch state {
        case .starting: nil
        case .idle(let place), .asking(let place, _), .following(let place), .followedToEnd(let place): place
        }
    }

    var position: Int? { place?.position }
    var cursor: Int? { place?.cursor }

    /// Whether it wants another page now: it follows, or a `next` is waiting.
    var wantsPage: Bool {
        switch state {
        case .asking, .following: true
        case .starting, .idle, .followedToEnd: false
        }
    }

    /// Whether a `next` still waits for pages or `end`.
    var hasPendingRequests: Bool {
        switch state {
        case .starting(let start): !start.queued.isEmpty
        case .asking: true
        case .idle, .following, .followedToEnd: false
        }
    }

    /// The page it is waiting for right now, if it is waiting.
    var awaitedPage: Int? { wantsPage ? place.map { $0.position + 1 } : nil }

    /// The id of the `next` the upcoming page answers, for notices about it.
    var oldestReplyTo: ReplyTag? {
        if case .asking(_, let nexts) = state { return nexts.waiting.first?.replyTo }
        return nil
    }

    /// The pages it keeps fetched ahead: its position plus the prefetch depth, and every page its
    /// outstanding `next`s asked for (so catching up does not wait for delivery), at least the
    /// next page while it is waiting for one. At most `limit` pages.
    func wantedPages(prefetch: Int, limit: Int) -> ClosedRange<Int>? {
        guard let place else { return nil }
        var owed = 0
        if case .asking(_, let nexts) = state { owed = nexts.owed }
        let depth = min(max(prefetch, owed, wantsPage ? 1 : 0), max(limit, 1))
        return depth > 0 ? (place.position + 1)...(place.position + depth) : nil
    }

    // MARK: Changes

    /// Keeps a `next` that came while starting; false once started (it is asked at once then).
    func queue(_ next: QueuedNext) -> Bool {
        guard case .starting(var start) = state else { return false }
        start.queued.append(next)
        state = .starting(start)
        return true
    }

    /// The starting point is durable: reading starts after `after`. Returns the answers that
    /// waited: the `subscribe`'s, then the `next`s' to be asked now in order.
    func confirm(after: Int) -> Start? {
        guard case .starting(let start) = state else { return nil }
        let position = PageNumber.clamped(after)
        state = rest(at: Place(position: position, cursor: position))
        return start
    }

    /// The `after` it subscribed with, while its start is still being confirmed.
    var startingAfter: Int?? {
        if case .starting(let start) = state { start.after } else { nil }
    }

    /// Whether its start is still being confirmed.
    var isStarting: Bool {
        if case .starting = state { true } else { false }
    }

    /// The `next`s waiting, taken out of the state (left idle at the same place) so that changing
    /// them copies nothing; nil if none wait.
    private func takeNexts() -> Nexts? {
        guard case .asking(let place, let nexts) = state else { return nil }
        state = .idle(place)
        return nexts
    }

    /// Asks for `count` more pages.
    func ask(_ count: Int, replyTo: ReplyTag?) {
        guard let place else { return }
        var nexts = takeNexts() ?? Nexts()
        if case .followedToEnd = state { nexts.afterEnd = true }
        let count = min(max(count, 1), PageNumber.maximum)
        nexts.waiting.append((count, replyTo))
        nexts.owed = min(nexts.owed + count, PageNumber.maximum)
        state = .asking(place, nexts)
    }

    /// Hands over `page`, the one after the position, counting it against the oldest `next`.
    func deliver(_ page: Page) -> ClientEvent {
        guard var place = place else { preconditionFailure("a starting subscription is sent nothing") }
        precondition(page.number == place.position + 1, "pages reach a subscription in order")
        place.position = page.number
        var replyTo: ReplyTag?
        if var nexts = takeNexts() {
            replyTo = nexts.waiting[0].replyTo
            nexts.waiting[0].remaining -= 1
            nexts.owed -= 1
            if nexts.waiting[0].remaining == 0 { nexts.waiting.removeFirst() }
            state = nexts.waiting.isEmpty ? rest(at: place) : .asking(place, nexts)
        } else {
            state = .following(place)
        }
        return .page(page, replyTo: replyTo)
    }

    /// No page follows `page` (for good, or for now on a live source): every outstanding `next`
    /// is answered `end`; a follower hears it once, when the feed has ended for good.
    func answerEnd(at page: Int, feed: String, feedEnded: Bool) -> [ClientEvent] {
        guard let place else { return [] }
        var events: [ClientEvent] = []
        if case .asking(_, let nexts) = state {
            events = nexts.waiting.map { .end(feed: feed, page: page, replyTo: $0.replyTo) }
            state = rest(at: place, afterEnd: nexts.afterEnd)
        }
        if case .following = state, events.isEmpty, feedEnded {
            state = .followedToEnd(place)
            events.append(.end(feed: feed, page: page, replyTo: nil))
        }
        return events
    }

    /// Puts it at page 0 of a new generation; outstanding `next`s carry on there. Returns what to
    /// tell the client (nothing while starting: its `subscribed` will name the new generation).
    func restart(feed: String, generation: Int, replyTo: ReplyTag?) -> ClientEvent? {
        let start = Place(position: 0, cursor: 0)
        switch state {
        case .starting: return nil
        case .asking(_, let nexts): state = .asking(start, nexts)
        case .idle, .following, .followedToEnd: state = rest(at: start)
        }
        return .refreshed(feed: feed, generation: generation, replyTo: replyTo)
    }

    /// Marks pages up to `page` consumed (never beyond what was delivered). Returns the cursor a
    /// consumer must make durable first (see ``acknowledged(_:)``), or nil when nothing is to be
    /// stored (an anonymous subscriber's cursor, or any where cursors are kept nowhere, moves at once).
    func acknowledge(through page: Int, durably: Bool) -> Int? {
        guard let place else { return nil }
        let cursor = max(place.cursor, min(page, place.position))
        guard cursor != place.cursor else { return nil }
        if consumer != nil, durably { return cursor }
        acknowledged(cursor)
        return nil
    }

    /// `cursor` is durable: it is the cursor now, unless it moved further meanwhile.
    func acknowledged(_ cursor: Int) {
        guard var place else { return }
        place.cursor = max(place.cursor, min(cursor, place.position))
        switch state {
        case .starting: break
        case .idle: state = .idle(place)
        case .asking(_, let nexts): state = .asking(place, nexts)
        case .following: state = .following(place)
        case .followedToEnd: state = .followedToEnd(place)
        }
    }

    /// Drops every request: returns the answers still waiting on a starting subscription, and
    /// the tags of the `next`s left unanswered.
    func dropRequests() -> (start: Start?, unanswered: [ReplyTag?]) {
        switch state {
        case .starting(let start):
            state = .starting(Start(after: start.after, announce: { _ in }))
            return (start, [])
        case .asking(let place, let nexts):
            state = rest(at: place, afterEnd: nexts.afterEnd)
            return (nil, nexts.waiting.map(\.replyTo))
        case .idle, .following, .followedToEnd:
            return (nil, [])
        }
    }
}

extension Subscription {
    /// Where a subscription with nothing asked rests: `idle` for a reader, `following` for a
    /// follower (or `followedToEnd`, if it had been told the feed ended).
    fileprivate func rest(at place: Place, afterEnd: Bool = false) -> State {
        follows ? (afterEnd ? .followedToEnd(place) : .following(place)) : .idle(place)
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
