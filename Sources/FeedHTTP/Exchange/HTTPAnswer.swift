import FeedKit
import FeedServer

/// An answer to one request, before it is handed to libmicrohttpd: a status, header fields and a
/// body, or a stream of Server-Sent Events.
struct HTTPAnswer {
    enum Body {
        case bytes([UInt8])
        /// The body as pieces sent in turn without copying, such as the pages of the feed's
        /// cache: however long the client takes, it holds only references to them.
        case pieces([PageBytes])
        /// Written as the stream produces it, for as long as it lasts.
        case events(EventStream)
    }

    var status: Int
    var headers: [(name: String, value: String)] = []
    var body: Body

    init(status: Int, contentType: String, body: [UInt8]) {
        self.status = status
        self.body = .bytes(body)
        header("Content-Type", contentType)
    }

    /// A JSON body; `Cache-Control: no-store` unless the caller sets its own.
    static func json(_ body: [UInt8], status: Int = 200) -> HTTPAnswer {
        var answer = HTTPAnswer(status: status, contentType: "application/json", body: body)
        answer.header("Cache-Control", "no-store")
        return answer
    }

    /// A JSON object written by `write`, which writes its fields after `type` (if given): the
    /// object of the socket protocol's line of that type.
    static func jsonObject(status: Int = 200, type: StaticString? = nil, _ write: (inout Message) -> Void) -> HTTPAnswer {
        var object = type.map { Message(type: $0) } ?? Message()
        write(&object)
        return json(object.object(), status: status)
    }

    static func error(_ error: HTTPError) -> HTTPAnswer {
        var answer = jsonObject(status: error.status, type: "error") { object in
            object.field("code", error.code)
            object.field("message", error.message)
            if let feed = error.feed { object.field("feed", feed) }
            if let retryIn = error.retryIn { object.field("retry_in_ms", Int(retryIn.wholeMilliseconds)) }
        }
        for (name, value) in error.headers { answer.header(name, value) }
        return answer
    }

    /// 304: the client's copy, named by `etag`, is current.
    static func notModified(etag: String) -> HTTPAnswer {
        var answer = HTTPAnswer(status: 304, contentType: "application/json", body: [])
        answer.headers.removeAll()
        answer.header("ETag", etag)
        answer.header("Cache-Control", "no-cache")
        return answer
    }

    mutating func header(_ name: String, _ value: String) {
        headers.append((name, value))
    }

    /// Replaces every field named `name` (case-insensitively) by one with `value`.
    mutating func setHeader(_ name: String, _ value: String) {
        headers.removeAll { $0.name.lowercased() == name.lowercased() }
        header(name, value)
    }
}

/// What went wrong with a request, with the status and the code of SPEC §11.
struct HTTPError: Error {
    let status: Int
    let code: String
    let message: String
    var feed: String?
    var retryIn: Duration?
    var headers: [(name: String, value: String)] = []

    static func badRequest(_ message: String, feed: String? = nil) -> HTTPError {
        HTTPError(status: 400, code: "bad_request", message: message, feed: feed)
    }

    static func unauthorized(feed: String?, presented: Bool) -> HTTPError {
        let what = feed.map { "feed \"\($0)\"" } ?? "this resource"
        let message = presented ? "the bearer token is not the one \(what) needs" : "\(what) needs \"Authorization: Bearer <token>\""
        // RFC 6750 §3: say which scheme, and whether the token presented was wrong.
        let challenge = presented ? #"Bearer realm="feedd", error="invalid_token""# : #"Bearer realm="feedd""#
        return HTTPError(status: 401, code: "unauthorized", message: message, feed: feed, headers: [("WWW-Authenticate", challenge)])
    }

    static func unknownFeed(_ name: String, known: [String]) -> HTTPError {
        HTTPError(status: 404, code: "unknown_feed", message: "no feed named \"\(name)\" (feeds: \(known.joined(separator: ", ")))", feed: name)
    }

    static func notFound(_ path: String) -> HTTPError {
        HTTPError(status: 404, code: "not_found", message: "nothing at \(path); the API is under /v1/feeds")
    }

    static func methodNotAllowed(_ method: String, path: String, allowed: [String]) -> HTTPError {
        HTTPError(
            status: 405, code: "method_not_allowed", message: "\(method) is not allowed on \(path) (allowed: \(allowed.joined(separator: ", ")))",
            headers: [("Allow", allowed.joined(separator: ", "))])
    }

    static func tooLarge(_ what: String, limit: Int) -> HTTPError {
        HTTPError(status: 413, code: "line_too_long", message: "\(what) is longer than max_line_bytes (\(limit) bytes)", headers: [("Connection", "close")])
    }

    static func tooManyClients(_ limit: Int) -> HTTPError {
        HTTPError(
            status: 429, code: "too_many_clients", message: "the server already has \(limit) HTTP clients",
            headers: [("Retry-After", "1"), ("Connection", "close")])
    }

    static func storeFailed(_ message: String, feed: String) -> HTTPError {
        HTTPError(status: 503, code: "store_failed", message: message, feed: feed, headers: [("Retry-After", "1")])
    }

    /// Ends a request whose client left; never sent.
    static let abandoned = HTTPError(status: 499, code: "abandoned", message: "the client left")

    static let shuttingDown = HTTPError(status: 503, code: "shutting_down", message: "feedd is shutting down", headers: [("Connection", "close")])

    /// The feed's source is failing and is being retried: the page asked for is not there yet.
    static func upstream(_ message: String, feed: String, retryIn: Duration) -> HTTPError {
        let seconds = max(1, (retryIn.wholeMilliseconds + 999) / 1000)
        return HTTPError(
            status: 503, code: "upstream", message: message, feed: feed, retryIn: retryIn, headers: [("Retry-After", String(seconds))])
    }
}
