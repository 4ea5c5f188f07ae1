import FeedKit

/// Other feeds' pages for adapters that gather them (`merge`), read through the engine: each
/// reading feed holds one ``MemberSubscription`` per feed it reads, a follower like any other, so
/// the member's `poll`, prefetch, shared fetches, retries and cache apply, and a member is
/// fetched only as far as its readers (this one among them) ask.
///
/// A page's items are read back from its encoded line (the engine keeps only that) off the main
/// actor, once per page and reader: the reader keeps the items of the last page of each member
/// it read, which the next merged pages take their items from too.
///
/// Made before the configuration is loaded (adapters get it in their context) and pointed at the
/// service once it exists.
public final class EngineFeedReader: FeedReader {
    /// The service the members are read through.
    @MainActor public weak var service: FeedService?
    @MainActor private var subscriptions: [Reading: MemberSubscription] = [:]
    /// The items of the last page each reader read of each feed.
    private let itemsRead = Locked<[Reading: (page: Page, items: [Item])]>([:])

    /// One feed reading another.
    private struct Reading: Hashable {
        let reader: String
        let feed: String
    }

    /// A reader not yet pointed at a service.
    public init() {}

    public func page(_ page: Int, of feed: String, for reader: String, timeout: Duration) async throws(SourceError) -> FeedPage {
        let reading = Reading(reader: reader, feed: feed)
        let result = await withCheckedContinuation { (continuation: CheckedContinuation<Result<MemberSubscription.Answer, SourceError>, Never>) in
            Task { @MainActor in
                guard let subscription = self.subscription(for: reading) else {
                    return continuation.resume(returning: .failure(.rejected("there is no feed \"\(feed)\" to read")))
                }
                subscription.read(page, timeout: timeout) { continuation.resume(returning: $0) }
            }
        }
        switch try result.get() {
        case .none(let generation, let final):
            return .none(generation: generation, final: final)
        case .page(let page):
            return .page(generation: page.generation, items: items(of: page, for: reading), isLast: page.isLast)
        }
    }

    public func waitForNews(of pages: [String: Int], for reader: String, timeout: Duration) async {
        await withCheckedContinuation { (continuation: CheckedContinuation<Void, Never>) in
            Task { @MainActor in
                let wait = NewsWait(continuation, timeout: timeout)
                for (feed, page) in pages.sorted(by: { $0.key < $1.key }) {
                    self.subscription(for: Reading(reader: reader, feed: feed))?.watch(from: page, for: wait)
                }
            }
        }
    }

    /// The subscription through which `reading` goes, made on its first read; nil if there is no such feed.
    @MainActor
    private func subscription(for reading: Reading) -> MemberSubscription? {
        if let subscription = subscriptions[reading] { return subscription }
        guard let service, service.feedNames.contains(reading.feed) else { return nil }
        let subscription = MemberSubscription(service: service, feed: reading.feed) { [weak self] ended in
            guard let self, subscriptions[reading] === ended else { return }
            subscriptions[reading] = nil
            itemsRead.withLock { $0[reading] = nil }
        }
        subscriptions[reading] = subscription
        return subscription
    }

    /// The items of `page`: those parsed for the last read of the same page, or parsed now (off
    /// the main actor, where this runs).
    private func items(of page: Page, for reading: Reading) -> [Item] {
        if let last = itemsRead.withLock({ $0[reading] }), last.page === page { return last.items }
        let items = Self.items(of: page)
        itemsRead.withLock { $0[reading] = (page, items) }
        return items
    }

    /// The items of a page, read back from its encoded line.
    private static func items(of page: Page) -> [Item] {
        let line = Array(page.line.buffer)
        guard let entries = (try? JSONValue(parsing: line))?["items"]?.arrayValue else { return [] }
        return entries.compactMap { entry in
            guard let id = entry["id"]?.stringValue else { return nil }
            return Item(id: id, data: entry["data"] ?? .null, feed: entry["feed"]?.stringValue)
        }
    }
}
