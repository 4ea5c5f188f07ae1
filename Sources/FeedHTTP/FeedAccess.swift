import FeedEngine
import FeedKit
import FeedServer
import FeedState

// Every call the HTTP front makes into the engine is in this file, behind a surface that mirrors
// the operations both fronts share: read a feed (subscribe: consumer, after, follow), ask for its
// next pages (`next`), acknowledge, stop reading (unsubscribe), refresh, a feed's status, the
// metrics. A client of the engine is a ``FeedReading`` and the ``FeedEventSink`` its events go
// to, with its flow control (`canTakePage`, `flush`).

/// A page's bytes, shared by every client it is sent to.
typealias PageBytes = SharedBytes

/// A page as a reading is given it.
struct DeliveredPage {
    let generation: Int
    let number: Int
    /// The source says no page will ever follow it.
    let isLast: Bool
    /// The page object of SPEC §5 (`{"type":"page",…`) without its closing brace.
    let openBody: PageBytes
}

/// What a reading is told, besides its pages.
enum FeedEvent {
    case page(DeliveredPage)
    /// No page follows `page`: for a `next`, for good or for now on a live source; for a
    /// follower, once, when the feed has ended for good.
    case end(page: Int)
    /// The page the reading waits for cannot be fetched; the feed retries in `retryIn`.
    case upstreamFailing(message: String, retryIn: Duration)
    /// The feed started `generation`; the reading is back at its page 0.
    case refreshed(generation: Int)
    /// The reading is over: the feed was removed by a reload, or the consumer subscribed elsewhere.
    case ended(code: String, message: String)
}

/// Where a reading's events go, and whether it can take another page now. While it cannot, the
/// feed stops advancing the reading, until ``FeedAccess/resume(_:)``.
@MainActor
protocol FeedEventSink: AnyObject {
    var canTakePage: Bool { get }
    func receive(_ event: FeedEvent, from reading: FeedReading)
    /// Sends what was queued by ``receive(_:from:)``; pages come in batches, then one flush.
    func flush()
}

/// Why the engine could not do what was asked.
struct AccessFailure: Error {
    /// `store_failed`: a cursor or a generation could not be made durable; nothing changed.
    let message: String
}

/// One client's reading of one feed: a subscription of the engine's, whose events go to `sink`.
@MainActor
final class FeedReading: SubscriptionOutput {
    let feed: String
    let consumer: String?
    /// Where events go now; a lingering reading is handed from one request to the next.
    weak var sink: (any FeedEventSink)?
    fileprivate var subscription: Subscription?

    fileprivate init(feed: String, consumer: String?, sink: any FeedEventSink) {
        self.feed = feed
        self.consumer = consumer
        self.sink = sink
    }

    /// The last page delivered in the current generation.
    var position: Int { subscription?.position ?? 0 }
    /// The feed's generation now, which is the reading's.
    var generation: Int { subscription?.feed.generation ?? 0 }
    var isOpen: Bool { subscription != nil }
    /// Whether a `next` is still waiting for pages or `end`.
    var isWaiting: Bool { subscription?.hasPendingRequests ?? false }

    // SubscriptionOutput: the engine's side.

    var canTakePage: Bool { sink?.canTakePage ?? false }

    func flush() { sink?.flush() }

    func receive(_ event: SubscriptionEvent, from subscription: Subscription) {
        let translated: FeedEvent
        switch event {
        case .page(let page, _):
            translated = .page(DeliveredPage(generation: page.generation, number: page.number, isLast: page.isLast, openBody: page.encoded))
        case .end(_, let page, _):
            translated = .end(page: page)
        case .upstreamFailing(_, let message, let retryIn, _):
            translated = .upstreamFailing(message: message, retryIn: retryIn)
        case .refreshed(_, let generation, _):
            translated = .refreshed(generation: generation)
        case .removed(let feed):
            self.subscription = nil
            translated = .ended(code: "unknown_feed", message: "feed \"\(feed)\" was removed by a configuration reload")
        case .takenOver(_, let consumer):
            self.subscription = nil
            translated = .ended(code: "takeover", message: "consumer \"\(consumer)\" subscribed on another connection")
        }
        sink?.receive(translated, from: self)
    }
}

/// The engine as the HTTP front sees it. Runs on the main actor, like the engine.
@MainActor
final class FeedAccess {
    private let directory: FeedDirectory
    /// The socket server's figures, which the front's own are added to.
    private let socketMetrics: @MainActor () -> MetricsSnapshot

    /// The highest page number a client may name.
    nonisolated static let maximumPage = RequestDecoder.maxPage

