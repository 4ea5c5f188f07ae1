import FeedEngine
import FeedKit
import FeedServer
import Glibc

/// The HTTP front (SPEC §11): the feeds as JSON pages and Server-Sent Events, the metrics, a
/// health check and the infinite-scroll page, on the listeners of `[http]`.
///
/// Everything runs on the main actor, from the event loop, like the socket server: requests
/// reach the engine through ``FeedAccess`` only, which calls the ``FeedService`` alone, and no
/// request blocks the loop (one that must wait is suspended). The socket's limits hold here too: `max_line_bytes` bounds the request
/// target, each header line and the body (413 `line_too_long`), `[http] max_clients` (default
/// `daemon.max_clients`) the connections (429 `too_many_clients`), `stall_timeout` an idle or
/// unread connection, and an event stream holds a few pages at most.
@MainActor
public final class HTTPFront: HTTPRequestHandler {
    let access: FeedAccess
    let logger: Logger
    let loop: EventLoop
    let counters = HTTPCounters()
    private(set) var tokens = BearerTokens([:])
    private(set) var crossOrigin = CrossOriginPolicy(origins: [])
    private(set) var limits = Limits()
    let pool: ReadingPool
    private var daemons: [MicroHTTPDaemon] = []
    /// The event streams open now, for keep-alives and shutdown.
    var streams: [ObjectIdentifier: EventStream] = [:]
    /// Requests waiting for the engine, answered `shutting_down` at shutdown.
    var waiting: [ObjectIdentifier: HTTPExchange] = [:]
    private var keepAliveTimer: EventLoop.ScheduledTimer?
    private var phase = Phase.starting
    private var onDrained: (() -> Void)?

    private enum Phase {
        case starting
        case ready
        case stopping
    }

    /// The limits taken from `[daemon]` and `[http]`; a reload changes them for new requests.
    struct Limits {
        var maxClients = 10_000
        var maxLineBytes = 65_536
        var stallTimeout: Duration = .seconds(60)
        /// Pages an event stream holds unsent before its reading stops advancing (the socket's window).
        var pageWindow = 4
    }

    /// Each connection's buffer (see ``start(_:settings:)``): libmicrohttpd's own default.
    static let connectionMemory = 32 << 10

    /// How often an event stream that sent nothing gets a comment, so that proxies keep it
    /// open and a client that left without a word is noticed.
    static let keepAliveInterval: Duration = .seconds(15)

    /// A front for the feeds `service` serves; `socketMetrics` gives the socket server's figures,
    /// which its own are added to. It serves nothing until ``start(_:settings:)``.
    public init(
        service: FeedService, socketMetrics: @escaping @MainActor () -> MetricsSnapshot, settings: HTTPSettings, daemon: DaemonSettings,
        logger: Logger, loop: EventLoop
    ) {
        access = FeedAccess(service: service, socketMetrics: socketMetrics)
        self.logger = logger.labelled("http")
        self.loop = loop
        pool = ReadingPool(access: access, loop: loop, linger: settings.readingLinger)
        apply(settings, daemon: daemon)
    }

    /// Takes a (re)loaded configuration's tokens, origins and limits; listeners and TLS stay as
    /// they started.
    public func apply(_ settings: HTTPSettings, daemon: DaemonSettings) {
        tokens = BearerTokens(settings.tokens)
        crossOrigin = CrossOriginPolicy(origins: settings.corsOrigins)
        limits.maxClients = settings.maxClients ?? daemon.maxClients
        limits.maxLineBytes = daemon.maxLineBytes
        limits.stallTimeout = daemon.stallTimeout
        pool.linger = settings.readingLinger
    }

    /// Serves `listeners` (their descriptors now belong to the front), with TLS if `settings` has it.
    public func start(_ listeners: [HTTPListener], settings: HTTPSettings) throws(HTTPStartError) {
        let tls = settings.tlsCertificate.flatMap { certificate in settings.tlsKey.map { (certificate, $0.bytes) } }
        let timeout = Int(max(1, (limits.stallTimeout.wholeMilliseconds + 999) / 1000))
        // libmicrohttpd's buffer for a connection's request header and the chunks of its answer,
        // which it clears (so touches) whole between the requests of a kept-alive connection: it
        // is what an idle connection costs. A header that does not fit is answered 431 by
        // libmicrohttpd itself; within it, max_line_bytes applies (413 line_too_long).
        let memory = Self.connectionMemory
        // A few connections beyond the limit are taken, to answer them 429.
        let connections = limits.maxClients + 64
        for listener in listeners {
            let daemon = try MicroHTTPDaemon(
                name: listener.name, listener: listener.descriptor, isTCP: listener.port != nil,
                limits: .init(connections: connections, timeoutSeconds: timeout, connectionMemory: memory), tls: tls, handler: self,
                counters: counters, logger: logger, loop: loop)
            daemons.append(daemon)
            let shown = listener.port.map { port in listener.name.hasSuffix(":0") ? String(listener.name.dropLast()) + String(port) : listener.name }
            logger.notice("HTTP\(tls == nil ? "" : "S") listening on \(shown ?? listener.name)")
        }
        keepAliveTimer = loop.scheduleTimer(after: Self.keepAliveInterval) { [weak self] in self?.keepAlive() }
    }

    /// Answers `/healthz` 200 from now on.
    public func ready() {
        if phase == .starting { phase = .ready }
    }

