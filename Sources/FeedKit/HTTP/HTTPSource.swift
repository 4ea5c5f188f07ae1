import Foundation

/// The HTTP layer network adapters share: one GET with the feed's timeout, its outcome turned into
/// a JSON body or a ``SourceError`` that says how to retry.
///
/// - Network errors, timeouts, HTTP 5xx and 429 are transient (retried with backoff); 429 and 503
///   carry their `Retry-After`.
/// - Other 4xx statuses, 3xx statuses (a redirect not followed) and bodies that are not JSON are
///   rejections (retried at the slowest rate).
/// - `304 Not Modified` answers a conditional GET (``get(_:ifChangedSince:)``) with nil.
public struct HTTPSource: Sendable {
    /// Where requests go (libcurl in the daemon, a loopback server or a fake in tests).
    public let transport: any HTTPTransport
    /// How long one request may take.
    public let timeout: Duration
    /// Sent with every request; `Accept: application/json` unless an adapter says otherwise.
    public var headers: [String: String] = ["Accept": "application/json"]
    /// Sent as a bearer token with every request (see ``HTTPRequest/bearerToken``); never logged.
    public var bearerToken: String?
    /// Which redirects are followed: `follow_redirects`, same host only unless configured.
    public var redirects: RedirectPolicy = .sameHost

    /// Requests through `transport`, each bounded by `timeout`.
    public init(transport: any HTTPTransport, timeout: Duration) {
        self.transport = transport
        self.timeout = timeout
    }

    /// The transport's ``HTTPTransport/executor``: an adapter's ``SourceAdapter/fetchExecutor``
    /// when its fetch is a request and the parse of its answer.
    public var executor: (any TaskExecutor)? { transport.executor }

    /// GETs `url` and returns its response, throwing ``SourceError`` for any failure or non-2xx status.
    public func get(_ url: URL) async throws(SourceError) -> HTTPResponse {
        try await get(url, ifChangedSince: nil)!
    }

    /// GETs `url`, asking the server to answer `304 Not Modified` if it has not changed since the
    /// response `validators` came from; returns nil for that answer, and is ``get(_:)`` when
    /// `validators` is nil.
    public func get(_ url: URL, ifChangedSince validators: HTTPValidators?) async throws(SourceError) -> HTTPResponse? {
        let response: HTTPResponse
        do {
            response = try await transport.send(request(url, ifChangedSince: validators), timeout: timeout)
        } catch {
            throw Self.failure(error, from: url)
        }
        return try accepts(response, from: url, notModified: validators != nil) ? response : nil
    }

    /// GETs `url` and reads its body as a JSON document; a body that is not JSON is a rejection.
    public func getJSON(_ url: URL) async throws(SourceError) -> JSONDocument {
        try Self.json(in: try await get(url), from: url)
    }

    /// A response's body as a JSON document; a body that is not JSON (or nests too deeply, or
    /// repeats a member name) is a rejection naming `url`. The body is taken from `response`,
    /// so that a response no one else holds gives its bytes to the document uncopied.
    public static func json(in response: consuming HTTPResponse, from url: URL) throws(SourceError) -> JSONDocument {
        do {
            return try JSONDocument(parsing: response.takeBody())
        } catch {
            throw SourceError.rejected("the body from \(url.absoluteString) is not valid JSON (\(error.description))")
        }
    }

    /// GETs `url` as ``get(_:ifChangedSince:)`` does, and gives the body of a 2xx response to
    /// `read` while it downloads, so that reading the body and receiving it overlap.
    ///
    /// `read` runs on a thread of its own, since its reads of the body wait for the network; it
    /// gets the response without its body (the status and header fields) and the body. A transfer
    /// that fails under a read of `read`'s (a broken connection, the timeout, a body over the
    /// transport's limit) is thrown as ``get(_:)`` would throw it, whatever `read` threw then;
    /// what `read` leaves unread is abandoned. Returns the response without its body and what
    /// `read` returned; nil for `304 Not Modified`.
    public func get<Value: Sendable>(
        _ url: URL, ifChangedSince validators: HTTPValidators?,
        readingBody read: @escaping @Sendable (_ response: HTTPResponse, _ body: HTTPBodyStream) throws(SourceError) -> Value
    ) async throws(SourceError) -> (response: HTTPResponse, value: Value)? {
        let streamed: HTTPStreamedResponse
        do {
            streamed = try await transport.open(request(url, ifChangedSince: validators), timeout: timeout)
        } catch {
            throw Self.failure(error, from: url)
        }
        let response = HTTPResponse(status: streamed.status, headers: streamed.headers, body: [])
        guard try accepts(response, from: url, notModified: validators != nil) else { return nil }
        let body = streamed.body
        let result = await withTaskCancellationHandler {
            await withCheckedContinuation { continuation in
                let thread = Thread {
                    let result = Result { () throws(SourceError) in try read(response, body) }
                    body.abandon()
                    continuation.resume(returning: result)
                }
                thread.name = "feedd-body"
                thread.start()
            }
        } onCancel: {
            body.abandon()
        }
        if let failure = body.failureRead { throw Self.failure(failure, from: url) }
        return (response, try result.get())
    }

    private func request(_ url: URL, ifChangedSince validators: HTTPValidators?) -> HTTPRequest {
        let conditional = validators?.requestHeaders ?? [:]
        return HTTPRequest(url: url, headers: headers.merging(conditional) { _, conditional in conditional }, bearerToken: bearerToken, redirects: redirects)
    }

    /// A transport's error as the source error it is.
    private static func failure(_ error: any Error, from url: URL) -> SourceError {
        switch error {
        case let error as SourceError: error
        case is CancellationError: SourceError.transient("GET \(url.absoluteString): cancelled")
        default: SourceError.transient("GET \(url.absoluteString): \(error)")
        }
    }

    /// Whether `response` is one to read (2xx); false for `304` to a conditional GET, and throws
    /// for any other status.
    private func accepts(_ response: HTTPResponse, from url: URL, notModified acceptNotModified: Bool) throws(SourceError) -> Bool {
        switch response.status {
        case 200..<300:
            return true
        case 304 where acceptNotModified:
            return false
        case 300..<400 where redirects == .never:
            let location = response.headers["location"].map { " to \($0)" } ?? ""
            throw SourceError.rejected("HTTP \(response.status) from \(url.absoluteString)\(location), not followed (follow_redirects = \"never\")")
        case 429, 503:
            let retryAfter = response.headers["retry-after"].flatMap(Self.retryAfter)
            throw SourceError.transient("HTTP \(response.status) from \(url.absoluteString)", retryAfter: retryAfter)
        case 500..<600:
            throw SourceError.transient("HTTP \(response.status) from \(url.absoluteString)")
        default:
            throw SourceError.rejected("HTTP \(response.status) from \(url.absoluteString)")
        }
    }

    /// `Retry-After` as seconds or as an HTTP date.
    static func retryAfter(_ value: String) -> Duration? {
        let trimmed = value.trimmingCharacters(in: .whitespaces)
        if let seconds = Int(trimmed), seconds >= 0 { return .seconds(seconds) }
        let formatter = DateFormatter()
        formatter.locale = Locale(identifier: "en_US_POSIX")
        formatter.timeZone = TimeZone(identifier: "GMT")
        formatter.dateFormat = "EEE, dd MMM yyyy HH:mm:ss zzz"
        guard let date = formatter.date(from: trimmed) else { return nil }
        return .milliseconds(max(0, Int64(date.timeIntervalSinceNow * 1000)))
    }
}