    init(directory: FeedDirectory, socketMetrics: @escaping @MainActor () -> MetricsSnapshot) {
        self.directory = directory
        self.socketMetrics = socketMetrics
    }

    var feedNames: [String] { directory.names }

    func hasFeed(_ name: String) -> Bool { directory[name] != nil }

    func generation(of feed: String) -> Int? { directory[feed]?.generation }

    /// The feed's entry of `status` (SPEC §5).
    func status(of feed: String) -> JSONValue? {
        directory[feed].map(FeedStatusEntry.json)
    }

    /// The OpenMetrics text of SPEC §10, the HTTP front's clients and bytes counted in.
    func metricsText(clients: Int, connectionsAccepted: Int, bytesSent: Int) -> String {
        var snapshot = socketMetrics()
        snapshot.clients += clients
        snapshot.connectionsAccepted += connectionsAccepted
        snapshot.bytesSent += bytesSent
        return snapshot.text
    }

    /// Starts reading `feed` like `subscribe` (SPEC §5): a consumer resumes after its stored
    /// cursor unless `after` is given, anyone else starts after `after` (default 0). `started`
    /// gets where the reading starts once pages may flow: at once, or for a consumer once its
    /// starting point is durable (`next`s asked for meanwhile wait; it may run before this
    /// returns). Nil for an unknown feed.
    func read(
        _ feed: String, consumer: String?, after: Int?, follow: Bool, sink: any FeedEventSink,
        started: @escaping @MainActor (FeedReading, Result<Int, AccessFailure>) -> Void
    ) -> FeedReading? {
        guard let engineFeed = directory[feed] else { return nil }
        let reading = FeedReading(feed: feed, consumer: consumer, sink: sink)
        let start = engineFeed.startingPoint(consumer: consumer, after: after)
        let subscription = engineFeed.subscribe(output: reading, consumer: consumer, after: start, follows: follow)
        reading.subscription = subscription
        guard let consumer, engineFeed.keepsCursors else {
            started(reading, .success(start))
            engineFeed.pump(subscription)
            return reading
        }
        subscription.isConfirmed = false
        Task {
            do throws(StoreError) {
                let confirmed = try await engineFeed.confirmConsumer(consumer, after: after, start: start)
                guard reading.subscription === subscription else { return }
                subscription.start(after: confirmed)
                subscription.isConfirmed = true
                started(reading, .success(confirmed))
                subscription.feed.pump(subscription)
            } catch {
                guard reading.subscription === subscription else { return }
                close(reading)
                started(reading, .failure(AccessFailure(message: "the cursor of consumer \"\(consumer)\" could not be stored: \(error)")))
            }
        }
        return reading
    }

    /// Asks for the next `count` pages, like `next`: every page delivered before is acknowledged
    /// first (for a consumer, durably; if that fails, `failed` hears why and nothing is sent).
    func next(_ reading: FeedReading, count: Int, failed: @escaping @MainActor (AccessFailure) -> Void) {
        guard let subscription = reading.subscription else { return }
        subscription.requestPages(count, replyTo: nil) { error in
            failed(AccessFailure(message: "the pages given before could not be acknowledged, so none was sent: \(error)"))
        }
    }

    /// Marks pages up to `page` consumed (never past what was delivered); `completion` gets the
    /// cursor once it is durable.
    func acknowledge(_ reading: FeedReading, through page: Int, completion: @escaping @MainActor (Result<Int, AccessFailure>) -> Void) {
        guard let subscription = reading.subscription else {
            return completion(.failure(AccessFailure(message: "the reading of \(reading.feed) has ended")))
        }
        subscription.acknowledge(through: page) { result in
            completion(result.mapError { AccessFailure(message: "the cursor could not be stored: \($0)") })
        }
    }

    /// The reading's sink has room again: delivers what is ready and fetches what is missing.
    func resume(_ reading: FeedReading) {
        guard let subscription = reading.subscription, subscription.wantsPage else { return }
        subscription.feed.pump(subscription)
    }

    /// Ends the reading; pages it was given and did not acknowledge stay unacknowledged.
    func close(_ reading: FeedReading) {
        reading.subscription?.cancel()
        reading.subscription = nil
    }

    /// Pull-to-refresh (SPEC §5): `completion` gets the new generation once it is durable.
    func refresh(_ feed: String, completion: @escaping @MainActor (Result<Int, AccessFailure>) -> Void) {
        guard directory[feed] != nil else { return }
        directory.refresh(feed) { result in
            completion(result.mapError { AccessFailure(message: "the new generation could not be stored: \($0)") })
        }
    }
}
