import FeedKit
import Testing

@testable import FeedEngine

/// The feed engine without the server: a scripted adapter below it and recording outputs above.
@MainActor
@Suite(.timeLimit(.minutes(1))) struct FeedTests {
    @Test func subscribers_waiting_for_the_same_page_share_one_upstream_request() async {
        let (service, feed, adapter, encoder) = Self.feed(prefetch: 0)
        let outputs = (0..<20).map { _ in RecordingOutput() }
        for output in outputs { output.next(1, of: service) }
        for output in outputs { await output.waitForPages(1) }
        #expect(adapter.requestedPages == [1])
        #expect(feed.counters.upstreamRequests == 1)
        #expect(encoder.encodedPages == 1, "the page is encoded once")
        let lines = outputs.map { $0.pages[0].line }
        #expect(lines.allSatisfy { $0 === lines[0] }, "and every subscriber gets the same bytes")
    }

    @Test func a_follower_catching_up_gets_its_pages_a_window_at_a_time() async {
        let (service, _, _, _) = Self.feed(prefetch: 0)
        let reader = RecordingOutput()
        reader.next(10, of: service)
        await reader.waitForPages(10)

        let follower = RecordingOutput(window: 4)
        follower.subscribe(to: service, follows: true)
        #expect(follower.pages.map(\.number) == Array(1...10), "the cached pages, at once")
        #expect(follower.pagesPerFlush == [4, 4, 2])
    }

    @Test func a_page_is_fetched_only_once_it_is_wanted() async {
        let (service, feed, adapter, _) = Self.feed(prefetch: 0)
        let output = RecordingOutput()
        output.subscribe(to: service)
        #expect(adapter.requestedPages.isEmpty && feed.counters.upstreamRequests == 0, "subscribing alone fetches nothing")
        output.next(2, of: service, replyTo: ReplyTag([7]))
        await output.waitForPages(2)
        #expect(output.pages.map(\.number) == [1, 2])
        #expect(output.replies == [ReplyTag([7]), ReplyTag([7])], "both pages answer the one next")
        #expect(adapter.requestedPages == [1, 2])
    }

    static func feed(prefetch: Int) -> (FeedService, Feed, NumberedPages, CountingEncoder) {
        let adapter = NumberedPages()
        let encoder = CountingEncoder()
        var settings = FeedSettings(name: "numbers", source: "scripted", prefetch: prefetch)
        settings.cachePages = 64
        let directory = FeedDirectory(store: nil, encoder: encoder, logger: Logger(sink: NoLog()))
        directory.apply([FeedDefinition(settings: settings, adapter: adapter)])
        let service = FeedService(directory: directory, limits: FeedService.Limits(subscriptionsPerClient: 8), logger: Logger(sink: NoLog()))
        return (service, directory["numbers"]!, adapter, encoder)
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
        return SharedBytes(Array("\(number)}\n".utf8))
    }
}

/// A connection stand-in: keeps the pages it is given and how they were flushed, and holds at
/// most `window` unflushed pages, as a connection does.
@MainActor
final class RecordingOutput: ClientHandle {
    private let window: Int
    private(set) var clientID = ClientID(value: 0)
    private var isConnected = false
    private(set) var pages: [Page] = []
    private(set) var replies: [ReplyTag?] = []
    private(set) var pagesPerFlush: [Int] = []
    private var unflushed = 0
    private var waiter: (count: Int, continuation: CheckedContinuation<Void, Never>)?

    init(window: Int = 4) {
        self.window = window
    }

    var canTakePage: Bool { unflushed < window }

    func subscribe(to service: FeedService, follows: Bool = false) {
        connect(to: service)
        service.subscribe(self, to: "numbers", follow: follows) { _ in }
    }

    func next(_ count: Int, of service: FeedService, replyTo: ReplyTag? = nil) {
        connect(to: service)
        service.next(self, feed: "numbers", count: count, replyTo: replyTo) { _ in }
    }

    private func connect(to service: FeedService) {
        guard !isConnected else { return }
        clientID = service.connect()
        isConnected = true
    }

    func receive(_ event: ClientEvent) {
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
