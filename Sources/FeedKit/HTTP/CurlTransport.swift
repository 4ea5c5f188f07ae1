import CCurl
import Foundation
import Synchronization

/// The transport feedd uses: libcurl's multi interface, driven by one thread for every feed.
///
/// Waiting for an answer costs nothing: the thread sleeps in `curl_multi_poll` until a socket, a
/// new request or a cancellation wakes it. Foundation's URLSession, used before, kept two of its
/// threads waking each other for as long as a request waited, which cost a third of a core or
/// more per request in flight and delayed the daemon's replies on a small machine.
///
/// Connections to an upstream are kept and reused, and bodies may come compressed. Redirects are
/// followed here, not by libcurl, so that every hop is judged before anything connects there: over
/// http and https only, at most ``RedirectPolicy/maximumHops`` of them, only where the request's
/// ``RedirectPolicy`` allows, and a hop to another origin (scheme, host and port) goes without the
/// bearer token and without any header field but `Accept`, since a feed's `headers` may hold an
/// API key as well. Make one per process: its thread lives as long as it does.
///
/// It is also a task executor (``executor``): a task that prefers it runs on the loop thread,
/// between two polls, so a fetch that sends a request and parses the answer wakes no other
/// thread in between. A task resumed with a body over ``inlineBodyBytes`` goes on on Swift's
/// shared pool instead, so that parsing it holds up no other transfer.
package final class CurlTransport: HTTPTransport, TaskExecutor {
    /// A larger body is rejected (retried at the slowest rate, like a body that does not decode)
    /// instead of growing the daemon without bound.
    package let maximumBodyBytes: Int
    /// The largest body whose task is resumed on the loop thread: a page, read in about a millisecond.
    package static let inlineBodyBytes = 256 << 10

    private let multi: MultiHandle
    private let inbox = Locked<[Request]>([])
    /// Jobs of tasks that prefer this transport, run by the loop thread between its polls.
    private let jobs = Locked<[UnownedJob]>([])
    /// Set by the loop thread while it resumes a task with a body over ``inlineBodyBytes``: the job
    /// enqueued meanwhile is that task's, and goes to the shared pool. (A job another thread
    /// enqueues in that moment goes there too, which is only slower.)
    private let resumingLargeBody = Atomic<Bool>(false)
    /// The loop thread's `pthread_t`, once it runs. A job or request queued on it wakes nothing:
    /// the loop takes both before it next polls, and a wake-up there is a system call for nothing.
    private let loopThread = Atomic<pthread_t>(0)

    package init(maximumBodyBytes: Int = 64 << 20) {
        curl_global_init(Int(CURL_GLOBAL_DEFAULT))
        self.maximumBodyBytes = maximumBodyBytes
        multi = MultiHandle()
        let thread = Thread { [self] in run() }
        thread.name = "feedd-http"
        thread.start()
    }

    package var executor: (any TaskExecutor)? { self }

    package func enqueue(_ job: consuming ExecutorJob) {
        let job = UnownedJob(job)
        if resumingLargeBody.load(ordering: .relaxed) {
            let executor = asUnownedTaskExecutor()
            DispatchQueue.global().async { job.runSynchronously(on: executor) }
            return
        }
        jobs.withLock { $0.append(job) }
        wakeLoop()
    }

    package func send(_ httpRequest: HTTPRequest, timeout: Duration) async throws -> HTTPResponse {
        let cancellation = Signal()
        return try await withTaskCancellationHandler {
            try await withCheckedThrowingContinuation { continuation in
                start(Request(httpRequest, timeout: timeout, cancellation: cancellation, resume: nil, reply: .whole(continuation)))
            }
        } onCancel: {
            cancel(cancellation)
        }
    }

    /// The body streams from its first byte on: curl's write callback appends each piece it
    /// delivers to the ``HTTPBodyStream``, from which the reader, on a thread of its own, takes it.
    package func open(_ httpRequest: HTTPRequest, timeout: Duration) async throws -> HTTPStreamedResponse {
        let cancellation = Signal()
        return try await withTaskCancellationHandler {
            try await withCheckedThrowingContinuation { continuation in
                let resume = Signal()
                let reply = Reply.streamed(continuation, stopTransfer: { [self] in cancel(cancellation) }, resumeTransfer: { [self] in
                    resume.set()
                    wakeLoop()
                })
                start(Request(httpRequest, timeout: timeout, cancellation: cancellation, resume: resume, reply: reply))
            }
        } onCancel: {
            cancel(cancellation)
        }
    }

    /// Queues `request` for the loop thread.
    private func start(_ request: Request) {
        inbox.withLock { $0.append(request) }
        wakeLoop()
    }

    private func cancel(_ cancellation: Signal) {
        cancellation.set()
        wakeLoop()
    }

    /// Wakes the loop from its poll, unless this is the loop thread.
    private func wakeLoop() {
        if pthread_equal(pthread_self(), loopThread.load(ordering: .relaxed)) == 0 { multi.wakeUp() }
    }

    /// The loop thread: it alone touches the multi handle (but for wake-ups) and the transfers.
    private func run() -> Never {
        loopThread.store(pthread_self(), ordering: .relaxed)
        var transfers: [UnsafeMutableRawPointer: Transfer] = [:]
        var redirected: [Request] = []
        var handles = EasyHandles()
        while true {
            for job in jobs.withLock({ jobs in defer { jobs = [] }; return jobs }) { job.runSynchronously(on: asUnownedTaskExecutor()) }
            for request in redirected + inbox.withLock({ requests in defer { requests = [] }; return requests }) {
                guard !request.cancellation.isSet else {
                    request.reply.answer(.failure(CancellationError()))
                    continue
                }
                request.meter?.countRequest()
                let transfer = Transfer(request, easy: handles.take(), maximumBodyBytes: maximumBodyBytes)
                transfers[transfer.easy] = transfer
                multi.add(transfer.easy)
            }
            redirected = []
            for (easy, transfer) in transfers {
                if transfer.request.cancellation.isSet {
                    transfers[easy] = nil
                    multi.remove(easy)
                    handles.give(easy)
                    transfer.cancelled()
                } else if transfer.paused, transfer.request.resume?.take() == true {
                    // The reader has caught up: the body's bytes come again from where curl stopped.
                    transfer.paused = false
                    curl_easy_pause(easy, CURLPAUSE_CONT)
                }
            }
            multi.perform()
            while let (easy, result) = multi.nextFinished() {
                guard let transfer = transfers.removeValue(forKey: easy) else { continue }
                multi.remove(easy)
                let outcome = transfer.outcome(result)
                handles.give(easy)
                switch outcome {
                case .answer(let answer):
                    let large = ((try? answer.get())?.body.count ?? 0) > Self.inlineBodyBytes
                    resumingLargeBody.store(large, ordering: .relaxed)
                    transfer.request.reply.answer(answer)
                    resumingLargeBody.store(false, ordering: .relaxed)
                case .redirect(let next): redirected.append(next)
                case .bodyEnded: break
                }
            }
            // The next hop of a redirect, and a job enqueued meanwhile, start at once, not after a
            // socket wakes the loop.
            if redirected.isEmpty, jobs.withLock({ $0.isEmpty }) { multi.poll(milliseconds: 1_000) }
        }
    }
}

