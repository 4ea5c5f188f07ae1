import CMicroHTTPD
import FeedKit
import FeedServer

/// One client's `GET /v1/feeds/F/events`: a following reading of the feed, written as
/// Server-Sent Events for as long as the client stays.
///
/// Flow control is the socket's: the stream holds at most ``window`` pages that libmicrohttpd has
/// not taken yet, and while it does the reading stops advancing; libmicrohttpd takes more only as
/// the client reads (its buffer for the connection is bounded). So a client that stops reading
/// costs a bounded amount of memory and holds up nobody, and one that reads nothing for
/// `stall_timeout` is disconnected by libmicrohttpd. With nothing to send the connection is
/// suspended; an event resumes it.
@MainActor
final class EventStream: FeedEventSink {
    let feed: String
    private let access: FeedAccess
    private let counters: HTTPCounters
    private let window: Int
    private var queue = OutgoingQueue()
    var reading: FeedReading?
    private var connection: OpaquePointer?
    private weak var daemon: MicroHTTPDaemon?
    /// While suspended, libmicrohttpd does not see the client leave: the event loop watches its
    /// socket for that meanwhile, so a client that left frees its slot at once.
    private var hangUpWatch: EventLoop.ReadableWatch?
    private var isSuspended = false
    /// Set once the last event is queued: the stream ends when it is written.
    private var isEnding = false
    /// Whether anything was queued since the last keep-alive check.
    private var sentSinceKeepAlive = false

    /// The most bytes one call of libmicrohttpd's copies: into the connection's buffer for a
    /// chunked stream (``HTTPFront/connectionMemory`` less the request's header), into the
    /// response's block, of this size, for an unchunked one. A page of a few dozen KB fits whole.
    static let chunkLimit = 32 * 1024

    init(feed: String, access: FeedAccess, counters: HTTPCounters, window: Int) {
        self.feed = feed
        self.access = access
        self.counters = counters
        self.window = window
        // The client's EventSource waits this long before reconnecting.
        queue.append(Array("retry: 2000\n\n".utf8), endsPage: false)
    }

    // MARK: FeedEventSink

    var canTakePage: Bool { !isEnding && queue.pageCount < window }

    func receive(_ event: FeedEvent, from reading: FeedReading) {
        receive(event, generation: reading.generation)
    }

    /// Queues `event` of a reading in `generation`.
    func receive(_ event: FeedEvent, generation: Int? = nil) {
        guard !isEnding else { return }
        switch event {
        case .page(let page):
            queue.append(PageHeads.head(of: page), endsPage: false)
            queue.append(page.openBody, endsPage: false)
            queue.append(EventFraming.pageTail, endsPage: true)
        case .end(let page):
            queue.append(EventFraming.end(feed: feed, generation: generation ?? 0, page: page), endsPage: false)
        case .upstreamFailing(let message, let retryIn):
            queue.append(EventFraming.upstream(feed: feed, message: message, retryIn: retryIn), endsPage: false)
        case .refreshed(let generation):
            queue.append(EventFraming.refreshed(feed: feed, generation: generation), endsPage: false)
        case .ended(let code, let message):
            self.reading = nil
            finish(with: EventFraming.bye(code: code, message: message))
            return
        }
        sentSinceKeepAlive = true
    }

    func flush() {
        guard isSuspended, let connection, !queue.isEmpty || isEnding else { return }
        isSuspended = false
        stopWatchingHangUp()
        MHD_resume_connection(connection)
        daemon?.runSoon()
    }

    /// Suspends the connection until an event comes, watching for the client to leave meanwhile.
    private func suspend(_ connection: OpaquePointer) {
        isSuspended = true
        MHD_suspend_connection(connection)
        if let loop = daemon?.loop {
            hangUpWatch = loop.watchHangUp(feedd_http_connection_descriptor(connection)) { [weak self] in
                self?.stopWatchingHangUp()
                self?.finish(with: nil)
            }
        }
    }

    private func stopWatchingHangUp() {
        if let hangUpWatch, let loop = daemon?.loop { loop.stopWatching(hangUpWatch) }
        hangUpWatch = nil
    }

    // MARK: The stream's life

    /// Queues `event` and ends the stream once everything queued is written.
    func finish(with event: [UInt8]?) {
        guard !isEnding else { return }
        if let event { queue.append(event, endsPage: false) }
        isEnding = true
        if let reading { access.close(reading) }
        reading = nil
        flush()
    }

    /// A comment, so that proxies keep the connection and a client that left is noticed, if
    /// nothing else was sent since the last call.
    func keepAlive() {
        defer { sentSinceKeepAlive = false }
        guard !sentSinceKeepAlive, !isEnding else { return }
        queue.append(EventFraming.keepAlive, endsPage: false)
        flush()
    }

    /// libmicrohttpd ended the request (the client left, or the stream ended).
    func connectionEnded() {
        stopWatchingHangUp()
        connection = nil
        isSuspended = false
        isEnding = true
        if let reading { access.close(reading) }
        reading = nil
        queue = OutgoingQueue()
    }

