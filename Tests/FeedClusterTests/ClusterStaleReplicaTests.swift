import Dispatch
import FeedCluster
import FeedKit
import Foundation
import Glibc
import TestSupport
import Testing

/// A bucket replica that missed writes, as one cut off from its cluster answers until it has
/// caught up: every direct get of its stream finds nothing. JetStream lets any replica of a
/// bucket answer direct gets, so such answers are no ground for a decision (SPEC §8: an
/// instance that can reach the fleet fetches a page only under its lease).
@Suite(.serialized, .timeLimit(.minutes(1)))
struct ClusterStaleReplicaTests {
    /// Without it, creating a lease key that held a lease before (a page another instance
    /// leased and did not publish) read the key back with a direct get; the stale replica's
    /// "not found" wiped the refusal's text, so the conflict came back as a failure without
    /// words, and the engine took the fleet for unreachable: it served alone under a new local
    /// generation and fetched that generation's first page every second.
    @Test func test_a_lease_held_or_expired_is_told_as_such_while_a_stale_replica_answers_direct_gets() async throws {
        let leases = "KV_feedd-test-leases"
        let server = try NATSServer(configuration: StaleReplica.configuration(answeringFor: leases))
        defer { server.stop() }
        let replica = try await StaleReplica.start(port: server.port)
        defer { replica.stop() }
        let holder = try await connectedStore([server], instance: "holder", lease: .seconds(1))
        let other = try await connectedStore([server], instance: "other", lease: .seconds(1))
        let page = PageAddress(feed: "users", generation: 1, page: 8)
        guard case .acquired = try await holder.acquireLease(page) else { throw TestFailure("the first acquirer did not get the lease") }

        // The world the test means: the stream's leader has the lease, a direct get finds nothing.
        let subject = "$KV.feedd-test-leases.users.1.8"
        #expect(try await other.client.lastMessage(stream: leases, subject: subject, from: .leader) != nil)
        #expect(try await other.client.lastMessage(stream: leases, subject: subject, from: .anyReplica) == nil)
        #expect(replica.answered > 0, "the direct get did not reach the stale replica")

        guard case .heldElsewhere(let holderName, let until) = try await other.acquireLease(page) else {
            throw TestFailure("a lease held by another instance was not told as held")
        }
        #expect(holderName == "holder")
        // Past its expiry (wall-clock milliseconds) the lease is taken over.
        try await sleepPastLease(until: until)
        guard case .acquired(let taken) = try await other.acquireLease(page) else { throw TestFailure("an expired lease was not taken over") }
        #expect(taken.holder == "other")
        await holder.close()
        await other.close()
    }

    /// A key whose value was deleted keeps its deletion as its last message: creating it again
    /// writes over the deletion (a consumer's cursor after `forget`), as the leader has it.
    @Test func test_a_deleted_key_is_created_again_while_a_stale_replica_answers_direct_gets() async throws {
        let server = try NATSServer(configuration: StaleReplica.configuration(answeringFor: "KV_stale-test"))
        defer { server.stop() }
        let replica = try await StaleReplica.start(port: server.port)
        defer { replica.stop() }
        let client = try await NATSClient.connect(NATSClient.Options(servers: [server.url], name: "stale-test"))
        _ = try await next(of: client.states(), within: .seconds(10), "the connection") { $0 == .connected }
        let bucket = try await retryingWhileUnavailable { try await client.keyValueBucket(BucketConfiguration(name: "stale-test", replicas: 1)) }

        let first = try await bucket.create("cursor", value: Array("1".utf8))
        // The world the test means: a direct get finds nothing the leader has.
        #expect(try await client.lastMessage(stream: "KV_stale-test", subject: "$KV.stale-test.cursor", from: .anyReplica) == nil)
        #expect(try await client.lastMessage(stream: "KV_stale-test", subject: "$KV.stale-test.cursor", from: .leader) != nil)
        let refusal = await #expect(throws: NATSError.self) { _ = try await bucket.create("cursor", value: Array("2".utf8)) }
        #expect(refusal?.code == .conflict)
        try await bucket.delete("cursor")
        let again = try await bucket.create("cursor", value: Array("3".utf8))
        #expect(again > first)
        #expect(try await bucket.entry("cursor")?.value == Array("3".utf8))
        await client.close()
    }
}

/// A replica of one stream that has none of its messages: it answers every direct get the
/// server hands it with `404 Message Not Found`, as nats-server does for a message it does not
/// have. The server hands it that stream's direct gets by a subject mapping
/// (``configuration(answeringFor:)``), so every direct get on the stream reaches it, and only it.
/// It speaks the NATS protocol itself: no client library sends a status line.
final class StaleReplica: Sendable {
    static let subjectPrefix = "stale-replica"
    /// How many direct gets it answered.
    var answered: Int { answers.withLock { $0 } }