/// Why a request got no HTTP response: the connection failed, broke or timed out.
public struct HTTPTransportError: Error, CustomStringConvertible {
    /// What went wrong, with the URL.
    public let description: String
}

/// One hop of a GET: the request as asked for, or the hop a redirect leads to.
private struct Request: Sendable {
    let http: HTTPRequest
    var url: String { http.url.absoluteString }
    /// The URL the caller asked for: redirects are judged from its origin, and errors name it.
    let first: URL
    /// Redirects followed before this hop.
    let hops: Int
    /// When the whole GET, every hop included, runs out of time.
    let deadline: ContinuousClock.Instant
    let cancellation: Signal
    /// Set when the reader of a streamed body has caught up with a transfer paused for it.
    let resume: Signal?
    /// Where the fetch this GET is for counts its requests, every hop one.
    let meter: HTTPRequestMeter?
    let reply: Reply

    /// The hop to `target`, on the same origin as this one or not.
    func following(to target: URL, sameOrigin: Bool) -> Request {
        var next = http
        next.url = target
        if !sameOrigin {
            next.bearerToken = nil
            next.headers = URLOrigin.headersForOtherOrigins(next.headers)
        }
        return Request(
            http: next, first: first, hops: hops + 1, deadline: deadline, cancellation: cancellation, resume: resume, meter: meter, reply: reply)
    }
}

