import FeedServer

/// Readings of HTTP clients, kept between their requests for `reading_linger`.
///
/// HTTP is stateless, and the socket's reading of a feed is not: a subscription stands at a
/// position, keeps the pages after it prefetched, and for a consumer acknowledges on `next` what
/// it delivered before. The pool keeps that between requests:
/// - an anonymous reading is kept at the position its last answer left it, so the next
///   `after=` there finds its page prefetched;
/// - a consumer's reading is kept, with the last page an answer gave it that libmicrohttpd sent
///   in full (``ConsumerSlot/given``), and a consumer's requests are served one at a time. Its
///   next `pages` request acknowledges that page, like `next`; after the reading has lingered
///   out, or when the last answer was not sent in full, the consumer resumes after its durable
///   cursor (or after its `given` page, while the daemon runs), so what it did not get comes
///   again (at-least-once).
@MainActor
final class ReadingPool {
    private let access: FeedAccess
    private let loop: EventLoop
    var linger: Duration

    private struct Position: Hashable {
        let feed: String
        let generation: Int
        let page: Int
    }

    private struct ConsumerKey: Hashable {
        let feed: String
        let consumer: String
    }

    private var anonymous: [Position: (reading: FeedReading, expires: ContinuousClock.Instant)] = [:]
    private var consumers: [ConsumerKey: ConsumerSlot] = [:]
    private var sweep: EventLoop.ScheduledTimer?

    /// Idle anonymous readings kept per feed: each keeps its pages prefetched.
    static let anonymousPerFeed = 64
    /// Consumers remembered at most (each a few dozen bytes); past it, those idle longest go.
    static let consumerLimit = 100_000

    init(access: FeedAccess, loop: EventLoop, linger: Duration) {
        self.access = access
        self.loop = loop
        self.linger = linger
    }

    // MARK: Anonymous readings

    /// The idle reading of `feed` standing at `after` in the current generation, if one is kept.
    func takeAnonymous(feed: String, after: Int) -> FeedReading? {
        guard let generation = access.generation(of: feed),
            let (reading, _) = anonymous.removeValue(forKey: Position(feed: feed, generation: generation, page: after))
        else { return nil }
        guard reading.isOpen, !reading.isWaiting, reading.generation == generation, reading.position == after else {
            access.close(reading)
            return nil
        }
        return reading
    }

    /// Keeps `reading` where it stands, or ends it if it is not idle.
    func keepAnonymous(_ reading: FeedReading) {
        reading.sink = nil
        guard reading.isOpen, !reading.isWaiting else { return access.close(reading) }
        let position = Position(feed: reading.feed, generation: reading.generation, page: reading.position)
        if let earlier = anonymous[position] { access.close(earlier.reading) }
        anonymous[position] = (reading, .now + linger)
        // Counting a feed's readings copies the table: only worth it when any feed may be over.
        if anonymous.count > Self.anonymousPerFeed {
            let kept = anonymous.filter { $0.key.feed == reading.feed }
            if kept.count > Self.anonymousPerFeed, let oldest = kept.min(by: { $0.value.expires < $1.value.expires }) {
                anonymous[oldest.key] = nil
                access.close(oldest.value.reading)
            }
        }
        scheduleSweep()
    }

    // MARK: Consumers

    /// Runs `body` with consumer `consumer`'s slot once no other request of it is being served;
    /// the request calls ``release(_:)`` when it is done with it.
    func withConsumer(_ consumer: String, of feed: String, _ body: @escaping (ConsumerSlot) -> Void) {
        let key = ConsumerKey(feed: feed, consumer: consumer)
        let slot = consumers[key] ?? ConsumerSlot(feed: feed, consumer: consumer)
        consumers[key] = slot
        if slot.isBusy { return slot.waiting.append(body) }
        slot.isBusy = true
        body(slot)
    }

    /// The request is done with `slot`: its reading (if still open and idle) lingers, and the
    /// next request of the consumer is served.
    func release(_ slot: ConsumerSlot) {
        if let reading = slot.reading {
            reading.sink = nil
            if !reading.isOpen || reading.isWaiting {
                access.close(reading)
                slot.reading = nil
            }
        }
        slot.expires = .now + linger
        slot.isBusy = false
        if consumers.count > Self.consumerLimit { forgetIdlestConsumers() }
        scheduleSweep()
        guard !slot.waiting.isEmpty else { return }
        slot.isBusy = true
        slot.waiting.removeFirst()(slot)
    }

