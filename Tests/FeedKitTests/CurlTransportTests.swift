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
}