    /// Ends every event stream with a `bye` event, answers every waiting request 503
    /// `shutting_down` and from now on every new one (`/healthz` 503), and calls `completion`
    /// once the streams are written or `deadline` has passed.
    public func shutdown(within deadline: Duration, completion: @escaping @MainActor () -> Void) {
        phase = .stopping
        pool.closeAll()
        for exchange in Array(waiting.values) { exchange.respond(.error(.shuttingDown)) }
        waiting.removeAll()
        for stream in streams.values { stream.finish(with: EventFraming.bye(code: "shutting_down", message: "feedd is shutting down")) }
        guard !streams.isEmpty else { return completion() }
        onDrained = completion
        loop.scheduleTimer(after: deadline) { [weak self] in self?.drained() }
    }

    func streamEnded(_ stream: EventStream) {
        streams[ObjectIdentifier(stream)] = nil
        if phase == .stopping, streams.isEmpty { drained() }
    }

    /// Calls the shutdown's completion, on a turn of its own: the last stream usually ends inside
    /// a call from libmicrohttpd, which must not be where the daemon stops.
    private func drained() {
        guard let onDrained else { return }
        self.onDrained = nil
        loop.scheduleTimer(after: .zero) { onDrained() }
    }

    private func keepAlive() {
        for stream in streams.values { stream.keepAlive() }
        keepAliveTimer = loop.scheduleTimer(after: Self.keepAliveInterval) { [weak self] in self?.keepAlive() }
    }

    var isReady: Bool { phase == .ready }
    var isStopping: Bool { phase == .stopping }

    // MARK: HTTPRequestHandler

    var maxBodyBytes: Int { limits.maxLineBytes }

    func requestBegan(_ exchange: HTTPExchange) {
        if counters.connections > limits.maxClients {
            logger.warning("refused an HTTP request: max_clients (\(limits.maxClients)) reached")
            return respond(exchange, .error(.tooManyClients(limits.maxClients)))
        }
        if exchange.targetLength() > limits.maxLineBytes {
            return respond(exchange, .error(.tooLarge("the request target", limit: limits.maxLineBytes)))
        }
        if exchange.longestHeaderLine() > limits.maxLineBytes {
            return respond(exchange, .error(.tooLarge("a header line", limit: limits.maxLineBytes)))
        }
        if let length = exchange.header("Content-Length").flatMap({ Int($0) }), length > limits.maxLineBytes {
            return respond(exchange, .error(.tooLarge("the body", limit: limits.maxLineBytes)))
        }
    }

    func requestArrived(_ exchange: HTTPExchange) {
        guard let route = HTTPRoute(path: exchange.path) else { return respond(exchange, .error(.notFound(exchange.path))) }
        let method = exchange.method == "HEAD" ? "GET" : exchange.method
        if method == "OPTIONS" { return respond(exchange, preflight(exchange, route: route)) }
        guard route.methods.contains(exchange.method) else {
            return respond(exchange, .error(.methodNotAllowed(exchange.method, path: exchange.path, allowed: route.methods)))
        }
        if exchange.bodyOverflowed { return respond(exchange, .error(.tooLarge("the body", limit: limits.maxLineBytes))) }
        if isStopping, route != .health { return respond(exchange, .error(.shuttingDown)) }
        if let refusal = authorization(exchange, route: route) { return respond(exchange, .error(refusal)) }
        if let feed = route.feed, !access.hasFeed(feed) { return respond(exchange, .error(.unknownFeed(feed, known: visibleFeeds(exchange)))) }
        switch route {
        case .scrollPage: respond(exchange, ScrollPage.answer)
        case .health: respond(exchange, health())
        case .metrics: respond(exchange, metrics())
        case .feeds: respond(exchange, feedList(exchange))
        case .feed(let name): respond(exchange, status(of: name))
        case .pages(let name): servePages(exchange, feed: name)
        case .events(let name): serveEvents(exchange, feed: name)
        case .acknowledge(let name): acknowledge(exchange, feed: name)
        case .refresh(let name): refresh(exchange, feed: name)
        case .badFeedName(let name): respond(exchange, .error(.unknownFeed(name, known: visibleFeeds(exchange))))
        }
    }

    /// 401 for a feed (or `/metrics`) with a token the request does not present; nil if allowed.
    private func authorization(_ exchange: HTTPExchange, route: HTTPRoute) -> HTTPError? {
        let resource = route == .metrics ? HTTPSettings.metricsTokenName : route.feed
        guard let resource, tokens.isProtected(resource) else { return nil }
        switch tokens.verdict(for: resource, authorization: exchange.header("Authorization")) {
        case .allowed: return nil
        case .missing: return .unauthorized(feed: route.feed, presented: false)
        case .refused:
            logger.warning("refused an HTTP request for \(route == .metrics ? "/metrics" : "feed \(resource)"): wrong bearer token")
            return .unauthorized(feed: route.feed, presented: true)
        }
    }

    /// The feeds a request may read: those without a token, and those whose token it presents.
    func visibleFeeds(_ exchange: HTTPExchange) -> [String] {
        let authorization = exchange.header("Authorization")
        return access.feedNames.filter { !tokens.isProtected($0) || tokens.verdict(for: $0, authorization: authorization) == .allowed }
    }

    private func preflight(_ exchange: HTTPExchange, route: HTTPRoute) -> HTTPAnswer {
        var answer = HTTPAnswer(status: 204, contentType: "text/plain", body: [])
        answer.headers.removeAll()
        answer.header("Allow", route.methods.joined(separator: ", "))
        for (name, value) in crossOrigin.preflightHeaders(for: exchange.header("Origin"), methods: route.methods) { answer.header(name, value) }
        return answer
    }

    /// Answers with the CORS fields the request's origin gets.
    func respond(_ exchange: HTTPExchange, _ answer: HTTPAnswer) {
        var answer = answer
        if exchange.method != "OPTIONS" {
            for (name, value) in crossOrigin.headers(for: exchange.header("Origin")) { answer.header(name, value) }
        }
        answer.header("X-Content-Type-Options", "nosniff")
        exchange.respond(answer)
    }
}