extension Request {
    /// The first hop of a GET of `http`, to be done within `timeout`.
    init(_ http: HTTPRequest, timeout: Duration, cancellation: Signal, resume: Signal?, reply: Reply) {
        self.init(
            http: http, first: http.url, hops: 0, deadline: .now + timeout, cancellation: cancellation, resume: resume,
            meter: HTTPRequestMeter.current, reply: reply)
    }
}

/// Who waits for a GET's answer: a caller of `send`, for the whole response, or a caller of
/// `open`, for the response as soon as its body starts.
private enum Reply: Sendable {
    case whole(CheckedContinuation<HTTPResponse, any Error>)
    /// With what stops the transfer when the reader abandons the body, and what lets it go on
    /// when the reader has caught up with a full body.
    case streamed(CheckedContinuation<HTTPStreamedResponse, any Error>, stopTransfer: @Sendable () -> Void, resumeTransfer: @Sendable () -> Void)

    /// Answers with `result`, a response that is complete.
    func answer(_ result: Result<HTTPResponse, any Error>) {
        switch self {
        case .whole(let continuation): continuation.resume(with: result)
        case .streamed(let continuation, _, _):
            continuation.resume(with: result.map(HTTPStreamedResponse.init(whole:)))
        }
    }
}

/// Set by another thread for the loop thread, which looks at it on every wake-up: a request's
/// task when it is cancelled, a body's reader when it has caught up with a paused transfer.
private final class Signal: Sendable {
    private let flag = Atomic<Bool>(false)

    var isSet: Bool { flag.load(ordering: .acquiring) }

    func set() { flag.store(true, ordering: .releasing) }

    /// Whether it was set, clearing it.
    func take() -> Bool { flag.exchange(false, ordering: .acquiringAndReleasing) }
}

/// libcurl's multi handle. `curl_multi_wakeup` may be called from any thread; every other call
/// is made on the loop thread only.
private final class MultiHandle: @unchecked Sendable {
    private let handle: UnsafeMutableRawPointer

    init() {
        handle = curl_multi_init()
    }

    func wakeUp() { curl_multi_wakeup(handle) }

    func add(_ easy: UnsafeMutableRawPointer) { curl_multi_add_handle(handle, easy) }

    func remove(_ easy: UnsafeMutableRawPointer) { curl_multi_remove_handle(handle, easy) }

    func perform() {
        var running: Int32 = 0
        curl_multi_perform(handle, &running)
    }

    /// A transfer that has ended, with how.
    func nextFinished() -> (UnsafeMutableRawPointer, CURLcode)? {
        var queued: Int32 = 0
        while let message = curl_multi_info_read(handle, &queued) {
            if message.pointee.msg == CURLMSG_DONE, let easy = message.pointee.easy_handle {
                return (easy, feedd_curl_message_result(message))
            }
        }
        return nil
    }

    func poll(milliseconds: Int32) {
        curl_multi_poll(handle, nil, 0, milliseconds, nil)
    }
}

/// Easy handles of finished transfers, reset for the next: `perf` of the daemon fetching
/// randomuser pages put a fresh handle's setup and teardown (its allocations, libcurl's defaults)
/// in every request. Connections are kept by the multi handle, not by these. Loop thread only.
private struct EasyHandles {
    /// Enough for the transfers a busy daemon has finishing at once; a handle over that is freed.
    private static let kept = 16
    private var idle: [UnsafeMutableRawPointer] = []

    mutating func take() -> UnsafeMutableRawPointer { idle.popLast() ?? curl_easy_init() }

    /// Takes back the handle of a transfer removed from the multi handle, with none of its options.
    mutating func give(_ easy: UnsafeMutableRawPointer) {
        guard idle.count < Self.kept else { return curl_easy_cleanup(easy) }
        curl_easy_reset(easy)
        idle.append(easy)
    }
}

