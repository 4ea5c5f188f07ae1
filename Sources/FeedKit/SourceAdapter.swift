/// A source of pages: the one extension point every adapter implements.
///
/// The daemon creates one adapter per configured feed, asks it for pages strictly one at a time
/// and in order of need, caches what it returns and shares it with every subscriber. An adapter
/// never sees subscribers, sockets or cursors; it only answers "what is page N?".
///
/// Rules an adapter can rely on and must keep:
/// - `fetch` is never called concurrently for the same adapter instance.
/// - A call that takes longer than the feed's `timeout` is abandoned: the engine stops waiting
///   and, before it calls `fetch` again, either waits for the abandoned call to return or
///   replaces the adapter instance. An adapter never sees two calls at once either way.
/// - Page 1 comes with `token == nil`; page N+1 comes with the token page N returned, so an
///   adapter whose source pages by cursor keeps its cursor in the token. A page may be asked for
///   again later with the same token (its cache entry was dropped, or the daemon restarted), and
///   should come back the same; an adapter whose source cannot promise that says so with
///   ``reproducesPages``, and the daemon keeps its pages instead of asking again.
/// - An adapter whose ``pageAddressing`` is ``PageAddressing/direct`` can also be asked for any
///   page N with `token == nil`, and must answer with the same page as when walking to it.
/// - Randomness that shapes pages comes from ``PageRequest/seed``, which the engine chooses when a
///   generation starts and keeps across restarts, so a page asked for again comes back the same.
/// - Throw ``SourceError`` to say what went wrong; the daemon retries with backoff, keeps the
///   feed up and tells subscribers. Any other error counts as ``SourceError/transient(_:retryAfter:)``.
/// - Option validation happens in `init`: read every key you support from ``AdapterOptions``,
///   and declare each in ``configKeys``: a key not declared is reported to the user as unknown.
///
/// A complete adapter over a fixed list, paged two at a time:
///
/// ```swift
/// import FeedKit
///
/// public struct GreetingSource: SourceAdapter {
///     public static let sourceName = "greetings"
///     public static let configKeys = [
///         ConfigKey("words", .stringArray, .value(#"["hello", "hola", "salut"]"#), "the greetings, in order"),
///     ]
///     let words: [String]
///
///     public init(options: AdapterOptions, context: AdapterContext) throws {
///         words = try options.stringArray("words") ?? ["hello", "hola", "salut"]
///     }
///
///     public func fetch(_ request: PageRequest) async throws -> FetchResult {
///         let start = (request.page - 1) * 2
///         let slice = words.dropFirst(start).prefix(2)
///         let items = slice.enumerated().map { offset, word in
///             Item(id: String(start + offset + 1), data: .string(word))
///         }
///         return .page(items, next: start + 2 < words.count ? .more(token: nil) : .end)
///     }
/// }
/// ```
///
/// Register it by adding `GreetingSource.self` to the daemon's list of adapters.
public protocol SourceAdapter: Sendable {
    /// The name a feed uses to select this adapter: `source = "greetings"`.
    static var sourceName: String { get }

    /// The keys of a feed table that this adapter reads, beside the daemon's own (`source`,
    /// `prefetch`, `timeout` …): the loader reports any other key as unknown, with the closest
    /// declared name, and `feedd config-keys` and `feedd.toml(5)` list them. Reading a key not
    /// declared here stops a debug build. The default, no declarations, leaves the loader to
    /// report the keys the adapter never read, and documents none.
    static var configKeys: [ConfigKey] { get }

    /// Validates the feed's options and prepares the adapter. Throw ``OptionError`` (or let the
    /// ``AdapterOptions`` accessors throw it) for a wrong, missing or malformed option.
    init(options: AdapterOptions, context: AdapterContext) throws

    /// Fetches the page described by `request`.
    func fetch(_ request: PageRequest) async throws -> FetchResult

    /// Fetches up to `maxPages` consecutive pages in one call, for a reader far behind: what
    /// calling ``fetch(_:)`` for each in turn would give, the first answering `request` and each
    /// after it answering the request for the next page with the token the one before gave in
    /// ``NextPage/more(token:)``. Implement it where the pages share work a call pays once (a
    /// file opened and read once for a run of pages); the default is one ``fetch(_:)``.
    ///
    /// Returns at least one result and at most `maxPages`, and none after one that is not a page
    /// followed by ``NextPage/more(token:)``. It may return fewer than asked, to keep a call
    /// short. It throws only when the first page fails: a page after it that cannot be fetched
    /// ends the run before it, and the daemon asks for that page again, alone, and is told
    /// why then. Every rule of ``fetch(_:)`` holds for each page.
    func fetch(_ request: PageRequest, pages maxPages: Int) async throws -> [FetchResult]

