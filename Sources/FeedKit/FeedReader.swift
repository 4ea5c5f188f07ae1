/// The daemon's other feeds, for an adapter that reads them (`merge`): through the engine, like
/// any subscriber, so their prefetch, sharing, retries and caches apply, and never their
/// upstreams directly.
///
/// Each reading feed (`reader`) holds one subscription per feed it reads, which follows that
/// feed as any follower does (so a live or polled feed keeps being looked at while it is read)
/// for as long as the reader keeps reading or waiting on it, and a while after.
public protocol FeedReader: Sendable {
    /// Page `page` of `feed` in its current generation, as feed `reader` reads it, waiting at
    /// most `timeout` for it. Throws ``SourceError`` at once when the page is not ready and the
    /// feed's source is known to be failing (the message says why); when the page does not come
    /// in time; when the feed starts a new generation meanwhile; or when there is no such feed.
    func page(_ page: Int, of feed: String, for reader: String, timeout: Duration) async throws(SourceError) -> FeedPage

    /// Returns once one of `pages`' feeds (feed name → the page `reader` reads next) may have
    /// news for it: that page is ready, the feed ended, recovered or started a new generation;
    /// or once `timeout` has passed. Meanwhile `reader` keeps following those feeds.
    func waitForNews(of pages: [String: Int], for reader: String, timeout: Duration) async
}

/// What a ``FeedReader`` found at a page of another feed.
public enum FeedPage: Sendable, Hashable {
    /// The page: its generation, its items, and whether the feed says it is the last.
    case page(generation: Int, items: [Item], isLast: Bool)
    /// There is no such page: the feed ended before it, for good (`final`) or for now (a live
    /// source that may publish more).
    case none(generation: Int, final: Bool)
}
