import FeedKit

/// Other feeds' pages for adapters that gather them (`merge`), read through the engine: each read
/// is a short-lived subscription after the page before, so the member's prefetch, shared fetches,
/// retries and cache apply, and a member is fetched only as far as its readers ask.
///
/// Made before the configuration is loaded (adapters get it in their context) and pointed at the
/// running feeds once they exist.
public final class EngineFeedReader: FeedReader {
    @MainActor public weak var directory: FeedDirectory?

    public init() {}

    public func page(_ page: Int, of feed: String, timeout: Duration) async throws(SourceError) -> FeedPage {
        let result = await withCheckedContinuation { (continuation: CheckedContinuation<Result<FeedPage, SourceError>, Never>) in
            Task { @MainActor in
                guard let member = self.directory?[feed] else {
                    return continuation.resume(returning: .failure(.rejected("there is no feed \"\(feed)\" to read")))
                }
                MemberPageRead(feed: member, page: page, timeout: timeout, continuation: continuation).start()
            }
        }
        return try result.get()
    }
}

/// One read of page N of a feed: subscribes after page N − 1, asks for one page, and answers
/// with the page, `none` when the feed has no such page (for good or for now), or an error when
/// the feed starts a new generation, goes away, or does not deliver within the timeout.
@MainActor
private final class MemberPageRead: SubscriptionOutput {
    private let feed: Feed
    private let page: Int
    private let timeout: Duration
    private var continuation: CheckedContinuation<Result<FeedPage, SourceError>, Never>?
    private var subscription: Subscription?
    /// What the feed's source last said while failing, for the timeout's message.
    private var lastFailure: String?

    init(feed: Feed, page: Int, timeout: Duration, continuation: CheckedContinuation<Result<FeedPage, SourceError>, Never>) {
        self.feed = feed
        self.page = page
        self.timeout = timeout
        self.continuation = continuation
    }

    var canTakePage: Bool { true }

    func start() {
        let subscription = feed.subscribe(output: self, consumer: nil, after: page - 1, follows: false)
        self.subscription = subscription
        let timeout = timeout
        Task {
            try? await Task.sleep(for: timeout)
            let reason = lastFailure.map { ": \($0)" } ?? ""
            finish(.failure(.transient("feed \(feed.name): page \(page) not ready within \(timeout.wholeMilliseconds) ms\(reason)")))
        }
        subscription.requestPages(1, replyTo: nil)
    }

    func receive(_ event: SubscriptionEvent, from subscription: Subscription) {
        switch event {
        case .page(let page, _):
            finish(.success(.page(generation: page.generation, items: Self.items(of: page), isLast: page.isLast)))
        case .end:
            finish(.success(.none(generation: feed.generation, final: feed.reachedEnd)))
        case .upstreamFailing(_, let message, _, _):
            lastFailure = message
        case .refreshed(_, let generation, _):
            finish(.failure(.transient("feed \(feed.name) started generation \(generation)")))
        case .removed, .takenOver:
            finish(.failure(.rejected("feed \(feed.name) was removed")))
        }
    }

    func flush() {}

    private func finish(_ result: Result<FeedPage, SourceError>) {
        guard let continuation else { return }
        self.continuation = nil
        subscription?.cancel()
        subscription = nil
        continuation.resume(returning: result)
    }

    /// The items of a cached page, read back from its encoded line (the cache keeps only that).
    private static func items(of page: Page) -> [Item] {
        let line = Array(page.encoded.buffer) + [UInt8(ascii: "}")]
        guard let entries = (try? JSONValue(parsing: line))?["items"]?.arrayValue else { return [] }
        return entries.compactMap { entry in
            guard let id = entry["id"]?.stringValue else { return nil }
            return Item(id: id, data: entry["data"] ?? .null, feed: entry["feed"]?.stringValue)
        }
    }
}