/// One GET on the loop thread: what has come back so far on its easy handle, which the loop
/// lends it (``EasyHandles``).
private final class Transfer {
    let request: Request
    let easy: UnsafeMutableRawPointer
    private let maximumBodyBytes: Int
    private let requestHeaders: UnsafeMutablePointer<curl_slist>?
    private let errorText = UnsafeMutablePointer<CChar>.allocate(capacity: Int(CURL_ERROR_SIZE))
    private var body: [UInt8] = []
    /// Where the body goes instead, once a streamed reply has been answered with it.
    private var stream: HTTPBodyStream?
    private var received = 0
    private var bodyTooLarge = false
    /// Whether the write callback has paused the transfer, its body full (see ``HTTPBodyStream/offer(_:)``).
    var paused = false
    private var headers: [String: String] = [:]

    init(_ request: Request, easy: UnsafeMutableRawPointer, maximumBodyBytes: Int) {
        self.request = request
        self.maximumBodyBytes = maximumBodyBytes
        self.easy = easy
        errorText[0] = 0
        requestHeaders = request.http.headers.sorted { $0.key < $1.key }.reduce(nil) { list, field in
            curl_slist_append(list, "\(field.key): \(field.value)")
        }
        let context = Unmanaged.passUnretained(self).toOpaque()
        feedd_curl_set_pointer(easy, CURLOPT_URL, request.url)
        feedd_curl_set_pointer(easy, CURLOPT_USERAGENT, "feedd/\(feeddVersion)")
        feedd_curl_set_pointer(easy, CURLOPT_HTTPHEADER, requestHeaders)
        if let token = request.http.bearerToken {
            feedd_curl_set_long(easy, CURLOPT_HTTPAUTH, feedd_curlauth_bearer)
            feedd_curl_set_pointer(easy, CURLOPT_XOAUTH2_BEARER, token)
        }
        feedd_curl_set_pointer(easy, CURLOPT_ACCEPT_ENCODING, "")
        feedd_curl_set_pointer(easy, CURLOPT_PROTOCOLS_STR, "http,https")
        feedd_curl_set_long(easy, CURLOPT_FOLLOWLOCATION, 0)
        feedd_curl_set_long(easy, CURLOPT_NOSIGNAL, 1)
        feedd_curl_set_long(easy, CURLOPT_TIMEOUT_MS, max(1, Int((request.deadline - .now).wholeMilliseconds)))
        feedd_curl_set_pointer(easy, CURLOPT_ERRORBUFFER, errorText)
        feedd_curl_set_pointer(easy, CURLOPT_WRITEDATA, context)
        feedd_curl_set_callback(easy, CURLOPT_WRITEFUNCTION) { data, size, count, context in
            let transfer = Unmanaged<Transfer>.fromOpaque(context!).takeUnretainedValue()
            let bytes = UnsafeRawPointer(data!).assumingMemoryBound(to: UInt8.self)
            return transfer.receiveBody(UnsafeBufferPointer(start: bytes, count: size * count))
        }
        feedd_curl_set_pointer(easy, CURLOPT_HEADERDATA, context)
        feedd_curl_set_callback(easy, CURLOPT_HEADERFUNCTION) { data, size, count, context in
            let transfer = Unmanaged<Transfer>.fromOpaque(context!).takeUnretainedValue()
            return transfer.receiveHeader(UnsafeRawBufferPointer(start: data, count: size * count)) ? size * count : 0
        }
    }

    deinit {
        curl_slist_free_all(requestHeaders)
        errorText.deallocate()
    }

    /// What the write callback returns: how many bytes were taken (fewer than `bytes.count` stops
    /// the transfer), or curl's "pause", to be given them again once the reader has caught up.
    private func receiveBody(_ bytes: UnsafeBufferPointer<UInt8>) -> Int {
        guard received + bytes.count <= maximumBodyBytes else {
            bodyTooLarge = true
            return 0
        }
        if let stream {
            switch stream.offer(bytes) {
            case .taken:
                received += bytes.count
                return bytes.count
            case .full:
                paused = true
                return Int(CURL_WRITEFUNC_PAUSE)
            case .abandoned:
                return 0
            }
        }
        received += bytes.count
        // A 2xx body is the one a streamed reply waits for (any other is an error, or a redirect
        // whose next hop brings the body): the reply is answered at its first byte.
        if received == bytes.count, case .streamed(let continuation, let stopTransfer, let resumeTransfer) = request.reply,
            case let status = Int(feedd_curl_response_code(easy)), 200..<300 ~= status
        {
            let stream = HTTPBodyStream(expectedBytes: contentLength, stopTransfer: stopTransfer, resumeTransfer: resumeTransfer)
            self.stream = stream
            continuation.resume(returning: HTTPStreamedResponse(status: status, headers: headers, body: stream))
            return stream.append(bytes) ? bytes.count : 0
        }
        // Room for the whole body at once: growing by doubling would copy it and leave up to
        // twice its size allocated (a compressed body's length is only a start). The padding a
        // JSONDocument needs after its text is room too, so that a JSON body is parsed where it lies.
        if body.isEmpty, let length = contentLength, length > bytes.count {
            body.reserveCapacity(length + JSONDocument.padding)
        }
        body.append(contentsOf: bytes)
        return bytes.count
    }