    private let answers = Locked(0)
    private let descriptor: Int32
    private let finished = DispatchSemaphore(value: 0)

    private init(descriptor: Int32) {
        self.descriptor = descriptor
    }

    /// A nats-server configuration that hands the direct gets of `stream` to the stale replica.
    static func configuration(answeringFor stream: String) -> String {
        #"mappings = { "$JS.API.DIRECT.GET.\#(stream).>": "\#(subjectPrefix).>" }"#
    }

    /// Connects to the server on `port` and returns once the server has its subscription.
    static func start(port: Int) async throws -> StaleReplica {
        let replica = StaleReplica(descriptor: try connectedSocket(port: port))
        try await withCheckedThrowingContinuation { (subscribed: CheckedContinuation<Void, any Error>) in
            let thread = Thread { replica.serve(subscribed) }
            thread.name = "stale-replica"
            thread.start()
        }
        return replica
    }

    /// Ends the connection and waits for its thread.
    func stop() {
        shutdown(descriptor, Int32(SHUT_RDWR))
        finished.wait()
        close(descriptor)
    }

    private func serve(_ subscribed: CheckedContinuation<Void, any Error>) {
        defer { finished.signal() }
        var wire = Wire(descriptor: descriptor)
        var waiting: CheckedContinuation<Void, any Error>? = subscribed
        wire.send(#"CONNECT {"verbose":false,"pedantic":false,"headers":true,"protocol":1,"name":"stale-replica"}"# + "\r\nSUB \(Self.subjectPrefix).> 1\r\nPING\r\n")
        while let line = wire.line() {
            let fields = line.split(separator: " ")
            switch fields.first {
            case "PING":
                wire.send("PONG\r\n")
            case "PONG":
                waiting?.resume()
                waiting = nil
                wire.isSubscribed = true
            case "MSG", "HMSG":
                // `MSG subject sid reply size` or `HMSG subject sid reply header-size total-size`.
                let sizes = fields.first == "MSG" ? 1 : 2
                guard let total = fields.last.flatMap({ Int($0) }), wire.skip(total + 2) else { break }
                guard fields.count == 4 + sizes else { continue }
                // Counted before it is sent: the test reads the count once the answer is back.
                answers.withLock { $0 += 1 }
                let status = "NATS/1.0 404 Message Not Found\r\n\r\n"
                wire.send("HPUB \(fields[3]) \(status.utf8.count) \(status.utf8.count)\r\n\(status)\r\n")
            default:
                // INFO, +OK, -ERR: nothing to answer.
                continue
            }
        }
        waiting?.resume(throwing: TestFailure("the stale replica's connection ended before the server had its subscription"))
    }

    private static func connectedSocket(port: Int) throws -> Int32 {
        let descriptor = try LoopbackSocket.connect(port: port)
        // A server that does not take the subscription within seconds ends the replica's start.
        var timeout = timeval(tv_sec: 5, tv_usec: 0)
        setsockopt(descriptor, SOL_SOCKET, SO_RCVTIMEO, &timeout, socklen_t(MemoryLayout<timeval>.size))
        return descriptor
    }

    /// The replica's end of the connection: lines and byte counts read, text written.
    private struct Wire {
        let descriptor: Int32
        var buffer: [UInt8] = []
        /// Once subscribed, a quiet server (no request for a while) is no end of the connection.
        var isSubscribed = false

        mutating func send(_ text: String) {
            var bytes = Array(text.utf8)[...]
            while !bytes.isEmpty {
                let written = bytes.withUnsafeBytes { Glibc.send(descriptor, $0.baseAddress, $0.count, Int32(MSG_NOSIGNAL)) }
                guard written > 0 else { return }
                bytes = bytes.dropFirst(written)
            }
        }

        /// The next line without its CRLF; nil once the connection ended.
        mutating func line() -> String? {
            while true {
                if let end = buffer.indices.dropLast().first(where: { buffer[$0] == 13 && buffer[$0 + 1] == 10 }) {
                    defer { buffer.removeFirst(end + 2) }
                    return String(decoding: buffer[..<end], as: UTF8.self)
                }
                guard fill() else { return nil }
            }
        }

        /// Reads past `count` bytes; false if the connection ended first.
        mutating func skip(_ count: Int) -> Bool {
            while buffer.count < count {
                guard fill() else { return false }
            }
            buffer.removeFirst(count)
            return true
        }

        private mutating func fill() -> Bool {
            var chunk = [UInt8](repeating: 0, count: 4096)
            while true {
                let count = chunk.withUnsafeMutableBytes { recv(descriptor, $0.baseAddress, $0.count, 0) }
                if count > 0 {
                    buffer += chunk[..<count]
                    return true
                }
                if count < 0, errno == EINTR || (errno == EAGAIN && isSubscribed) { continue }
                return false
            }
        }
    }
}
