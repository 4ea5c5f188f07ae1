import FeedKit
import Foundation
import Glibc

/// An HTTP server on 127.0.0.1 for tests: serves the randomuser API and a paged S3-style feed
/// deterministically, records every request, and injects faults on demand.
///
/// Routes: any request target given to ``setResource(_:_:)`` first (with its headers, and `304`
/// for a conditional request that matches its `ETag` or `Last-Modified`), then
/// `/api/?results=R&page=N&seed=S` (randomuser; without `seed`, a new one per call, like the real
/// API) and `/feed-N.json` (the pages given to ``setFeedPages(_:)``; a missing page is 403, as S3
/// answers for a key that does not exist).
public final class LoopbackUpstream: @unchecked Sendable {
    // Sendable: all mutable state is guarded by `condition`; the listening descriptor is fixed at init.

    /// A misbehaviour for the next requests.
    public enum Fault: Sendable {
        /// Answer normally, after this long.
        case latency(Duration)
        case status(Int, retryAfter: String? = nil)
        /// A `{"error": …}` body with status 200, as randomuser sends.
        case errorBody
        /// The first half of the real body.
        case truncatedJSON
        /// A 200 body of this many spaces.
        case body(bytes: Int)
        /// Close the connection without a response.
        case closeWithoutResponse
        /// Accept and never answer (until the server stops).
        case hang
        /// A 200 `body` of which the first `sentFirst` bytes are sent at once, and the rest only
        /// after ``releaseHeldBodies()`` (or when the server stops).
        case held(body: [UInt8], sentFirst: Int, contentType: String = "application/rss+xml")
        /// A 200 whose head promises `body` whole, and whose connection closes after `sentFirst` bytes of it.
        case cut(body: [UInt8], sentFirst: Int, contentType: String = "application/rss+xml")
    }

    /// One request as the upstream saw it.
    public struct Request: Sendable {
        public let path: String
        public let query: [String: String]
        /// The request target as sent: the path and the query, `/posts?page=2`.
        public let target: String
        /// Header fields, with lowercased names.
        public let headers: [String: String]
        /// When its response was written in full (nil while it is being served).
        public internal(set) var answeredAt: ContinuousClock.Instant?
    }

    public let port: UInt16
    private let listener: Int32
    private let condition = NSCondition()
    private var faults: [Fault] = []
    private var latency: Duration = .zero
    private var requests: [Request] = []
    private var answered = 0
    private var feedPages: [[String: JSONValue]] = []
    private var resources: [String: Resource] = [:]
    private var unseededCalls = 0
    private var stopped = false
    private var heldBodiesReleased = false

    public init() throws {
        let listener = socket(AF_INET, Int32(SOCK_STREAM.rawValue) | Int32(SOCK_CLOEXEC.rawValue), 0)
        self.listener = listener
        var reuse: Int32 = 1
        setsockopt(listener, SOL_SOCKET, SO_REUSEADDR, &reuse, socklen_t(MemoryLayout<Int32>.size))
        var address = sockaddr_in()
        address.sin_family = sa_family_t(AF_INET)
        address.sin_addr.s_addr = inet_addr("127.0.0.1")
        address.sin_port = 0
        let bound = withUnsafePointer(to: &address) {
            $0.withMemoryRebound(to: sockaddr.self, capacity: 1) { bind(listener, $0, socklen_t(MemoryLayout<sockaddr_in>.size)) }
        }
        guard bound == 0, listen(listener, 512) == 0 else { throw TestFailure("cannot listen on 127.0.0.1") }
        var length = socklen_t(MemoryLayout<sockaddr_in>.size)
        _ = withUnsafeMutablePointer(to: &address) {
            $0.withMemoryRebound(to: sockaddr.self, capacity: 1) { getsockname(listener, $0, &length) }
        }
        port = UInt16(bigEndian: address.sin_port)
        startAccepting()
    }

    /// The accepting thread owns the listening descriptor and closes it when it ends: were
    /// ``stop()`` to close it, a thread not yet started (or between two accepts) would call accept
    /// on a descriptor number already reused by another test's listener, and serve its requests.
    private func startAccepting() {
        let listening = listener
        Thread.detachNewThread { [weak self] in
            defer { close(listening) }
            while true {
                let client = accept(listening, nil, nil)
                if client < 0, errno == EINTR || errno == ECONNABORTED { continue }
                guard client >= 0 else { return }
                // Closed on exec, as the listener is: a daemon a test starts meanwhile inherits neither.
                _ = fcntl(client, F_SETFD, FD_CLOEXEC)
                guard let self else { close(client); return }
                Thread.detachNewThread { self.serve(client) }
            }
        }
    }

