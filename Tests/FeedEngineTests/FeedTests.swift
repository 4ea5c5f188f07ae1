import FeedKit
import Testing

@testable import FeedEngine

/// The feed engine without the server: a scripted adapter below it and recording outputs above.
@MainActor
@Suite(.timeLimit(.minutes(1))) struct FeedTests {
    @Test func subscribers_waiting_for_the_same_page_share_one_upstream_request() async {
        let (feed, adapter, encoder) = Self.feed(prefetch: 0)
        let outputs = (0..<20).map { _ in RecordingOutput() }
        for output in outputs { feed.subscribe(output).requestPages(1, replyTo: nil) }
        for output in outputs { await output.waitForPages(1) }
        #expect(adapter.requestedPages == [1])
        #expect(feed.upstreamRequests == 1)
        #expect(encoder.encodedPages == 1, "the page is encoded once")
        let bodies = outputs.map { $0.pages[0].encoded }
        #expect(bodies.allSatisfy { $0 === bodies[0] }, "and every subscriber gets the same bytes")
    }

    @Test func a_follower_catching_up_gets_its_pages_a_window_at_a_time() async {
        let (feed, _, _) = Self.feed(prefetch: 0)
        let reader = RecordingOutput()
        feed.subscribe(reader).requestPages(10, replyTo: nil)
        await reader.waitForPages(10)

        let follower = RecordingOutput(window: 4)
        let subscription = feed.subscribe(follower, follows: true)
        feed.pump(subscription)
        #expect(follower.pages.map(\.number) == Array(1...10), "the cached pages, at once")
        #expect(follower.pagesPerFlush == [4, 4, 2])
    }

    @Test func a_page_is_fetched_only_once_it_is_wanted() async {
        let (feed, adapter, _) = Self.feed(prefetch: 0)
        let output = RecordingOutput()
        let subscription = feed.subscribe(output)
        feed.pump(subscription)
        #expect(adapter.requestedPages.isEmpty && feed.upstreamRequests == 0, "subscribing alone fetches nothing")
        subscription.requestPages(2, replyTo: 7)
        await output.waitForPages(2)
        #expect(output.pages.map(\.number) == [1, 2])
        #expect(output.replies == [7, 7], "both pages answer the one next")
        #expect(adapter.requestedPages == [1, 2])
    }

    static func feed(prefetch: Int) -> (Feed, NumberedPages, CountingEncoder) {
        let adapter = NumberedPages()
        let encoder = CountingEncoder()
        var settings = FeedSettings(name: "numbers", source: "scripted", prefetch: prefetch)
        settings.cachePages = 64
        let directory = FeedDirectory(store: nil, encoder: encoder, logger: Logger(sink: NoLog()))
        directory.apply([FeedDefinition(settings: settings, adapter: adapter)])
        return (directory["numbers"]!, adapter, encoder)
    }
}

extension Feed {
    func subscribe(_ output: RecordingOutput, follows: Bool = false) -> Subscription {
        subscribe(output: output, consumer: nil, after: 0, follows: follows)
    }
}

/// Pages of three items, as many as asked for, answered at once; remembers what was asked.
final class NumberedPages: SourceAdapter {
    static let sourceName = "scripted"
    private let requests = Locked<[Int]>([])

    init() {}
    init(options: AdapterOptions, context: AdapterContext) {}

    var requestedPages: [Int] { requests.withLock { $0 } }

    func fetch(_ request: PageRequest) async throws -> FetchResult {
        requests.withLock { $0.append(request.page) }
        let items = (1...3).map { Item(id: "\(request.page)-\($0)", data: .integer(Int64($0))) }
        return .page(items, next: .more(token: nil))
    }
}

/// Writes a page as its number, and counts how often it was asked to.
final class CountingEncoder: PageEncoder {
    private let count = Locked(0)

    var encodedPages: Int { count.withLock { $0 } }

    func encode(feed: String, generation: Int, number: Int, items: [Item], isLast: Bool) -> SharedBytes {
        count.withLock { $0 += 1 }
        return SharedBytes(Array("\(number)".utf8))
    }
}

/// A connection stand-in: keeps the pages it is given and how they were flushed, and holds at
/// most `window` unflushed pages, as a connection does.
@MainActor
final class RecordingOutput: SubscriptionOutput {
    private let window: Int
    private(set) var pages: [Page] = []
    private(set) var replies: [JSONValue?] = []
    private(set) var pagesPerFlush: [Int] = []
    private var unflushed = 0
    private var waiter: (count: Int, continuation: CheckedContinuation<Void, Never>)?

    init(window: Int = 4) {
        self.window = window
    }

    var canTakePage: Bool { unflushed < window }

    func receive(_ event: SubscriptionEvent, from subscription: Subscription) {
        guard case .page(let page, let replyTo) = event else { return }
        pages.append(page)
        replies.append(replyTo)
        unflushed += 1
        if let waiter, pages.count >= waiter.count {
            self.waiter = nil
            waiter.continuation.resume()
        }
    }

    func flush() {
        guard unflushed > 0 else { return }
        pagesPerFlush.append(unflushed)
        unflushed = 0
    }

    /// Returns once `count` pages have arrived.
    func waitForPages(_ count: Int) async {
        guard pages.count < count else { return }
        await withCheckedContinuation { waiter = (count, $0) }
    }
}
