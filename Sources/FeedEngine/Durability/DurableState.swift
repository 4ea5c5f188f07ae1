import FeedKit
import FeedState

/// What the engine keeps durable on this host, and the seam where it may fail: FeedState's
/// ``StateStore`` (SQLite, one writer thread) is the daemon's; the engine's tests use one in
/// memory whose writes can be made to fail, as a full disk fails them.
///
/// Reads are synchronous and see what is committed. A write returns (or calls its completion)
/// once it is durable, or with why it is not; a write that fails changed nothing. Writes made one
/// after the other from the main actor are committed in that order. Only ``StoredPages`` and
/// ``CursorLedger`` write.
public protocol DurableState: AnyObject, Sendable {
    /// A feed's generation, fingerprint, seed and pages, if any generation is stored.
    func feed(_ name: String) -> StoredFeed?
    /// A consumer's stored cursor on `feed`, if it has one.
    func cursor(feed: String, consumer: String) -> StoredCursor?
    /// Every consumer of `feed` with its cursor, by name: a snapshot that costs no copy, so a
    /// feed with 30,000 consumers can be looked over for each `status`.
    func cursors(of feed: String) -> [String: StoredCursor]

    /// Stores `cursor` as what `consumer` acknowledged in `generation`, the feed's current one,
    /// within its recorded pages; `completion` runs on the main actor once it is durable.
    @MainActor
    func setCursor(
        feed: String, consumer: String, generation: Int, cursor: Int, completion: @escaping @MainActor @Sendable (Result<Void, StoreError>) -> Void)
    /// Deletes a consumer's cursor; false if it had none.
    nonisolated(nonsending) func forget(feed: String, consumer: String) async throws(StoreError) -> Bool
    /// Makes `generation` the feed's current one: its pages are dropped and every consumer of
    /// the feed goes back to 0, in the same transaction.
    nonisolated(nonsending) func startGeneration(feed: String, generation: Int, fingerprint: String, seed: String?) async throws(StoreError)
    /// Records pages `first`, `first + 1`, … of the current `generation`, in order or not at all.
    nonisolated(nonsending) func recordPages(feed: String, generation: Int, first: Int, pages: [NewPage]) async throws(StoreError)
    /// The items stored with a page, if they were kept.
    nonisolated(nonsending) func pageBody(feed: String, generation: Int, page: Int) async throws(StoreError) -> [UInt8]?
}

extension StateStore: DurableState {}