    /// The response that sends the stream; `chunked` as libmicrohttpd will send it (HTTP/1.1).
    func makeResponse(connection: OpaquePointer, daemon: MicroHTTPDaemon, chunked: Bool) -> OpaquePointer? {
        self.connection = connection
        self.daemon = daemon
        // The response keeps the stream until libmicrohttpd destroys it.
        let context = Unmanaged.passRetained(self).toOpaque()
        // libmicrohttpd fills an unchunked stream (HTTP/1.0) into the response's own block, a
        // chunked one into the connection's buffer: that block is never used, and so kept small.
        // Each fill is one write, and libmicrohttpd writes once per stream per `MHD_run`, so an
        // unchunked block holds a page whole: one write per page, one skb on a Unix socket and
        // one wake-up of the client, not six 4 KiB writes over six passes of `MHD_run`.
        let blockSize = chunked ? 64 : Self.chunkLimit
        let response = MHD_create_response_from_callback(UInt64.max, blockSize, Self.read, context, Self.release)
        if response == nil { Unmanaged<EventStream>.fromOpaque(context).release() }
        return response
    }

    /// Copies what is queued into libmicrohttpd's buffer; with nothing queued, suspends the
    /// connection until an event comes. Taking pages out of the window lets the reading advance.
    private func fill(_ buffer: UnsafeMutablePointer<CChar>, capacity: Int) -> Int {
        if queue.isEmpty {
            if isEnding || connection == nil { return Self.endOfStream }
            if let connection { suspend(connection) }
            return 0
        }
        let pagesBefore = queue.pageCount
        let count = queue.take(into: UnsafeMutableRawBufferPointer(start: buffer, count: min(capacity, Self.chunkLimit)))
        counters.bytesSent += count
        if queue.pageCount < pagesBefore, let reading { access.resume(reading) }
        return count
    }

    private static let endOfStream = MHD_CONTENT_READER_END_OF_STREAM

    // Called from inside `MHD_run`, on the main actor (see MicroHTTPDaemon). The response holds
    // the stream (``makeResponse``) for as long as it can be called, so the call need not: a
    // stream is weakly referenced (by its reading), and retaining such an object is slow.
    private static let read: MHD_ContentReaderCallback = { context, _, buffer, capacity in
        nonisolated(unsafe) let call = (context!, buffer!)
        return MainActor.assumeIsolated {
            Unmanaged<EventStream>.fromOpaque(call.0)._withUnsafeGuaranteedRef { $0.fill(call.1, capacity: capacity) }
        }
    }

    private static let release: MHD_ContentReaderFreeCallback = { context in
        Unmanaged<EventStream>.fromOpaque(context!).release()
    }
}

/// Bytes waiting to be handed to libmicrohttpd: pieces, some shared with other streams (a page's
/// body), taken from the front without copying what is left.
struct OutgoingQueue {
    private var pieces: [(bytes: PageBytes, endsPage: Bool)] = []
    private var first = 0
    /// How much of the first piece is taken.
    private var offset = 0
    /// Pages queued and not wholly taken.
    private(set) var pageCount = 0

    var isEmpty: Bool { first == pieces.count }

    mutating func append(_ bytes: [UInt8], endsPage: Bool) {
        append(PageBytes(bytes), endsPage: endsPage)
    }

    mutating func append(_ bytes: PageBytes, endsPage: Bool) {
        pieces.append((bytes, endsPage))
        if endsPage { pageCount += 1 }
    }

    /// Copies as much as fits into `buffer`; returns how many bytes.
    mutating func take(into buffer: UnsafeMutableRawBufferPointer) -> Int {
        var written = 0
        while first < pieces.count, written < buffer.count {
            let piece = pieces[first]
            let count = min(piece.bytes.count - offset, buffer.count - written)
            if count > 0 {
                UnsafeMutableRawBufferPointer(rebasing: buffer[written..<(written + count)])
                    .copyMemory(from: UnsafeRawBufferPointer(rebasing: piece.bytes.buffer[offset..<(offset + count)]))
            }
            written += count
            offset += count
            guard offset == piece.bytes.count else { break }
            if piece.endsPage { pageCount -= 1 }
            first += 1
            offset = 0
        }
        if first == pieces.count {
            pieces.removeAll(keepingCapacity: true)
            first = 0
        } else if first > 64 {
            pieces.removeFirst(first)
            first = 0
        }
        return written
    }
}

/// The heads of page events, shared by every stream they go to: a page reaches a thousand
/// followers one after another, and each would otherwise allocate the same bytes.
@MainActor
enum PageHeads {
    private static var heads = PageMemo(capacity: 16)

    static func head(of page: DeliveredPage) -> PageBytes {
        heads.bytes(for: page.openBody) { EventFraming.pageHead(generation: page.generation, page: page.number) }
    }
}
