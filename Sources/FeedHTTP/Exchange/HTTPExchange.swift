import CMicroHTTPD
import FeedKit
import Glibc

/// One HTTP request and its answer, from the moment its header is in until libmicrohttpd says
/// the request is over.
///
/// libmicrohttpd calls the access handler several times per request: once the header is in, once
/// per piece of body, and again once the request is complete, until an answer is queued. The
/// exchange carries the request between those calls and is what the front answers through. An
/// answer given during a call (the usual case: a cached page, a status) is queued at once. When
/// the answer must wait (a page being fetched, a cursor being stored), the connection is
/// suspended at the end of the call, so it costs no polling and holds up nothing; the answer, once
/// given, resumes it, and is queued when libmicrohttpd calls again.
@MainActor
final class HTTPExchange {
    enum State: Equatable {
        /// The header is in; the body, if any, is arriving.
        case receiving
        /// The request is complete and being answered.
        case waiting
        /// Waiting for an answer, with the connection suspended.
        case suspended
        /// The answer came while suspended: queued when libmicrohttpd calls again.
        case resuming
        /// The answer is queued.
        case answered
        /// libmicrohttpd ended the request.
        case finished
    }

    let connection: OpaquePointer
    let method: String
    /// The path, percent-decoded by libmicrohttpd, without the query.
    let path: String
    /// An HTTP/1.0 request, whose answer of unknown length is sent unchunked, until the end.
    let isHTTP10: Bool
    private(set) var state = State.receiving
    private(set) var body: [UInt8] = []
    /// Set when the body grew past the limit: it is dropped, and the request answered 413.
    private(set) var bodyOverflowed = false
    private var pendingAnswer: HTTPAnswer?
    private var isInCallback = false
    private var isReceivingBody = false
    /// What was written of bodies: the front's `bytes sent` figure.
    private let counters: HTTPCounters
    /// Called once when the request ends, with whether libmicrohttpd sent the whole answer.
    private var finishHandlers: [(Bool) -> Void] = []
    /// What answering the request needs kept alive until it ends (a reading's sink, say).
    private var kept: [AnyObject] = []

    /// The daemon serving the connection, which must run after the connection is resumed.
    unowned let daemon: MicroHTTPDaemon

    init(connection: OpaquePointer, method: String, path: String, isHTTP10: Bool, daemon: MicroHTTPDaemon, counters: HTTPCounters) {
        self.connection = connection
        self.daemon = daemon
        self.method = method
        self.path = path
        self.isHTTP10 = isHTTP10
        self.counters = counters
    }

    // MARK: The request

    /// The first value of header field `name` (any case).
    func header(_ name: String) -> String? {
        MHD_lookup_connection_value(connection, .HEADER_KIND, name).map { String(cString: $0) }
    }

    /// The first value of query parameter `name`, percent-decoded.
    func query(_ name: String) -> String? {
        MHD_lookup_connection_value(connection, .GET_ARGUMENT_KIND, name).map { String(cString: $0) }
    }

    /// The longest header field line (name, value and separator).
    func longestHeaderLine() -> Int {
        var longest = 0
        forEachValue(.HEADER_KIND) { keySize, valueSize in longest = max(longest, keySize + valueSize + 2) }
        return longest
    }

    /// The request target's length: the path and every query parameter.
    func targetLength() -> Int {
        var length = path.utf8.count
        forEachValue(.GET_ARGUMENT_KIND) { keySize, valueSize in length += keySize + valueSize + 2 }
        return length
    }

    /// Calls `body` with the sizes of each value of `kind`, as libmicrohttpd decoded them.
    private func forEachValue(_ kind: MHD_ValueKind, _ body: (Int, Int) -> Void) {
        withoutActuallyEscaping(body) { body in
            var visit = body
            withUnsafeMutablePointer(to: &visit) { pointer in
                _ = MHD_get_connection_values_n(connection, kind, { context, _, _, keySize, _, valueSize in
                    context!.assumingMemoryBound(to: ((Int, Int) -> Void).self).pointee(keySize, valueSize)
                    return .YES
                }, pointer)
            }
        }
    }

    /// Appends a piece of the body, dropping everything once the body is over `limit`.
    func receive(_ bytes: UnsafeRawBufferPointer, limit: Int) {
        guard !bodyOverflowed else { return }
        guard body.count + bytes.count <= limit else {
            bodyOverflowed = true
            body = []
            return
        }
        body.append(contentsOf: bytes)
    }

    // MARK: Answering

    /// Answers the request: at once during a call from libmicrohttpd, else by resuming the
    /// connection. A second answer, or one after the request ended, is dropped.
    func respond(_ answer: HTTPAnswer) {
        switch state {
        case .receiving, .waiting:
            // Outside a call, or while the body arrives (when libmicrohttpd takes no answer), it
            // waits for the next call.
            if isInCallback, !isReceivingBody { queue(answer) } else { pendingAnswer = answer }
        case .suspended:
            pendingAnswer = answer
            state = .resuming
            MHD_resume_connection(connection)
            daemon.runSoon()
        case .resuming, .answered, .finished:
            break
        }
    }

