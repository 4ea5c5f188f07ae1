import FeedKit

/// The checks every source adapter must pass, so an adapter's own tests are a few lines:
///
/// ```swift
/// @Test func conforms() async throws {
///     try await AdapterConformance.check(try makeAdapter(), pages: .finite(3), failing: try makeBrokenAdapter())
/// }
/// ```
///
/// - pages come in order, each a page, following the tokens the adapter hands out;
/// - ids are non-empty and unique across the pages read;
/// - a page asked for again with the same token comes back the same (ids stable);
/// - a finite source reports `.end` on its last page and `.more` before it;
/// - an adapter that says its pages are ``PageAddressing/direct`` answers every page asked for
///   by its number alone (no token) with the page it gave when walked to;
/// - a broken source throws ``SourceError``, never another error.
public enum AdapterConformance {
    public enum Pages: Sendable {
        /// The source has exactly this many pages.
        case finite(Int)
        /// The source never ends; check this many pages.
        case endless(checking: Int)
    }

    public static func check(_ adapter: any SourceAdapter, pages: Pages, failing: (any SourceAdapter)? = nil) async throws {
        let count: Int
        switch pages {
        case .finite(let total): count = total
        case .endless(let checking): count = checking
        }
        var token: String?
        var tokens: [String?] = []
        var seenIDs: Set<String> = []
        var firstFetch: [FetchResult] = []
        for page in 1...count {
            tokens.append(token)
            let result = try await fetch(adapter, PageRequest(page: page, token: token, generation: 1, seed: "test"))
            guard case .page(let items, let next) = result else { throw TestFailure("page \(page): got \(result), not a page") }
            firstFetch.append(result)
            for item in items {
                guard !item.id.isEmpty else { throw TestFailure("page \(page): an item has an empty id") }
                guard seenIDs.insert(item.id).inserted else { throw TestFailure("page \(page): id \(item.id) seen before") }
            }
            switch (next, pages) {
            case (.end, .finite(let total)) where page == total:
                break
            case (.end, _):
                throw TestFailure("page \(page): the source ended early")
            case (.more, .finite(let total)) where page == total, (.later, .finite(let total)) where page == total:
                throw TestFailure("page \(page): the last page does not report the end")
            case (.more(let nextToken), _), (.later(let nextToken), _):
                token = nextToken
            }
        }
        for page in [1, count] {
            let again = try await fetch(adapter, PageRequest(page: page, token: tokens[page - 1], generation: 1, seed: "test"))
            guard again == firstFetch[page - 1] else { throw TestFailure("page \(page) came back different when asked again") }
        }
        if adapter.pageAddressing == .direct {
            for page in (1...count).reversed() {
                let direct = try await fetch(adapter, PageRequest(page: page, token: nil, generation: 1, seed: "test"))
                guard direct == firstFetch[page - 1] else { throw TestFailure("page \(page) asked for by number differs from page \(page) walked to") }
            }
        }
        if let failing {
            do {
                let result = try await failing.fetch(PageRequest(page: 1, token: nil, generation: 1, seed: "test"))
                throw TestFailure("the broken source answered \(result)")
            } catch is SourceError {
            } catch let failure as TestFailure {
                throw failure
            } catch {
                throw TestFailure("the broken source threw \(type(of: error)) (\(error)), not a SourceError")
            }
        }
    }

    private static func fetch(_ adapter: any SourceAdapter, _ request: PageRequest) async throws -> FetchResult {
        do {
            return try await adapter.fetch(request)
        } catch {
            throw TestFailure("page \(request.page): \(error)")
        }
    }

    /// An adapter context for tests: logs go nowhere unless a sink is given.
    package static func context(
        feed: String = "test", timeout: Duration = .seconds(5), poll: Duration? = nil, sink: any LogSink = DiscardingSink(),
        stateDirectory: String? = nil
    ) -> AdapterContext {
        AdapterContext(
            feed: feed, requestTimeout: timeout, pollInterval: poll, logger: Logger(sink: sink), transport: transport,
            stateDirectory: stateDirectory)
    }

    /// One transport for every test in the process, as the daemon has one.
    public static let transport: any HTTPTransport = CurlTransport()
}
