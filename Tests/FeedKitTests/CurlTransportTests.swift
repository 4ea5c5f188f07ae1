import FeedKit
import Foundation
import Testing
import TestSupport

/// The HTTP layer against a real server on 127.0.0.1, with a small body limit so the limit's
/// edge costs kilobytes rather than the daemon's 64 MiB.
@Suite struct CurlTransportTests {
    static let transport = CurlTransport(maximumBodyBytes: 4096)

    func get(_ upstream: LoopbackUpstream) async throws(SourceError) -> HTTPResponse {
        try await HTTPSource(transport: Self.transport, timeout: .seconds(10)).get(URL(string: "\(upstream.baseURL)/api/?results=1")!)
    }

    @Test func a_body_at_the_limit_is_taken_whole() async throws {
        let upstream = try LoopbackUpstream()
        upstream.inject(.body(bytes: 4096), times: 1)
        let response = try await get(upstream)
        #expect(response.status == 200 && response.body.count == 4096)
        #expect(response.headers["content-type"] == "application/json")
    }

    @Test func a_body_over_the_limit_is_rejected_with_the_url_and_the_limit() async throws {
        let upstream = try LoopbackUpstream()
        upstream.inject(.body(bytes: 4097), times: 1)
        await #expect(throws: SourceError.rejected("GET \(upstream.baseURL)/api/?results=1: the response body is larger than 4096 bytes")) {
            try await get(upstream)
        }
        #expect(try await get(upstream).status == 200, "the next request is served as usual")
    }

    @Test func a_refused_connection_is_a_transient_failure_naming_the_url() async throws {
        let upstream = try LoopbackUpstream()
        let url = "\(upstream.baseURL)/api/?results=1"
        upstream.stop()
        do {
            _ = try await get(upstream)
            Issue.record("a stopped upstream answered")
        } catch {
            #expect(error.kind == .transient)
            #expect(error.message.hasPrefix("GET \(url): "))
        }
    }

    /// A transfer's easy handle is reset and used again by the next (see CurlTransport's
    /// `EasyHandles`): the request after one with a bearer token and header fields sends none of
    /// them, and the one after that sends its own.
    @Test func a_request_sends_nothing_of_the_request_before_it() async throws {
        let upstream = try LoopbackUpstream()
        let url = URL(string: "\(upstream.baseURL)/api/?results=1")!
        var secret = HTTPSource(transport: Self.transport, timeout: .seconds(10))
        secret.bearerToken = "token-1"
        secret.headers["X-Api-Key"] = "key-1"
        var plain = HTTPSource(transport: Self.transport, timeout: .seconds(10))
        plain.headers = ["Accept": "text/plain"]
        for source in [secret, plain, secret, plain] { #expect(try await source.get(url).status == 200) }
        let sent = upstream.received.map(\.headers)
        #expect(sent.map { $0["authorization"] } == ["Bearer token-1", nil, "Bearer token-1", nil])
        #expect(sent.map { $0["x-api-key"] } == ["key-1", nil, "key-1", nil])
        #expect(sent.map { $0["accept"] } == ["application/json", "text/plain", "application/json", "text/plain"])
        #expect(sent.allSatisfy { $0["user-agent"]?.hasPrefix("feedd/") == true }, "the handle's own options are set anew each time")
    }

    /// Where a task goes on after its answer, when it prefers the transport's executor as an HTTP
    /// adapter's fetch does: on the transport's own thread after a page, so no other thread is
    /// woken between the request and its parse; on the shared pool after a larger body, so that
    /// parsing it holds up no other transfer.
    @Test func a_task_preferring_the_transport_reads_a_page_on_its_thread_and_a_larger_body_elsewhere() async throws {
        let upstream = try LoopbackUpstream()
        let source = HTTPSource(transport: CurlTransport(), timeout: .seconds(10))
        let url = URL(string: "\(upstream.baseURL)/api/?results=1")!
        // A job of a task that prefers the transport runs on its thread: a yield is one.
        let transportThread = await withTaskExecutorPreference(source.executor) { () async -> pthread_t in
            await Task.yield()
            return pthread_self()
        }
        func readOnTransportThread(bytes: Int) async throws -> Bool {
            upstream.inject(.body(bytes: bytes), times: 1)
            let (received, thread) = try await withTaskExecutorPreference(source.executor) {
                (try await source.get(url).body.count, pthread_self())
            }
            #expect(received == bytes)
            return pthread_equal(thread, transportThread) != 0
        }
        #expect(try await readOnTransportThread(bytes: 4096))
        #expect(try await readOnTransportThread(bytes: CurlTransport.inlineBodyBytes))
        #expect(try await !readOnTransportThread(bytes: CurlTransport.inlineBodyBytes + 1))
    }

    // MARK: Bodies read as they arrive

    /// The first `count` bytes of `body`, or as many as there are; nil when a read throws.
    static func read(_ count: Int, of body: HTTPBodyStream) -> [UInt8]? {
        try? body.read(upTo: count)
    }

    static func streamingGet(_ upstream: LoopbackUpstream, timeout: Duration = .seconds(10), read: @escaping @Sendable (HTTPResponse, HTTPBodyStream) -> [UInt8]?) async throws(SourceError) -> [UInt8]? {
        let source = HTTPSource(transport: transport, timeout: timeout)
        return try await source.get(URL(string: "\(upstream.baseURL)/api/?results=1")!, ifChangedSince: nil) { response, body in read(response, body) }?.value
    }

    /// The server holds the rest of the body back until the reader has its start: only a body read
    /// as it arrives can be read through.
    @Test func a_streamed_body_is_read_while_the_rest_is_on_its_way() async throws {
        let upstream = try LoopbackUpstream()
        let body = (0..<3_000).map { UInt8(truncatingIfNeeded: $0) }
        upstream.inject(.held(body: body, sentFirst: 1_000, contentType: "application/octet-stream"))
        let read = try await Self.streamingGet(upstream) { response, stream in
            guard response.status == 200, response.headers["content-type"] == "application/octet-stream", let start = Self.read(1_000, of: stream) else { return nil }
            upstream.releaseHeldBodies()
            return Self.read(10_000, of: stream).map { start + $0 }
        }
        #expect(read == body)
    }

    /// A body that arrives faster than it is read waits in the transfer, not in memory: the body
    /// holds about ``HTTPBodyStream/heldBytes`` unread, however large, and the transfer goes on as
    /// the reader catches up, every byte delivered once and in order.
    @Test func a_body_read_slower_than_it_arrives_is_held_to_a_megabyte_and_read_whole() async throws {
        let transport = CurlTransport(maximumBodyBytes: 16 << 20)
        let upstream = try LoopbackUpstream()
        // No period a lost or repeated piece could hide in.
        let body = (0..<(6 << 20)).map { UInt8(truncatingIfNeeded: ($0 &* 0x9E37_79B1) >> 11) }
        upstream.setResource("/large", LoopbackUpstream.Resource(body: body, contentType: "application/octet-stream"))
        let most = Locked(0)
        let source = HTTPSource(transport: transport, timeout: .seconds(30))
        let read = try await source.get(URL(string: "\(upstream.baseURL)/large")!, ifChangedSince: nil) { _, stream in
            var read = Self.read(1, of: stream) ?? []
            // Waits for the body to fill up (it must, at loopback speed), then reads it through
            // in small pieces, noting the most it ever held.
            let deadline = ContinuousClock.now + .seconds(10)
            while stream.unreadBytes < HTTPBodyStream.heldBytes, ContinuousClock.now < deadline { usleep(1_000) }
            while true {
                most.withLock { $0 = max($0, stream.unreadBytes) }
                guard let piece = Self.read(4_000, of: stream), !piece.isEmpty else { break }
                read += piece
            }
            return read
        }?.value
        #expect(read == body)
        #expect(most.withLock { $0 } >= HTTPBodyStream.heldBytes, "the body filled up")
        #expect(most.withLock { $0 } < HTTPBodyStream.heldBytes + (256 << 10), "and held no more than a piece over")
    }

    @Test func a_transfer_cut_while_its_body_is_read_is_the_transport_failure() async throws {
        let upstream = try LoopbackUpstream()
        upstream.inject(.cut(body: [UInt8](repeating: 65, count: 3_000), sentFirst: 1_000))
        let started = Locked<Int?>(nil)
        do {
            _ = try await Self.streamingGet(upstream) { _, stream in
                started.withLock { $0 = Self.read(1_000, of: stream)?.count }
                return Self.read(10_000, of: stream)
            }
            Issue.record("a cut body was read whole")
        } catch {
            #expect(error.kind == .transient)
            #expect(error.message.hasPrefix("GET \(upstream.baseURL)/api/?results=1: "), "\(error.message)")
        }
        #expect(started.withLock { $0 } == 1_000)
    }

    @Test func a_streamed_body_over_the_limit_ends_at_the_limit_with_the_size_error() async throws {
        let upstream = try LoopbackUpstream()
        upstream.inject(.held(body: [UInt8](repeating: 65, count: 5_000), sentFirst: 3_000))
        let seen = Locked(0)
        await #expect(throws: SourceError.rejected("GET \(upstream.baseURL)/api/?results=1: the response body is larger than 4096 bytes")) {
            try await Self.streamingGet(upstream) { _, stream in
                let start = Self.read(3_000, of: stream)
                upstream.releaseHeldBodies()
                var rest: [UInt8] = []
                let failed = (try? stream.readAll(appendingTo: &rest)) == nil
                seen.withLock { $0 = (start?.count ?? 0) + rest.count }
                return failed ? nil : rest
            }
        }
        #expect(seen.withLock { $0 } <= 4_096, "no byte past the limit is read")
        #expect(try await get(upstream).status == 200, "the next request is served as usual")
    }

    @Test func cancelling_a_streamed_read_stops_the_reader_and_the_transfer() async throws {
        let upstream = try LoopbackUpstream()
        upstream.inject(.held(body: [UInt8](repeating: 65, count: 3_000), sentFirst: 1_000))
        let (reading, reader) = AsyncStream.makeStream(of: Void.self)
        let task = Task {
            try await Self.streamingGet(upstream, timeout: .seconds(30)) { _, stream in
                _ = Self.read(1_000, of: stream)
                reader.yield()
                return Self.read(10_000, of: stream)
            }
        }
        for await _ in reading { break }
        task.cancel()
        let started = ContinuousClock.now
        await #expect(throws: SourceError.transient("GET \(upstream.baseURL)/api/?results=1: cancelled")) { try await task.value }
        #expect(ContinuousClock.now - started < .seconds(10), "not the transfer's timeout")
        upstream.stop()
    }

    @Test func a_response_that_is_not_2xx_is_thrown_before_any_read() async throws {
        let upstream = try LoopbackUpstream()
        upstream.inject(.status(503, retryAfter: "7"))
        await #expect(throws: SourceError.transient("HTTP 503 from \(upstream.baseURL)/api/?results=1", retryAfter: .seconds(7))) {
            try await Self.streamingGet(upstream) { _, _ in
                Issue.record("the body of a 503 was read")
                return nil
            }
        }
    }
}