    /// The `Content-Length`, if it is within the body limit.
    private var contentLength: Int? {
        headers["content-length"].flatMap { Int($0) }.flatMap { $0 <= maximumBodyBytes ? $0 : nil }
    }

    /// One header line; a status line starts a new response (after a 100 Continue).
    private func receiveHeader(_ bytes: UnsafeRawBufferPointer) -> Bool {
        let line = String(decoding: bytes, as: UTF8.self)
        if line.hasPrefix("HTTP/") {
            headers = [:]
            return true
        }
        guard let (name, value) = HeaderField.split(bytes) else { return true }
        headers[name] = headers[name].map { "\($0), \(value)" } ?? value
        return true
    }

    /// How a finished transfer ends: with an answer for the caller, or with the next hop of a redirect.
    enum Outcome {
        case answer(Result<HTTPResponse, any Error>)
        case redirect(Request)
        /// A streamed body ended, finished or failed: its reader has what it needs.
        case bodyEnded
    }

    /// The statuses whose `Location` is followed.
    private static let followedStatuses: Set = [301, 302, 303, 307, 308]

    func outcome(_ result: CURLcode) -> Outcome {
        if let failure = failure(result) {
            guard let stream else { return .answer(.failure(failure)) }
            stream.fail(failure)
            return .bodyEnded
        }
        if let stream {
            stream.finish()
            return .bodyEnded
        }
        let status = Int(feedd_curl_response_code(easy))
        if Self.followedStatuses.contains(status), request.http.redirects != .never, let location = headers["location"] {
            return redirect(to: location)
        }
        return .answer(.success(HTTPResponse(status: status, headers: headers, body: body)))
    }

    /// Why the transfer failed, if it did.
    private func failure(_ result: CURLcode) -> (any Error)? {
        if bodyTooLarge {
            let size = maximumBodyBytes % (1 << 20) == 0 ? "\(maximumBodyBytes >> 20) MiB" : "\(maximumBodyBytes) bytes"
            return SourceError.rejected("GET \(request.first.absoluteString): the response body is larger than \(size)")
        }
        guard result == CURLE_OK else {
            let detail = errorText[0] != 0 ? String(cString: errorText) : String(cString: curl_easy_strerror(result))
            return HTTPTransportError(description: detail)
        }
        return nil
    }

    /// Ends the GET as cancelled: its caller is told, or its body's reader.
    func cancelled() {
        guard let stream else { return request.reply.answer(.failure(CancellationError())) }
        stream.fail(CancellationError())
    }

    /// The next hop to `location`, resolved against this hop's URL by libcurl's parser, if the
    /// request's policy lets it be made.
    private func redirect(to location: String) -> Outcome {
        let first = request.first.absoluteString
        guard let target = CurlURL(request.url)?.resolving(location), let text = target.text, let url = URL(string: text),
            let origin = target.origin, origin.isHTTP
        else {
            return .answer(.failure(SourceError.rejected("GET \(first): redirected to \(location), not an http(s) URL; not followed")))
        }
        guard request.hops < RedirectPolicy.maximumHops else {
            return .answer(.failure(SourceError.rejected("GET \(first): more than \(RedirectPolicy.maximumHops) redirects")))
        }
        guard let start = URLOrigin(request.first), request.http.redirects.allows(from: start, to: origin) else {
            let reason = "GET \(first): redirected to \(text), another host; not followed (follow_redirects = \"\(request.http.redirects.rawValue)\")"
            return .answer(.failure(SourceError.rejected(reason)))
        }
        return .redirect(request.following(to: url, sameOrigin: origin == URLOrigin(request.http.url)))
    }
}
