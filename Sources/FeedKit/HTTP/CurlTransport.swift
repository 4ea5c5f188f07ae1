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
/// Connections to an upstream are kept and reused, bodies may come compressed, and redirects are
/// followed over http and https only, at most ``RedirectPolicy/maximumHops`` of them, and only
/// where the request's ``RedirectPolicy`` allows: the header callback sees each redirect's
/// `Location` before libcurl follows it, and ends the transfer there if the target is refused.
/// Make one per process: its thread lives as long as it does.
package final class CurlTransport: HTTPTransport {
    /// A larger body is rejected (retried at the slowest rate, like a body that does not decode)
    /// instead of growing the daemon without bound.
    package let maximumBodyBytes: Int

    private let multi: MultiHandle
    private let inbox = Locked<[Request]>([])

    package init(maximumBodyBytes: Int = 64 << 20) {
        curl_global_init(Int(CURL_GLOBAL_DEFAULT))
        self.maximumBodyBytes = maximumBodyBytes
        multi = MultiHandle()
        let thread = Thread { [self] in run() }
        thread.name = "feedd-http"
        thread.start()
    }

    package func send(_ httpRequest: HTTPRequest, timeout: Duration) async throws -> HTTPResponse {
        let cancellation = Cancellation()
        return try await withTaskCancellationHandler {
            try await withCheckedThrowingContinuation { continuation in
                let request = Request(http: httpRequest, timeout: timeout, cancellation: cancellation, continuation: continuation)
                inbox.withLock { $0.append(request) }
                multi.wakeUp()
            }
        } onCancel: {
            cancellation.set()
            multi.wakeUp()
        }
    }

    /// The loop thread: it alone touches the multi handle (but for wake-ups) and the transfers.
    private func run() -> Never {
        var transfers: [UnsafeMutableRawPointer: Transfer] = [:]
        while true {
            for request in inbox.withLock({ requests in defer { requests = [] }; return requests }) {
                guard !request.cancellation.isSet else {
                    request.continuation.resume(throwing: CancellationError())
                    continue
                }
                let transfer = Transfer(request, maximumBodyBytes: maximumBodyBytes)
                transfers[transfer.easy] = transfer
                multi.add(transfer.easy)
            }
            for (easy, transfer) in transfers where transfer.request.cancellation.isSet {
                transfers[easy] = nil
                multi.remove(easy)
                transfer.request.continuation.resume(throwing: CancellationError())
            }
            multi.perform()
            while let (easy, result) = multi.nextFinished() {
                guard let transfer = transfers.removeValue(forKey: easy) else { continue }
                multi.remove(easy)
                transfer.finish(result)
            }
            multi.poll(milliseconds: 1_000)
        }
    }
}

/// Why a request got no HTTP response: the connection failed, broke or timed out.
public struct HTTPTransportError: Error, CustomStringConvertible {
    public let description: String
}

private struct Request: Sendable {
    let http: HTTPRequest
    var url: String { http.url.absoluteString }
    let timeout: Duration
    let cancellation: Cancellation
    let continuation: CheckedContinuation<HTTPResponse, any Error>
}

/// Set by a request's task when it is cancelled; the loop thread looks at it on every wake-up.
private final class Cancellation: Sendable {
    private let flag = Atomic<Bool>(false)

    var isSet: Bool { flag.load(ordering: .acquiring) }

    func set() { flag.store(true, ordering: .releasing) }
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

/// One GET on the loop thread: its easy handle and what has come back so far.
private final class Transfer {
    let request: Request
    let easy: UnsafeMutableRawPointer
    private let maximumBodyBytes: Int
    private let requestHeaders: UnsafeMutablePointer<curl_slist>?
    private let errorText = UnsafeMutablePointer<CChar>.allocate(capacity: Int(CURL_ERROR_SIZE))
    private var body: [UInt8] = []
    private var bodyTooLarge = false
    private var headers: [String: String] = [:]
    /// The status of the response whose header lines are arriving.
    private var status = 0
    /// A redirect target the request's policy refused; the transfer was ended there.
    private var refusedRedirect: String?

    init(_ request: Request, maximumBodyBytes: Int) {
        self.request = request
        self.maximumBodyBytes = maximumBodyBytes
        easy = curl_easy_init()
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
        feedd_curl_set_pointer(easy, CURLOPT_REDIR_PROTOCOLS_STR, "http,https")
        feedd_curl_set_long(easy, CURLOPT_FOLLOWLOCATION, request.http.redirects == .never ? 0 : 1)
        feedd_curl_set_long(easy, CURLOPT_MAXREDIRS, RedirectPolicy.maximumHops)
        feedd_curl_set_long(easy, CURLOPT_NOSIGNAL, 1)
        feedd_curl_set_long(easy, CURLOPT_TIMEOUT_MS, max(1, Int(request.timeout.wholeMilliseconds)))
        feedd_curl_set_pointer(easy, CURLOPT_ERRORBUFFER, errorText)
        feedd_curl_set_pointer(easy, CURLOPT_WRITEDATA, context)
        feedd_curl_set_callback(easy, CURLOPT_WRITEFUNCTION) { data, size, count, context in
            let transfer = Unmanaged<Transfer>.fromOpaque(context!).takeUnretainedValue()
            let bytes = UnsafeRawPointer(data!).assumingMemoryBound(to: UInt8.self)
            return transfer.receiveBody(UnsafeBufferPointer(start: bytes, count: size * count)) ? size * count : 0
        }
        feedd_curl_set_pointer(easy, CURLOPT_HEADERDATA, context)
        feedd_curl_set_callback(easy, CURLOPT_HEADERFUNCTION) { data, size, count, context in
            let transfer = Unmanaged<Transfer>.fromOpaque(context!).takeUnretainedValue()
            return transfer.receiveHeader(UnsafeRawBufferPointer(start: data, count: size * count)) ? size * count : 0
        }
    }

