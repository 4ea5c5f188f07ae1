/// The daemon's other feeds, for an adapter that reads them (`merge`): through the engine, like
/// any subscriber, so their prefetch, sharing, retries and caches apply, and never their
/// upstreams directly.
public protocol FeedReader: Sendable {
    /// Page `page` of `feed` in its current generation, waiting at most `timeout` for it. Throws
    /// ``SourceError`` when the page does not come in time (its source is failing, say), when
    /// the feed starts a new generation meanwhile, or when there is no such feed.
    func page(_ page: Int, of feed: String, timeout: Duration) async throws(SourceError) -> FeedPage
}

/// What a ``FeedReader`` found at a page of another feed.
public enum FeedPage: Sendable, Hashable {
    /// The page: its generation, its items, and whether the feed says it is the last.
    case page(generation: Int, items: [Item], isLast: Bool)
    /// There is no such page: the feed ended before it, for good (`final`) or for now (a live
    /// source that may publish more).
    case none(generation: Int, final: Bool)
}