    /// libmicrohttpd is calling the access handler, with a piece of the body (`receivingBody`)
    /// or not; `body` runs within the call. After a call without body, an answer given earlier
    /// is queued, and if there is none while the request is complete, the connection is suspended.
    func duringCall(receivingBody: Bool, _ body: () -> Void) {
        isInCallback = true
        isReceivingBody = receivingBody
        body()
        if !receivingBody, state != .answered, state != .finished, let answer = pendingAnswer {
            pendingAnswer = nil
            queue(answer)
        }
        isInCallback = false
        isReceivingBody = false
        if state == .waiting {
            state = .suspended
            MHD_suspend_connection(connection)
        }
    }

    /// The body is complete: the request is answered from now on.
    func requestCompleted() {
        if state == .receiving { state = .waiting }
    }

    /// Calls `handler` when the request ends, with whether the whole answer was sent.
    func onFinish(_ handler: @escaping (Bool) -> Void) {
        guard state != .finished else { return handler(false) }
        finishHandlers.append(handler)
    }

    /// Keeps `object` alive until the request ends.
    func keep(_ object: AnyObject) {
        kept.append(object)
    }

    var isFinished: Bool { state == .finished }

    func finish(sentCompletely: Bool) {
        guard state != .finished else { return }
        state = .finished
        pendingAnswer = nil
        let handlers = finishHandlers
        finishHandlers = []
        for handler in handlers { handler(sentCompletely) }
        kept = []
    }

    private func queue(_ answer: HTTPAnswer) {
        state = .answered
        let response: OpaquePointer?
        switch answer.body {
        case .bytes(let bytes):
            counters.bytesSent += bytes.count
            // libmicrohttpd frees the copy once it is sent.
            let copy = malloc(max(bytes.count, 1))!
            bytes.withUnsafeBytes { copy.copyMemory(from: $0.baseAddress!, byteCount: $0.count) }
            response = MHD_create_response_from_buffer(bytes.count, copy, .RESPMEM_MUST_FREE)
            if response == nil { free(copy) }
        case .pieces(let pieces):
            counters.bytesSent += pieces.reduce(0) { $0 + $1.count }
            response = Self.response(sending: pieces)
        case .events(let stream):
            response = stream.makeResponse(connection: connection, daemon: daemon, chunked: !isHTTP10)
        }
        guard let response else {
            // Out of memory: libmicrohttpd closes the connection when no answer is queued.
            return
        }
        for (name, value) in answer.headers { MHD_add_response_header(response, name, value) }
        MHD_queue_response(connection, UInt32(answer.status), response)
        MHD_destroy_response(response)
    }
}

extension HTTPExchange {
    /// A response that sends `pieces` as they are; it keeps them until libmicrohttpd is done.
    fileprivate static func response(sending pieces: [PageBytes]) -> OpaquePointer? {
        if pieces.count == 1 { return response(sending: pieces[0]) }
        let vectors = pieces.map { MHD_IoVec(iov_base: $0.buffer.baseAddress, iov_len: $0.count) }
        let kept = Unmanaged.passRetained(KeptPieces(pieces)).toOpaque()
        let response = MHD_create_response_from_iovec(vectors, UInt32(vectors.count), { kept in
            Unmanaged<KeptPieces>.fromOpaque(kept!).release()
        }, kept)
        if response == nil { Unmanaged<KeptPieces>.fromOpaque(kept).release() }
        return response
    }

    /// A response that sends `bytes` as they are. Unlike pieces, one buffer goes out in the same
    /// write as the header: one send, one segment on TCP, one wake-up of the client.
    fileprivate static func response(sending bytes: PageBytes) -> OpaquePointer? {
        let kept = Unmanaged.passRetained(bytes).toOpaque()
        let response = MHD_create_response_from_buffer_with_free_callback_cls(
            bytes.count, UnsafeMutableRawPointer(mutating: bytes.buffer.baseAddress), { kept in
                Unmanaged<PageBytes>.fromOpaque(kept!).release()
            }, kept)
        if response == nil { Unmanaged<PageBytes>.fromOpaque(kept).release() }
        return response
    }
}

/// The pieces of a response, alive while libmicrohttpd sends them.
private final class KeptPieces {
    let pieces: [PageBytes]

    init(_ pieces: [PageBytes]) {
        self.pieces = pieces
    }
}

/// The front's own figures, for the metrics.
@MainActor
final class HTTPCounters {
    /// Connections open now.
    var connections = 0
    /// Connections accepted since start.
    var connectionsAccepted = 0
    /// Bytes of answer bodies and event streams handed to libmicrohttpd.
    var bytesSent = 0
}