    deinit {
        curl_easy_cleanup(easy)
        curl_slist_free_all(requestHeaders)
        errorText.deallocate()
    }

    private func receiveBody(_ bytes: UnsafeBufferPointer<UInt8>) -> Bool {
        guard body.count + bytes.count <= maximumBodyBytes else {
            bodyTooLarge = true
            return false
        }
        body.append(contentsOf: bytes)
        return true
    }

    /// One header line; a status line starts a new response (after a redirect or a 100 Continue).
    /// Returns false to end the transfer at a redirect the policy refuses.
    private func receiveHeader(_ bytes: UnsafeRawBufferPointer) -> Bool {
        let line = String(decoding: bytes, as: UTF8.self)
        if line.hasPrefix("HTTP/") {
            headers = [:]
            status = line.split(separator: " ").dropFirst().first.flatMap { Int($0) } ?? 0
            return true
        }
        guard let (name, value) = HeaderField.split(bytes) else { return true }
        headers[name] = headers[name].map { "\($0), \(value)" } ?? value
        if name == "location", Self.followedStatuses.contains(status), request.http.redirects != .never {
            return allowsRedirect(to: value)
        }
        return true
    }

    /// The statuses libcurl follows a `Location` for.
    private static let followedStatuses: Set = [301, 302, 303, 307, 308]

    /// Whether the policy lets libcurl follow `location`, resolved against the URL now answering.
    private func allowsRedirect(to location: String) -> Bool {
        guard let current = feedd_curl_effective_url(easy).map({ String(cString: $0) }),
            let target = CurlURL(current)?.resolving(location)
        else {
            refusedRedirect = location
            return false
        }
        guard let origin = CurlURL(request.url)?.parts, let parts = target.parts, request.http.redirects.allows(from: origin, to: parts) else {
            refusedRedirect = target.text ?? location
            return false
        }
        return true
    }

    func finish(_ result: CURLcode) {
        if let refusedRedirect {
            let reason = "GET \(request.url): redirected to \(refusedRedirect), another host; not followed (follow_redirects = \"\(request.http.redirects.rawValue)\")"
            request.continuation.resume(throwing: SourceError.rejected(reason))
            return
        }
        if result == CURLE_TOO_MANY_REDIRECTS {
            request.continuation.resume(throwing: SourceError.rejected("GET \(request.url): more than \(RedirectPolicy.maximumHops) redirects"))
            return
        }
        if bodyTooLarge {
            let size = maximumBodyBytes % (1 << 20) == 0 ? "\(maximumBodyBytes >> 20) MiB" : "\(maximumBodyBytes) bytes"
            request.continuation.resume(throwing: SourceError.rejected("GET \(request.url): the response body is larger than \(size)"))
            return
        }
        guard result == CURLE_OK else {
            let detail = errorText[0] != 0 ? String(cString: errorText) : String(cString: curl_easy_strerror(result))
            request.continuation.resume(throwing: HTTPTransportError(description: detail))
            return
        }
        let status = Int(feedd_curl_response_code(easy))
        request.continuation.resume(returning: HTTPResponse(status: status, headers: headers, body: body))
    }
}

/// A URL parsed by libcurl's URL API, the same parser that follows the redirects.
private final class CurlURL {
    private let handle: OpaquePointer

    init?(_ text: String) {
        handle = curl_url()
        guard curl_url_set(handle, CURLUPART_URL, text, 0) == CURLUE_OK else { return nil }
    }

    deinit { curl_url_cleanup(handle) }

    /// `reference` (absolute, or relative to this URL) as an absolute URL.
    func resolving(_ reference: String) -> CurlURL? {
        guard let base = text, let resolved = CurlURL(base), curl_url_set(resolved.handle, CURLUPART_URL, reference, 0) == CURLUE_OK else {
            return nil
        }
        return resolved
    }

    var text: String? { part(CURLUPART_URL) }

    var parts: RedirectPolicy.URLParts? {
        guard let scheme = part(CURLUPART_SCHEME), let host = part(CURLUPART_HOST),
            let port = part(CURLUPART_PORT, flags: UInt32(CURLU_DEFAULT_PORT)).flatMap({ Int($0) })
        else { return nil }
        return RedirectPolicy.URLParts(scheme: scheme, host: host, port: port)
    }

    private func part(_ which: CURLUPart, flags: UInt32 = 0) -> String? {
        var value: UnsafeMutablePointer<CChar>?
        guard curl_url_get(handle, which, &value, flags) == CURLUE_OK, let value else { return nil }
        defer { curl_free(value) }
        return String(cString: value)
    }
}