    deinit {
        stop()
    }

    /// Stops accepting and releases every hanging request.
    public func stop() {
        condition.lock()
        let wasStopped = stopped
        stopped = true
        condition.broadcast()
        condition.unlock()
        if !wasStopped { shutdown(listener, Int32(SHUT_RDWR)) }
    }

    public var baseURL: String { "http://127.0.0.1:\(port)" }

    /// Sends the rest of every ``Fault/held(body:sentFirst:contentType:)`` body, now and from now on.
    public func releaseHeldBodies() {
        condition.lock()
        heldBodiesReleased = true
        condition.broadcast()
        condition.unlock()
    }

    /// Makes the next `count` requests misbehave as `fault`.
    public func inject(_ fault: Fault, times count: Int = 1) {
        condition.lock()
        faults += Array(repeating: fault, count: count)
        condition.unlock()
    }

    /// Delays every answer by `latency`.
    public func setLatency(_ latency: Duration) {
        condition.lock()
        self.latency = latency
        condition.unlock()
    }

    /// The S3 feed's pages: page N is `pages[N-1]`, whose `items` get ids `"pN-i"`.
    public func setFeedPages(_ labels: [[String]], hasMoreAfterLast: Bool = false) {
        condition.lock()
        feedPages = labels.enumerated().map { index, page in
            let items: [JSONValue] = page.enumerated().map { offset, label in
                ["id": .string("p\(index + 1)-\(offset + 1)"), "label": .string(label)]
            }
            return ["items": .array(items), "hasMorePages": .bool(index < labels.count - 1 || hasMoreAfterLast)]
        }
        condition.unlock()
    }

    /// A response served at one request target, such as `/posts?page=2` or `/feed.xml`.
    public struct Resource: Sendable {
        public var status: Int
        public var body: [UInt8]
        public var contentType: String
        /// More header fields to send (`Link`, `Location`, …).
        public var headers: [(name: String, value: String)]
        /// Sent as `ETag`; a request with a matching `If-None-Match` gets `304`.
        public var entityTag: String?
        /// Sent as `Last-Modified`; a request with the same `If-Modified-Since` gets `304`.
        public var lastModified: String?

        public init(
            status: Int = 200, body: [UInt8], contentType: String, headers: [(name: String, value: String)] = [],
            entityTag: String? = nil, lastModified: String? = nil
        ) {
            self.status = status
            self.body = body
            self.contentType = contentType
            self.headers = headers
            self.entityTag = entityTag
            self.lastModified = lastModified
        }

        public static func json(_ value: JSONValue, headers: [(name: String, value: String)] = [], entityTag: String? = nil) -> Resource {
            Resource(body: value.serialized, contentType: "application/json", headers: headers, entityTag: entityTag)
        }

        public static func text(_ text: String, contentType: String, entityTag: String? = nil, lastModified: String? = nil) -> Resource {
            Resource(body: Array(text.utf8), contentType: contentType, entityTag: entityTag, lastModified: lastModified)
        }

        public static func redirect(to location: String, status: Int = 302) -> Resource {
            Resource(status: status, body: [], contentType: "text/plain", headers: [("Location", location)])
        }
    }

    /// Serves `resource` at `target` (a path with its query, as requested) from now on; nil removes it.
    public func setResource(_ target: String, _ resource: Resource?) {
        condition.lock()
        resources[target] = resource
        condition.unlock()
    }

    /// Every request so far.
    public var received: [Request] {
        condition.lock()
        defer { condition.unlock() }
        return requests
    }

    /// Waits until at least `count` requests have arrived; throws after `timeout`.
    public func waitForRequests(_ count: Int, timeout: Duration = .seconds(15)) throws {
        let deadline = Date(timeIntervalSinceNow: Double(timeout.wholeMilliseconds) / 1000)
        condition.lock()
        defer { condition.unlock() }
        while requests.count < count {
            guard condition.wait(until: deadline) else {
                throw TestFailure("upstream saw \(requests.count) requests, not \(count), within \(timeout)")
            }
        }
    }

