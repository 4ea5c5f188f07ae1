/// `GET /v1/feeds/F/events`: the feed as Server-Sent Events.
extension HTTPFront {
    func serveEvents(_ exchange: HTTPExchange, feed: String) {
        let after: Int?
        do {
            after = try RequestParameters.after(exchange.query("after"))
        } catch {
            return respond(exchange, .error(error))
        }
        guard let generation = access.generation(of: feed) else { return respond(exchange, .error(.unknownFeed(feed, known: access.feedNames))) }
        guard let start = EventFraming.start(lastEventID: exchange.header("Last-Event-ID"), after: after, currentGeneration: generation) else {
            return respond(exchange, .error(.badRequest("Last-Event-ID must be GENERATION:PAGE, such as 3:17", feed: feed)))
        }
        let stream = EventStream(feed: feed, access: access, counters: counters, window: limits.pageWindow)
        // Resuming from a generation that is gone: the client's pages are of the old one.
        if start.announcesGeneration { stream.receive(.refreshed(generation: generation)) }
        guard let reading = access.read(feed, consumer: nil, after: start.after, follow: true, sink: stream, started: { _, _ in }) else {
            return respond(exchange, .error(.unknownFeed(feed, known: access.feedNames)))
        }
        stream.reading = reading
        streams[ObjectIdentifier(stream)] = stream
        exchange.onFinish { [weak self] _ in
            stream.connectionEnded()
            self?.streamEnded(stream)
        }
        var answer = HTTPAnswer(status: 200, contentType: "text/event-stream; charset=utf-8", body: [])
        answer.body = .events(stream)
        answer.header("Cache-Control", "no-cache")
        // nginx would otherwise hold the events back to fill its buffer.
        answer.header("X-Accel-Buffering", "no")
        respond(exchange, answer)
    }
}
