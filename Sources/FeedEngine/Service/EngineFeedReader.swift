import FeedKit

/// Other feeds' pages for adapters that gather them (`merge`), read through the engine: each read
/// is a short-lived subscription after the page before, so the member's prefetch, shared fetches,
/// retries and cache apply, and a member is fetched only as far as its readers ask.
///
/// Made before the configuration is loaded (adapters get it in their context) and pointed at the
/// service once it exists; each read is a client of the ``FeedService``, like any front's.
public final class EngineFeedReader: FeedReader {
    /// The service the members are read through.
    @MainActor public weak var service: FeedService?

    /// A reader not yet pointed at a service.
    public init() {}

    public func page(_ page: Int, of feed: String, timeout: Duration) async throws(SourceError) -> FeedPage {
        let result = await withCheckedContinuation { (continuation: CheckedContinuation<Result<FeedPage, SourceError>, Never>) in
            Task { @MainActor in
                guard let service = self.service, service.feedNames.contains(feed) else {
                    return continuation.resume(returning: .failure(.rejected("there is no feed \"\(feed)\" to read")))
                }
                MemberPageRead(service: service, feed: feed, page: page, timeout: timeout, continuation: continuation).start()
            }
        }
        return try result.get()
    }
}

/// One read of page N of a feed: subscribes after page N − 1, asks for one page, and answers
/// with the page, `none` when the feed has no such page (for good or for now), or an error when
/// the feed starts a new generation, goes away, or does not deliver within the timeout.
@MainActor
private final class MemberPageRead: ClientHandle {
    private let service: FeedService
    private let feed: String
    private let page: Int
    private let timeout: Duration
    private var continuation: CheckedContinuation<Result<FeedPage, SourceError>, Never>?
    let clientID: ClientID
    /// Set while the read is connected to the service.
    private var isConnected = false
    /// The generation subscribed to, and what the feed's source last said while failing, for the timeout's message.
    private var generation = 0
    private var lastFailure: String?

    init(service: FeedService, feed: String, page: Int, timeout: Duration, continuation: CheckedContinuation<Result<FeedPage, SourceError>, Never>) {
        self.service = service
        clientID = service.connect()
        self.feed = feed
        self.page = page
        self.timeout = timeout
        self.continuation = continuation
    }

    var canTakePage: Bool { true }

    func start() {
        isConnected = true
        let (feed, page, timeout) = (feed, page, timeout)
        Task {
            try? await Task.sleep(for: timeout)
            let reason = lastFailure.map { ": \($0)" } ?? ""
            finish(.failure(.transient("feed \(feed): page \(page) not ready within \(timeout.wholeMilliseconds) ms\(reason)")))
        }
        service.subscribe(self, to: feed, after: page - 1) { [self] result in
            switch result {
            case .success(let subscribed):
                generation = subscribed.generation
                service.next(self, feed: feed) { [self] in if case .failure(let error) = $0 { finish(.failure(.transient(error.message))) } }
            case .failure(let error):
                finish(.failure(.rejected(error.message)))
            }
        }
    }

    func receive(_ event: ClientEvent) {
        switch event {
        case .page(let page, _):
            finish(.success(.page(generation: page.generation, items: Self.items(of: page), isLast: page.isLast)))
        case .end:
            let status = service.status(of: feed)
            finish(.success(.none(generation: status?.generation ?? generation, final: status?.reachedEnd ?? false)))
        case .upstreamFailing(_, let message, _, _):
            lastFailure = message
        case .refreshed(_, let generation, _):
            finish(.failure(.transient("feed \(feed) started generation \(generation)")))
        case .unsubscribed:
            finish(.failure(.rejected("feed \(feed) was removed")))
        }
    }

    func flush() {}

    private func finish(_ result: Result<FeedPage, SourceError>) {
        guard let continuation else { return }
        self.continuation = nil
        if isConnected { service.disconnect(self) }
        isConnected = false
        continuation.resume(returning: result)
    }

    /// The items of a cached page, read back from its encoded line (the cache keeps only that).
    private static func items(of page: Page) -> [Item] {
        let line = Array(page.line.buffer)
        guard let entries = (try? JSONValue(parsing: line))?["items"]?.arrayValue else { return [] }
        return entries.compactMap { entry in
            guard let id = entry["id"]?.stringValue else { return nil }
            return Item(id: id, data: entry["data"] ?? .null, feed: entry["feed"]?.stringValue)
        }
    }
}