    /// Waits until at least `count` responses have been written in full; throws after `timeout`.
    public func waitForAnswers(_ count: Int, timeout: Duration = .seconds(15)) throws {
        let deadline = Date(timeIntervalSinceNow: Double(timeout.wholeMilliseconds) / 1000)
        condition.lock()
        defer { condition.unlock() }
        while answered < count {
            guard condition.wait(until: deadline) else {
                throw TestFailure("upstream answered \(answered) requests, not \(count), within \(timeout)")
            }
        }
    }

    // MARK: Serving

    private func serve(_ client: Int32) {
        var index: Int?
        defer {
            close(client)
            condition.lock()
            answered += 1
            if let index { requests[index].answeredAt = .now }
            condition.broadcast()
            condition.unlock()
        }
        guard let request = readRequest(client) else { return }
        condition.lock()
        index = requests.count
        requests.append(request)
        condition.broadcast()
        let fault = faults.isEmpty ? nil : faults.removeFirst()
        let latency = latency
        condition.unlock()

        let (path, query) = (request.path, request.query)
        if latency > .zero { Thread.sleep(forTimeInterval: Double(latency.wholeMilliseconds) / 1000) }
        if fault == nil, let resource = resource(for: request) {
            respond(client, resource)
            return
        }
        switch fault {
        case .latency(let extra)?:
            Thread.sleep(forTimeInterval: Double(extra.wholeMilliseconds) / 1000)
            respond(client, route(path, query))
        case .status(let status, let retryAfter)?:
            respond(client, (status, Array(#"{"message":"injected"}"#.utf8)), retryAfter: retryAfter)
        case .errorBody?:
            respond(client, (200, Array(#"{"error":"Uh oh, something has gone wrong."}"#.utf8)))
        case .truncatedJSON?:
            let (status, body) = route(path, query)
            respond(client, (status, Array(body.prefix(body.count / 2))))
        case .body(let count)?:
            respond(client, (200, [UInt8](repeating: UInt8(ascii: " "), count: count)))
        case .closeWithoutResponse?:
            return
        case .hang?:
            condition.lock()
            while !stopped { condition.wait() }
            condition.unlock()
        case .held(let body, let first, let contentType)?:
            guard sendAll(client, head(status: 200, contentType: contentType, length: body.count), more: true),
                sendAll(client, Array(body.prefix(first)), more: false)
            else { return }
            condition.lock()
            while !heldBodiesReleased, !stopped { condition.wait() }
            condition.unlock()
            _ = sendAll(client, Array(body.dropFirst(first)), more: false)
        case .cut(let body, let first, let contentType)?:
            guard sendAll(client, head(status: 200, contentType: contentType, length: body.count), more: true) else { return }
            _ = sendAll(client, Array(body.prefix(first)), more: false)
        case nil:
            respond(client, route(path, query))
        }
    }

    /// The resource at the request's target, or `304` for a conditional request it matches.
    private func resource(for request: Request) -> Resource? {
        condition.lock()
        let resource = resources[request.target]
        condition.unlock()
        guard var resource else { return nil }
        let etagMatches = resource.entityTag != nil && request.headers["if-none-match"] == resource.entityTag
        let dateMatches = resource.lastModified != nil && request.headers["if-modified-since"] == resource.lastModified
        if etagMatches || dateMatches {
            resource.status = 304
            resource.body = []
        }
        return resource
    }

    private func route(_ path: String, _ query: [String: String]) -> (Int, [UInt8]) {
        if path.hasPrefix("/api") { return (200, randomUserPage(query)) }
        if path.hasPrefix("/feed-"), path.hasSuffix(".json"), let number = Int(path.dropFirst(6).dropLast(5)) {
            condition.lock()
            defer { condition.unlock() }
            guard number >= 1, number <= feedPages.count else {
                return (403, Array("<Error><Code>AccessDenied</Code></Error>".utf8))
            }
            return (200, JSONValue.object(feedPages[number - 1]).serialized)
        }
        return (404, Array(#"{"message":"no such route"}"#.utf8))
    }

    /// Users that depend only on (seed, page, index), with non-ASCII and escaped strings in them.
    private func randomUserPage(_ query: [String: String]) -> [UInt8] {
        let results = Int(query["results"] ?? "") ?? 1
        let page = Int(query["page"] ?? "") ?? 1
        let seed: String
        if let given = query["seed"] {
            seed = given
        } else {
            condition.lock()
            unseededCalls += 1
            seed = "auto\(unseededCalls)"
            condition.unlock()
        }
        let users: [JSONValue] = (0..<results).map { index in
            let uuid = "\(seed)-\(page)-\(index)"
            return [
                "gender": index % 2 == 0 ? "female" : "male",
                "name": ["title": "Mx", "first": .string("Zoë \(index)"), "last": .string("O\"Brien\\\(page)")],
                "email": .string("user\(index)@example.com"),
                "location": ["city": "Zürich", "coordinates": ["latitude": "47.37", "longitude": "8.54"]],
                "login": ["uuid": .string(uuid), "username": .string("user_\(index)")],
                "dob": ["age": .integer(Int64(20 + index))],
                "nat": "CH",
            ]
        }
        let info: JSONValue = ["seed": .string(seed), "results": .integer(Int64(results)), "page": .integer(Int64(page)), "version": "1.4"]
        return JSONValue.object(["results": .array(users), "info": info]).serialized
    }

    private func readRequest(_ client: Int32) -> Request? {
        var buffer: [UInt8] = []
        var chunk = [UInt8](repeating: 0, count: 4096)
        while !buffer.suffix(4).elementsEqual("\r\n\r\n".utf8) {
            let count = recv(client, &chunk, chunk.count, 0)
            guard count > 0 else { return nil }
            buffer += chunk[0..<count]
            if buffer.count > 65_536 { return nil }
        }
        let lines = String(decoding: buffer, as: UTF8.self).components(separatedBy: "\r\n")
        let parts = lines[0].split(separator: " ")
        guard parts.count >= 2, let components = URLComponents(string: String(parts[1])) else { return nil }
        var query: [String: String] = [:]
        for item in components.queryItems ?? [] { query[item.name] = item.value ?? "" }
        var headers: [String: String] = [:]
        for line in lines.dropFirst() {
            guard let colon = line.firstIndex(of: ":") else { continue }
            headers[line[..<colon].lowercased()] = line[line.index(after: colon)...].trimmingCharacters(in: .whitespaces)
        }
        return Request(path: components.path, query: query, target: String(parts[1]), headers: headers, answeredAt: nil)
    }

    private func respond(_ client: Int32, _ resource: Resource) {
        var headers = resource.headers
        if let entityTag = resource.entityTag { headers.append(("ETag", entityTag)) }
        if let lastModified = resource.lastModified { headers.append(("Last-Modified", lastModified)) }
        respond(client, (resource.status, resource.body), contentType: resource.contentType, headers: headers)
    }

    private func respond(
        _ client: Int32, _ response: (status: Int, body: [UInt8]), retryAfter: String? = nil, contentType: String = "application/json",
        headers: [(name: String, value: String)] = []
    ) {
        let extra = (retryAfter.map { [("Retry-After", $0)] } ?? []) + headers
        let head = head(status: response.status, contentType: contentType, length: response.body.count, headers: extra)
        // The body is sent from where it is kept: a copy of a large one (a 9 MB feed) behind its
        // head would hold the first byte back for milliseconds. The head waits for it (MSG_MORE),
        // so the two leave in the same segments, as one buffer would.
        guard sendAll(client, head, more: !response.body.isEmpty) else { return }
        _ = sendAll(client, response.body, more: false)
    }

    private func head(status: Int, contentType: String, length: Int, headers: [(name: String, value: String)] = []) -> [UInt8] {
        var head = "HTTP/1.1 \(status) \(status < 400 ? "OK" : "Error")\r\n"
        head += "Content-Type: \(contentType)\r\nContent-Length: \(length)\r\nConnection: close\r\n"
        for (name, value) in headers { head += "\(name): \(value)\r\n" }
        return Array((head + "\r\n").utf8)
    }

    /// Sends every byte of `bytes`; false once the peer is gone.
    private func sendAll(_ client: Int32, _ bytes: [UInt8], more: Bool) -> Bool {
        var offset = 0
        let flags = Int32(MSG_NOSIGNAL) | (more ? Int32(MSG_MORE) : 0)
        while offset < bytes.count {
            let written = bytes[offset...].withUnsafeBytes { send(client, $0.baseAddress, $0.count, flags) }
            guard written > 0 else { return false }
            offset += written
        }
        return true
    }
}
