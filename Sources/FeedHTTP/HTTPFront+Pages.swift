import FeedKit

/// `GET /v1/feeds/F/pages` and `POST /v1/feeds/F/ack`.
extension HTTPFront {
    func servePages(_ exchange: HTTPExchange, feed: String) {
        let parameters: RequestParameters.Pages
        do {
            parameters = try RequestParameters.pages(exchange.query)
        } catch {
            return respond(exchange, .error(error))
        }
        // HEAD has no effect, and a consumer's read acknowledges.
        if parameters.consumer != nil, exchange.method == "HEAD" {
            return respond(exchange, .error(.badRequest("a consumer reads with GET: its read acknowledges what it was given", feed: feed)))
        }
        wait(exchange)
        guard let consumer = parameters.consumer else {
            return serveAnonymousPages(exchange, feed: feed, after: parameters.after ?? 0, count: parameters.count)
        }
        pool.withConsumer(consumer, of: feed) { [self] slot in
            ConsumerPagesRequest(front: self, exchange: exchange, slot: slot, parameters: parameters).start()
        }
    }

    /// Pages after `after` of the current generation, from a kept reading standing there if there
    /// is one (its next pages prefetched), else a new one; kept afterwards where it then stands.
    private func serveAnonymousPages(_ exchange: HTTPExchange, feed: String, after: Int, count: Int) {
        var reading: FeedReading?
        let gathering = PageGathering(feed: feed, count: count) { [weak self, unowned exchange] outcome in
            guard let self else { return }
            if let reading {
                if case .pages(_, _, _, complete: true) = outcome { pool.keepAnonymous(reading) } else { access.close(reading) }
            }
            respond(exchange, pagesAnswer(exchange, feed: feed, after: after, outcome))
        }
        exchange.keep(gathering)
        exchange.onFinish { _ in gathering.fail(.abandoned) }
        reading = pool.takeAnonymous(feed: feed, after: after) ?? access.read(feed, consumer: nil, after: after, follow: false, sink: gathering) { _, _ in }
        guard let reading else { return gathering.fail(.unknownFeed(feed, known: access.feedNames)) }
        reading.sink = gathering
        access.next(reading, count: count) { failure in gathering.fail(.storeFailed(failure.message, feed: feed)) }
    }

    /// The answer to a page request: its pages with an `ETag`, 304 if the client has them, or the error.
    func pagesAnswer(_ exchange: HTTPExchange, feed: String, after: Int, _ outcome: PageGathering.Outcome) -> HTTPAnswer {
        switch outcome {
        case .failed(let error):
            return .error(error)
        case .pages(let pages, let generation, let end, _):
            let tag = PageGathering.entityTag(generation: generation, after: after, pages: pages, end: end)
            if PageGathering.matches(exchange.header("If-None-Match"), tag) { return .notModified(etag: tag) }
            var answer = HTTPAnswer.json([])
            if pages.count == 1 {
                answer.body = .pieces([PageGathering.onePageBody(feed: feed, page: pages[0], end: end)])
            } else {
                answer.body = .pieces(PageGathering.body(feed: feed, pages: pages, generation: generation, end: end))
            }
            answer.header("ETag", tag)
            // Stored, but checked again each time: the next request may bring more.
            answer.setHeader("Cache-Control", "no-cache")
            return answer
        }
    }

    /// `{"consumer":C,"page":N}`: marks the consumer's pages up to N consumed, never past what it
    /// was given; answered once durable with the cursor that holds now.
    func acknowledge(_ exchange: HTTPExchange, feed: String) {
        let acknowledgement: (consumer: String, page: Int)
        do {
            acknowledgement = try RequestParameters.acknowledgement(exchange.body)
        } catch {
            return respond(exchange, .error(error))
        }
        wait(exchange)
        pool.withConsumer(acknowledgement.consumer, of: feed) { [self] slot in
            let resumeAfter = slot.resumePoint(currentGeneration: access.generation(of: feed)).map { min($0, acknowledgement.page) }
            let sink = IdleSink()
            pool.consumerReading(slot, after: nil, resumeAfter: resumeAfter, sink: sink) { [self] result in
                guard case .success(let reading) = result else {
                    if case .failure(let failure) = result { respond(exchange, .error(.storeFailed(failure.message, feed: feed))) }
                    return pool.release(slot)
                }
                access.acknowledge(reading, through: acknowledgement.page) { [self] result in
                    switch result {
                    case .success(let cursor):
                        respond(exchange, .jsonObject(type: "ack") { object in
                            object.field("feed", feed)
                            object.field("consumer", acknowledgement.consumer)
                            object.field("page", cursor)
                        })
                    case .failure(let failure):
                        respond(exchange, .error(.storeFailed(failure.message, feed: feed)))
                    }
                    pool.release(slot)
                }
            }
        }
    }
}

/// One consumer's `GET …/pages?consumer=C`, served while it holds the consumer's slot: like
/// `next`, it acknowledges what the consumer was given before (the kept reading's position, or
/// the slot's `given` page), then gathers its pages. The slot is released when libmicrohttpd
/// says the answer is out: sent in full, its last page becomes `given`; else the reading ends,
/// and the consumer gets those pages again.
@MainActor
final class ConsumerPagesRequest {
    private let front: HTTPFront
    private let exchange: HTTPExchange
    private let slot: ConsumerSlot
    private let parameters: RequestParameters.Pages
    private var gathering: PageGathering?
    /// Whether the gathering got all it asked for, and where the reading then stood.
    private var outcome: (complete: Bool, generation: Int, position: Int)?

    init(front: HTTPFront, exchange: HTTPExchange, slot: ConsumerSlot, parameters: RequestParameters.Pages) {
        self.front = front
        self.exchange = exchange
        self.slot = slot
        self.parameters = parameters
    }

    func start() {
        guard !exchange.isFinished else { return front.pool.release(slot) }
        exchange.keep(self)
        exchange.onFinish { [self] sent in finished(sent: sent) }
        let feed = slot.feed
        let resumeAfter = parameters.after == nil ? slot.resumePoint(currentGeneration: front.access.generation(of: feed)) : nil
        var after = 0
        let gathering = PageGathering(feed: feed, count: parameters.count) { [self] outcome in
            if case .pages(_, _, _, let complete) = outcome, let reading = slot.reading {
                self.outcome = (complete, reading.generation, reading.position)
            }
            front.respond(exchange, front.pagesAnswer(exchange, feed: feed, after: after, outcome))
        }
        self.gathering = gathering
        front.pool.consumerReading(slot, after: parameters.after, resumeAfter: resumeAfter, sink: gathering) { [self] result in
            switch result {
            case .success(let reading):
                after = reading.position
                front.access.next(reading, count: parameters.count) { failure in gathering.fail(.storeFailed(failure.message, feed: feed)) }
            case .failure(let failure):
                gathering.fail(.storeFailed(failure.message, feed: feed))
            }
        }
    }

    private func finished(sent: Bool) {
        gathering?.fail(.abandoned)
        if sent, let outcome, outcome.complete {
            slot.given = (outcome.generation, outcome.position)
        } else if let reading = slot.reading {
            front.access.close(reading)
            slot.reading = nil
        }
        front.pool.release(slot)
    }
}

/// The sink of a reading opened only to acknowledge: it takes no page.
@MainActor
final class IdleSink: FeedEventSink {
    var canTakePage: Bool { false }
    func receive(_ event: FeedEvent, from reading: FeedReading) {}
    func flush() {}
}
