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
        try await send(url, extraHeaders: [:], acceptNotModified: false)!
    }

    /// GETs `url`, asking the server to answer `304 Not Modified` if it has not changed since the
    /// response `validators` came from; returns nil for that answer, and is ``get(_:)`` when
    /// `validators` is nil.
    public func get(_ url: URL, ifChangedSince validators: HTTPValidators?) async throws(SourceError) -> HTTPResponse? {
        try await send(url, extraHeaders: validators?.requestHeaders ?? [:], acceptNotModified: validators != nil)
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

    private func send(_ url: URL, extraHeaders: [String: String], acceptNotModified: Bool) async throws(SourceError) -> HTTPResponse? {
        let request = HTTPRequest(
            url: url, headers: headers.merging(extraHeaders) { _, conditional in conditional }, bearerToken: bearerToken,
            redirects: redirects)
        let response: HTTPResponse
        do {
            response = try await transport.send(request, timeout: timeout)
        } catch let error as SourceError {
            throw error
        } catch is CancellationError {
            throw SourceError.transient("GET \(url.absoluteString): cancelled")
        } catch {
            throw SourceError.transient("GET \(url.absoluteString): \(error)")
        }
        switch response.status {
        case 200..<300:
            return response
        case 304 where acceptNotModified:
            return nil
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
