import Foundation

/// One HTTP GET as an adapter asks for it.
public struct HTTPRequest: Sendable, Hashable {
    /// What is asked for.
    public var url: URL
    /// Header fields to send, by name (`Accept`, `If-None-Match`, a feed's `headers` table).
    public var headers: [String: String]
    /// Sent as `Authorization: Bearer …` through libcurl's own bearer authentication, which never
    /// sends it on to another host after a redirect.
    public var bearerToken: String?
    /// Which redirects are followed.
    public var redirects: RedirectPolicy

    /// A GET of `url` with `headers`, a bearer token sent only to `url`'s origin, and `redirects` followed as it says.
    public init(url: URL, headers: [String: String] = [:], bearerToken: String? = nil, redirects: RedirectPolicy = .sameHost) {
        self.url = url
        self.headers = headers
        self.bearerToken = bearerToken
        self.redirects = redirects
    }
}

/// An HTTP response as adapters see it.
public struct HTTPResponse: Sendable {
    /// The HTTP status code.
    public let status: Int
    /// Header fields with lowercased names; a field sent several times (`Link`) is joined with
    /// ", ", as HTTP allows.
    public let headers: [String: String]
    /// The body, decoded from its transfer and content encodings.
    public private(set) var body: [UInt8]

    /// A response with `status`, `headers` and `body`.
    public init(status: Int, headers: [String: String], body: [UInt8]) {
        self.status = status
        self.headers = headers
        self.body = body
    }

    /// The body, leaving this response without it: the array is then the caller's alone, if
    /// it was this response's alone.
    mutating func takeBody() -> [UInt8] {
        defer { body = [] }
        return body
    }

    /// What to send when asking later whether the resource changed; nil when the server gave
    /// neither an `ETag` nor a `Last-Modified`.
    public var validators: HTTPValidators? {
        HTTPValidators(entityTag: headers["etag"], lastModified: headers["last-modified"])
    }
}

/// A response's `ETag` and `Last-Modified`: sent back as `If-None-Match` and `If-Modified-Since`
/// so that a server whose resource has not changed answers `304 Not Modified` with no body.
public struct HTTPValidators: Sendable, Hashable {
    /// The `ETag` the resource came with, sent back as `If-None-Match`.
    public let entityTag: String?
    /// The `Last-Modified` it came with, sent back as `If-Modified-Since`.
    public let lastModified: String?

    /// The validators given; nil when there are none.
    public init?(entityTag: String?, lastModified: String?) {
        guard entityTag != nil || lastModified != nil else { return nil }
        self.entityTag = entityTag
        self.lastModified = lastModified
    }

    /// The conditional request's header fields.
    public var requestHeaders: [String: String] {
        var headers: [String: String] = [:]
        headers["If-None-Match"] = entityTag
        headers["If-Modified-Since"] = lastModified
        return headers
    }
}

/// A response whose body is read as it arrives (``HTTPTransport/open(_:timeout:)``).
public struct HTTPStreamedResponse: Sendable {
    /// The HTTP status code.
    public let status: Int
    /// Header fields, as ``HTTPResponse/headers`` has them.
    public let headers: [String: String]
    /// The body, decoded from its transfer and content encodings, as it comes.
    public let body: HTTPBodyStream

    /// A response with `status` and `headers` whose body is `body`.
    public init(status: Int, headers: [String: String], body: HTTPBodyStream) {
        self.status = status
        self.headers = headers
        self.body = body
    }

    /// `response`, whose body has arrived whole, as a stream to read.
    public init(whole response: HTTPResponse) {
        self.init(status: response.status, headers: response.headers, body: HTTPBodyStream(whole: response.body))
    }
}

/// Performs HTTP GETs: the seam between network adapters and the network.
public protocol HTTPTransport: Sendable {
    /// GETs `request.url`; throws for transport failures (no connection, reset, timeout) and for a
    /// redirect its policy refuses, not for HTTP statuses.
    func send(_ request: HTTPRequest, timeout: Duration) async throws -> HTTPResponse

    /// GETs `request.url` as ``send(_:timeout:)`` does, but answers once a 2xx response's body
    /// starts, with that body to be read as it arrives: a transfer failure after that (a broken
    /// connection, the timeout, a body over the transport's limit) ends the body with the error.
    /// Any other response is answered once it is complete, its body whole.
    ///
    /// The default answers with ``send(_:timeout:)``'s response, its body whole.
    func open(_ request: HTTPRequest, timeout: Duration) async throws -> HTTPStreamedResponse

    /// Where a task that sends a request and reads a page-sized answer runs with the fewest
    /// hand-offs between threads: the transport's own thread, for one that has it. Nil (the
    /// default): anywhere.
    var executor: (any TaskExecutor)? { get }
}

extension HTTPTransport {
    /// None of its own.
    public var executor: (any TaskExecutor)? { nil }

    /// The response of ``send(_:timeout:)``, whose body has arrived whole.
    public func open(_ request: HTTPRequest, timeout: Duration) async throws -> HTTPStreamedResponse {
        HTTPStreamedResponse(whole: try await send(request, timeout: timeout))
    }
}