    /// What ``fetch(_:pages:)`` answers, with each page's items already written as the page
    /// line holds them (``WrittenItems``): the call the daemon makes. Implement it where the
    /// source's items are JSON text with numbers for ids that can be written straight from what
    /// was read (a file's lines, through ``WrittenItems/init(lines:endingAt:numbers:)``), so no
    /// ``Item`` is made of each; the default wraps ``fetch(_:pages:)``. Every rule of
    /// ``fetch(_:pages:)`` holds.
    func fetch(_ request: PageRequest, writtenPages maxPages: Int) async throws -> [WrittenFetchResult]

    /// Where the daemon runs ``fetch(_:)``; nil (the default) for Swift's shared pool. An adapter
    /// whose fetch is one request and the parse of a page-sized body names its transport's
    /// (``HTTPTransport/executor``): the request is then queued and its answer read on the
    /// transport's thread, with no other thread woken in between. An adapter that does more (a
    /// whole document, a process) keeps nil, or it would hold up every other feed's transfers.
    var fetchExecutor: (any TaskExecutor)? { get }

    /// Whether any page can be fetched from its number alone; ``PageAddressing/sequential`` (the
    /// default) means page N+1 needs the token page N returned.
    var pageAddressing: PageAddressing { get }

    /// Returns when the source may have data past what it last returned as ``FetchResult/notYet``.
    /// The default waits for the feed's `poll` interval; a live source can return sooner.
    func waitForNewData(after request: PageRequest, pollInterval: Duration) async throws

    /// Releases what the adapter holds (processes, files) when its feed is removed or replaced.
    func shutdown() async

    /// Called by `feedd check-config` to validate what can only be validated by running the
    /// adapter (the `exec` adapter starts its program and sends `configure`). Throw an error
    /// whose description says what is wrong; the default checks nothing more.
    func verify() async throws

    /// The feeds of the same configuration this adapter reads through ``AdapterContext/feeds``
    /// (a `merge` feed's members). The configuration must define them, and no feed may read
    /// itself, directly or through others; a new generation of one of them starts a new
    /// generation of this feed, and refreshing this feed refreshes them.
    var memberFeeds: [String] { get }

    /// Whether asking for a page of a generation again, with the same ``PageRequest/token`` and
    /// ``PageRequest/seed``, gives back the same items, in the same order, now and after a restart.
    ///
    /// True (the default) for a source that is a fixed list or addresses its pages (a file, an S3
    /// object per page, randomuser with the generation's seed): the daemon then keeps only each
    /// page's token, and fetches a page again whenever it needs it again. False for a source that
    /// cannot promise it (an RSS document that changes between looks and whose entries are
    /// published once, an upstream cursor that expires, a live API): the daemon then also stores
    /// every page it fetches, within `daemon.state_page_bytes`, and serves it from there instead of
    /// asking again, so a consumer resuming after a restart continues the very sequence it acknowledged.
    /// Read after every `fetch`, so an adapter may learn the answer while fetching (an `exec`
    /// plugin declares it when it is configured).
    var reproducesPages: Bool { get }
}

extension SourceAdapter {
    /// No declarations: the loader reports the keys the adapter never read.
    public static var configKeys: [ConfigKey] { [] }

    /// Sequential: page N is asked for with the token page N − 1 returned.
    public var pageAddressing: PageAddressing { .sequential }

    /// One page: a call of ``fetch(_:)``.
    public func fetch(_ request: PageRequest, pages maxPages: Int) async throws -> [FetchResult] {
        [try await fetch(request)]
    }

    /// The pages of ``fetch(_:pages:)``, their items written when each page is encoded.
    public func fetch(_ request: PageRequest, writtenPages maxPages: Int) async throws -> [WrittenFetchResult] {
        try await fetch(request, pages: maxPages).map(WrittenFetchResult.init)
    }

    /// None: Swift's shared pool.
    public var fetchExecutor: (any TaskExecutor)? { nil }

    /// None: the adapter reads no other feed.
    public var memberFeeds: [String] { [] }

    /// True: a page asked for again holds the same items.
    public var reproducesPages: Bool { true }

