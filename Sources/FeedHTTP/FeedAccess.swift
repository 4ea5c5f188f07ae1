import FeedEngine
import FeedKit
import FeedServer

// Every call the HTTP front makes into the engine is in this file, and every one goes through
// ``FeedService``, the engine's only door, as the socket server's do: read a feed (subscribe:
// consumer, after, follow), ask for its next pages (`next`), acknowledge, stop reading
// (unsubscribe), refresh, a feed's status, the metrics. Each ``FeedReading`` is a client of the
// service of its own, reading one feed; its events go to the ``FeedEventSink`` with its flow
// control (`canTakePage`, `flush`).

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

/// One client's reading of one feed: a client of the ``FeedService`` that reads only this feed,
/// whose events go to `sink`.
@MainActor
final class FeedReading: ClientHandle {
    let feed: String
    let consumer: String?
    let clientID: ClientID
    /// Where events go now; a lingering reading is handed from one request to the next.
    weak var sink: (any FeedEventSink)?
    /// The last page delivered in the current generation.
    private(set) var position = 0
    /// The generation the reading is in, which is the feed's.
    private(set) var generation = 0
    /// False once closed, or ended by the engine (a reload removed the feed, a takeover).
    private(set) var isOpen = true
    fileprivate weak var access: FeedAccess?

    fileprivate init(feed: String, consumer: String?, clientID: ClientID, generation: Int, access: FeedAccess, sink: any FeedEventSink) {
        self.feed = feed
        self.consumer = consumer
        self.clientID = clientID
        self.generation = generation
        self.access = access
        self.sink = sink
    }

    /// Whether a `next` is still waiting for pages or `end`.
    var isWaiting: Bool { isOpen && access?.service.hasPendingRequests(self) == true }

    fileprivate func started(_ subscribed: Subscribed) {
        position = subscribed.after
        generation = subscribed.generation
    }

    fileprivate func ended() { isOpen = false }

    // ClientSink: the engine's side.

    var canTakePage: Bool { sink?.canTakePage ?? false }

    func flush() { sink?.flush() }

    func receive(_ event: ClientEvent) {
        let translated: FeedEvent
        switch event {
        case .page(let page, _):
            (position, generation) = (page.number, page.generation)
            translated = .page(DeliveredPage(generation: page.generation, number: page.number, isLast: page.isLast, openBody: page.body))
        case .end(_, let page, _):
            translated = .end(page: page)
        case .upstreamFailing(_, let message, let retryIn, _):
            translated = .upstreamFailing(message: message, retryIn: retryIn)
        case .refreshed(_, let generation, _):
            (position, self.generation) = (0, generation)
            translated = .refreshed(generation: generation)
        case .unsubscribed(let feed, .feedRemoved):
            ended()
            translated = .ended(code: "unknown_feed", message: "feed \"\(feed)\" was removed by a configuration reload")
        case .unsubscribed(_, .takenOver(let consumer)):
            ended()
            translated = .ended(code: "takeover", message: "consumer \"\(consumer)\" subscribed on another connection")
        }
        sink?.receive(translated, from: self)
    }
}

/// The engine as the HTTP front sees it: ``FeedService``. Runs on the main actor, like the engine.
@MainActor
final class FeedAccess {
    fileprivate let service: FeedService
    /// The socket server's figures, which the front's own are added to.
    private let socketMetrics: @MainActor () -> MetricsSnapshot

    /// The highest page number a client may name.
    nonisolated static let maximumPage = RequestDecoder.maxPage

    init(service: FeedService, socketMetrics: @escaping @MainActor () -> MetricsSnapshot) {
        self.service = service
        self.socketMetrics = socketMetrics
    }

    var feedNames: [String] { service.feedNames }

    func hasFeed(_ name: String) -> Bool { service.generation(of: name) != nil }

    func generation(of feed: String) -> Int? { service.generation(of: feed) }

    /// The feed's entry of `status` (SPEC §5).
    func status(of feed: String) -> JSONValue? { service.status(of: feed)?.json }

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
    /// gets where the reading starts once pages may flow: for a consumer once its starting
    /// point is durable (`next`s asked for meanwhile wait; it may run before this returns).
    /// Nil for an unknown feed.
    func read(
        _ feed: String, consumer: String?, after: Int?, follow: Bool, sink: any FeedEventSink,
        started: @escaping @MainActor (FeedReading, Result<Int, AccessFailure>) -> Void
    ) -> FeedReading? {
        guard let generation = service.generation(of: feed) else { return nil }
        let reading = FeedReading(feed: feed, consumer: consumer, clientID: service.connect(), generation: generation, access: self, sink: sink)
        service.subscribe(reading, to: feed, consumer: consumer, after: after, follow: follow) { [self] result in
            switch result {
            case .success(let subscribed):
                guard reading.isOpen else { return }
                reading.started(subscribed)
                started(reading, .success(subscribed.after))
            case .failure(let error):
                guard reading.isOpen else { return }
                close(reading)
                started(reading, .failure(AccessFailure(message: error.message)))
            }
        }
        return reading
    }

    /// Asks for the next `count` pages, like `next`: every page delivered before is acknowledged
    /// first (for a consumer, durably; if that fails, `failed` hears why and nothing is sent).
    func next(_ reading: FeedReading, count: Int, failed: @escaping @MainActor (AccessFailure) -> Void) {
        guard reading.isOpen else { return }
        service.next(reading, feed: reading.feed, count: count) { result in
            guard case .failure(let error) = result else { return }
            failed(AccessFailure(message: "the pages given before could not be acknowledged, so none was sent: \(error.message)"))
        }
    }

    /// Marks pages up to `page` consumed (never past what was delivered); `completion` gets the
    /// cursor once it is durable.
    func acknowledge(_ reading: FeedReading, through page: Int, completion: @escaping @MainActor (Result<Int, AccessFailure>) -> Void) {
        guard reading.isOpen else {
            return completion(.failure(AccessFailure(message: "the reading of \(reading.feed) has ended")))
        }
        service.acknowledge(reading, feed: reading.feed, through: page) { result in
            completion(result.mapError { AccessFailure(message: "the cursor could not be stored: \($0.message)") })
        }
    }

    /// The reading's sink has room again: delivers what is ready and fetches what is missing.
    func resume(_ reading: FeedReading) {
        guard reading.isOpen else { return }
        service.resume(reading)
    }

    /// Ends the reading; pages it was given and did not acknowledge stay unacknowledged.
    func close(_ reading: FeedReading) {
        guard reading.isOpen else { return }
        reading.ended()
        service.disconnect(reading)
    }

    /// Pull-to-refresh (SPEC §5): `completion` gets the new generation once it is durable.
    func refresh(_ feed: String, completion: @escaping @MainActor (Result<Int, AccessFailure>) -> Void) {
        service.refresh(feed) { result in
            completion(result.map(\.generation).mapError { AccessFailure(message: $0.message) })
        }
    }
}
