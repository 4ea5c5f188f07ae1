import FeedKit

/// The requests about feeds as a whole, the metrics and the health check.
extension HTTPFront {
    /// 200 once the daemon is ready, 503 while it starts or stops.
    func health() -> HTTPAnswer {
        .jsonObject(status: isReady ? 200 : 503) { object in
            object.field("status", isReady ? "ok" : isStopping ? "stopping" : "starting")
        }
    }

    /// The OpenMetrics text of SPEC §10, the HTTP front's clients and bytes counted in.
    public var metricsText: String {
        access.metricsText(clients: counters.connections, connectionsAccepted: counters.connectionsAccepted, bytesSent: counters.bytesSent)
    }

    func metrics() -> HTTPAnswer {
        let text = metricsText
        var answer = HTTPAnswer(status: 200, contentType: "application/openmetrics-text; version=1.0.0; charset=utf-8", body: Array(text.utf8))
        answer.header("Cache-Control", "no-store")
        return answer
    }

    /// `{"feeds":[NAME,…]}`: the feeds this request may read (a feed with a token is listed only
    /// to a request that presents it).
    func feedList(_ exchange: HTTPExchange) -> HTTPAnswer {
        .jsonObject { object in object.field("feeds", .array(visibleFeeds(exchange).map(JSONValue.string))) }
    }

    /// The feed's entry of `status` (SPEC §5).
    func status(of feed: String) -> HTTPAnswer {
        guard let status = access.status(of: feed) else { return .error(.unknownFeed(feed, known: access.feedNames)) }
        return .json(status.serialized)
    }

    /// Pull-to-refresh: answered once the new generation is durable.
    func refresh(_ exchange: HTTPExchange, feed: String) {
        wait(exchange)
        access.refresh(feed) { [weak self] result in
            guard let self else { return }
            self.stopWaiting(exchange)
            switch result {
            case .success(let generation):
                logger.forFeed(feed).info("refreshed over HTTP: generation \(generation)")
                respond(exchange, .jsonObject(type: "refreshed") { object in
                    object.field("feed", feed)
                    object.field("generation", generation)
                })
            case .failure(let failure):
                respond(exchange, .error(.storeFailed(failure.message, feed: feed)))
            }
        }
    }

    /// Notes that `exchange` waits for the engine, so shutdown answers it.
    func wait(_ exchange: HTTPExchange) {
        waiting[ObjectIdentifier(exchange)] = exchange
        exchange.onFinish { [weak self, unowned exchange] _ in self?.stopWaiting(exchange) }
    }

    func stopWaiting(_ exchange: HTTPExchange) {
        waiting[ObjectIdentifier(exchange)] = nil
    }
}
