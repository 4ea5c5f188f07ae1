import FeedEngine
import FeedKit

/// One feed's entry in the `status` reply.
@MainActor
struct FeedStatus {
    let feed: Feed

    init(_ feed: Feed) {
        self.feed = feed
    }

    var json: JSONValue {
        let subscriptions = feed.allSubscriptions
        let consumers = feed.consumers.map { consumer in
            JSONValue.object(["name": .string(consumer.name), "after": .integer(Int64(consumer.cursor)), "connected": .bool(consumer.connected)])
        }
        return .object([
            "name": .string(feed.name),
            "source": .string(feed.settings.source),
            "state": .string(feed.health.state.rawValue),
            "generation": .integer(Int64(feed.generation)),
            "fetched_pages": .integer(Int64(feed.fetchedPages)),
            "cached_pages": .integer(Int64(feed.cachedPages)),
            "cached_bytes": .integer(Int64(feed.cachedBytes)),
            "reached_end": .bool(feed.reachedEnd),
            "upstream_requests": .integer(Int64(feed.upstreamRequests)),
            "last_error": feed.health.lastError.map(JSONValue.string) ?? .null,
            "subscribers": .integer(Int64(subscriptions.count)),
            "consumers": .array(consumers),
            "prefetch": .integer(Int64(feed.settings.prefetch)),
        ])
    }
}