    /// Sleeps for `pollInterval`: a source without a way to hear of new data is looked at again then.
    public func waitForNewData(after request: PageRequest, pollInterval: Duration) async throws {
        try await Task.sleep(for: pollInterval)
    }

    /// Nothing to release.
    public func shutdown() async {}

    /// Nothing to check beyond what `init` checked.
    public func verify() async throws {}
}

/// What the daemon asks an adapter for.
public struct PageRequest: Sendable, Hashable {
    /// The source's page number, from 1. (For a `wrap` feed this restarts at 1 when the source ends,
    /// while the feed's own page numbers keep counting.)
    public let page: Int
    /// The continuation token the previous page returned, `nil` for page 1.
    public let token: String?
    /// The feed's generation; a refresh starts a new one, and page 1 again.
    public let generation: Int
    /// Chosen at random when the generation started and the same for every page of it, across
    /// restarts and on every instance of a fleet: an adapter whose pages depend on a random seed
    /// (randomuser without a fixed `seed`) uses this one, so a page fetched again is the same page.
    public let seed: String

    /// A request for source page `page` of `generation`, with `token` and the generation's `seed`.
    public init(page: Int, token: String?, generation: Int, seed: String) {
        self.page = page
        self.token = token
        self.generation = generation
        self.seed = seed
    }
}

/// How an adapter's pages can be reached (``SourceAdapter/pageAddressing``).
public enum PageAddressing: Sendable, Hashable {
    /// Page N+1 needs the token page N returned: the engine walks the pages in order.
    case sequential
    /// Page N can be fetched from its number alone (with `token == nil`), so a subscriber that
    /// starts after page 49,000 costs one request, not 49,000.
    case direct
}

/// What an adapter answers to a ``PageRequest``.
public enum FetchResult: Sendable, Hashable {
    /// The page's items, in order, and how the page after it is fetched.
    case page([Item], next: NextPage)
    /// A live source has nothing past the previous page yet: the daemon calls
    /// ``SourceAdapter/waitForNewData(after:pollInterval:)`` and asks again with the same request.
    case notYet
}

/// Whether a page follows the one just fetched.
public enum NextPage: Sendable, Hashable {
    /// Another page follows; `token` is handed back with the request for it.
    case more(token: String?)
    /// No page follows yet, but one may later (a polled source at its newest page): the daemon
    /// asks for the next page with `token` only after
    /// ``SourceAdapter/waitForNewData(after:pollInterval:)`` returns, instead of at once.
    case later(token: String?)
    /// The source has ended: the page just fetched is the last.
    case end
}

/// What the daemon tells an adapter when it creates it.
public struct AdapterContext: Sendable {
    /// The feed's name, for messages and for out-of-process adapters.
    public let feed: String
    /// How long one upstream request may take (the feed's `timeout`).
    public let requestTimeout: Duration
    /// The feed's `poll` setting: set when the feed should keep looking for data past its end.
    public let pollInterval: Duration?
    /// Where the adapter logs; lines are tagged with the feed.
    public let logger: Logger
    /// The daemon's HTTP transport, shared by every feed so connections to an upstream are reused.
    public let transport: any HTTPTransport
    /// A directory of this feed's own where the adapter may keep small files that must survive a
    /// restart (what an RSS feed has already published, say); nil where nothing is kept
    /// (`check-config`, tests), and then the adapter keeps that memory in the process only.
    public let stateDirectory: String?
    /// The other feeds of the configuration, for an adapter that reads them (`merge`); nil
    /// where there are none to read (`check-config`, tests of other adapters).
    public let feeds: (any FeedReader)?

    /// The context of feed `feed` (an adapter's tests make one with ``Logger/discarding``).
    public init(
        feed: String, requestTimeout: Duration, pollInterval: Duration? = nil, logger: Logger,
        transport: any HTTPTransport, stateDirectory: String? = nil,
        feeds: (any FeedReader)? = nil
    ) {
        self.feed = feed
        self.requestTimeout = requestTimeout
        self.pollInterval = pollInterval
        self.logger = logger
        self.transport = transport
        self.stateDirectory = stateDirectory
        self.feeds = feeds
    }

    /// The shared HTTP layer with this feed's timeout.
    public var http: HTTPSource { HTTPSource(transport: transport, timeout: requestTimeout) }
}

/// The daemon's version, as `feedd --version` and the socket's `hello` line report it.
package let feeddVersion = "0.1.0"