    /// The consumer's reading to serve a request with, after `after` if given, else where the
    /// consumer stands: its kept reading, or a new one after its durable cursor or `resumeAfter`,
    /// whichever is further (a page of the current generation that was given to it).
    func consumerReading(
        _ slot: ConsumerSlot, after: Int?, resumeAfter: Int?, sink: any FeedEventSink,
        completion: @escaping (Result<FeedReading, AccessFailure>) -> Void
    ) {
        if after == nil, let reading = slot.reading, reading.isOpen, !reading.isWaiting {
            reading.sink = sink
            return completion(.success(reading))
        }
        if let reading = slot.reading { access.close(reading) }
        slot.reading = nil
        open(slot, after: after, sink: sink) { [self] result in
            guard case .success(let reading) = result, after == nil, let resumeAfter, resumeAfter > reading.position else {
                return completion(result)
            }
            access.close(reading)
            slot.reading = nil
            open(slot, after: resumeAfter, sink: sink, completion: completion)
        }
    }

    private func open(_ slot: ConsumerSlot, after: Int?, sink: any FeedEventSink, completion: @escaping (Result<FeedReading, AccessFailure>) -> Void) {
        let opened = access.read(slot.feed, consumer: slot.consumer, after: after, follow: false, sink: sink) { reading, result in
            switch result {
            case .success:
                slot.reading = reading
                completion(.success(reading))
            case .failure(let failure):
                if slot.reading === reading { slot.reading = nil }
                completion(.failure(failure))
            }
        }
        if opened == nil { completion(.failure(AccessFailure(message: "no feed named \"\(slot.feed)\""))) }
    }

    // MARK: Expiry

    private func scheduleSweep() {
        guard sweep == nil else { return }
        sweep = loop.scheduleTimer(after: linger / 4) { [weak self] in
            guard let self else { return }
            self.sweep = nil
            self.expire()
        }
    }

    private func expire() {
        let now = ContinuousClock.now
        for (position, entry) in anonymous where entry.expires <= now {
            anonymous[position] = nil
            access.close(entry.reading)
        }
        for slot in consumers.values where !slot.isBusy && slot.expires <= now {
            if let reading = slot.reading { access.close(reading) }
            slot.reading = nil
        }
        if !anonymous.isEmpty || consumers.values.contains(where: { $0.reading != nil || $0.isBusy }) { scheduleSweep() }
    }

    private func forgetIdlestConsumers() {
        let idle = consumers.filter { !$0.value.isBusy }.sorted { $0.value.expires < $1.value.expires }
        for (key, slot) in idle.prefix(consumers.count - Self.consumerLimit / 2) {
            if let reading = slot.reading { access.close(reading) }
            consumers[key] = nil
        }
    }

    /// Ends every kept reading (at shutdown).
    func closeAll() {
        for entry in anonymous.values { access.close(entry.reading) }
        anonymous.removeAll()
        for slot in consumers.values {
            if let reading = slot.reading { access.close(reading) }
            slot.reading = nil
        }
    }
}

/// What the pool keeps of one consumer's reading over HTTP.
@MainActor
final class ConsumerSlot {
    let feed: String
    let consumer: String
    /// Its reading, kept between requests until it lingers out.
    var reading: FeedReading?
    /// The last page an answer gave the consumer that was sent in full, in its generation.
    var given: (generation: Int, page: Int)?
    var expires = ContinuousClock.now
    var isBusy = false
    var waiting: [(ConsumerSlot) -> Void] = []

    init(feed: String, consumer: String) {
        self.feed = feed
        self.consumer = consumer
    }

    /// The page after which a request resumes if its reading is gone: the `given` page, while
    /// its generation is current.
    func resumePoint(currentGeneration: Int?) -> Int? {
        guard let given, given.generation == currentGeneration else { return nil }
        return given.page
    }
}
