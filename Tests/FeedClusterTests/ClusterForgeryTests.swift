import FeedCluster
import FeedKit
import Foundation
import TestSupport
import Testing

/// SPEC §8: nothing read from NATS is believed unchecked. Each record is forged by a plain NATS
/// client (the project's own wrapper, with no fleet code), as anyone who may publish on the
/// cluster could; the store must neither use it nor fail because of it.
@Suite(.serialized, .timeLimit(.minutes(2)))
struct ClusterForgeryTests {
    /// A NATS client that is not an instance: it writes the fleet's buckets directly.
    struct Forger {
        let client: NATSClient

        static func connect(_ server: NATSServer) async throws -> Forger {
            let client = try await NATSClient.connect(NATSClient.Options(servers: [server.url], name: "forger"))
            for await state in client.states() where state == .connected { break }
            return Forger(client: client)
        }

        func put(_ bucket: String, _ key: String, _ value: String) async throws {
            let opened = try await client.keyValueBucket(BucketConfiguration(name: "feedd-test-\(bucket)", replicas: 1))
            _ = try await opened.put(key, value: Array(value.utf8))
        }

        func close() async { await client.close() }
    }

    func rejected(_ store: ClusterStore, _ reason: Rejection.Reason) -> Int {
        store.rejections.counts[reason] ?? 0
    }

    @Test func a_forged_lease_with_an_expiry_far_ahead_holds_nothing() async throws {
        let server = try NATSServer()
        let store = try await connectedStore([server], instance: "honest")
        let forger = try await Forger.connect(server)
        let page = PageAddress(feed: "users", generation: 1, page: 1)
        let aDayAhead = Int64(Date().timeIntervalSince1970 * 1_000) + 86_400_000
        try await forger.put("leases", "users.1.1", #"{"holder":"mallory","expires_ms":\#(aDayAhead)}"#)
        guard case .acquired(let lease) = try await store.acquireLease(page) else { throw TestFailure("a forged lease held the page") }
        #expect(lease.holder == "honest")
        #expect(rejected(store, .lease) == 1)
        // Nor does one that is not a lease at all.
        try await forger.put("leases", "users.1.2", "{\"holder\":")
        guard case .acquired = try await store.acquireLease(PageAddress(feed: "users", generation: 1, page: 2)) else {
            throw TestFailure("a lease that is not JSON held the page")
        }
        await forger.close()
        await store.close()
    }

    @Test func a_forged_generation_out_of_range_or_going_back_is_never_believed() async throws {
        let server = try NATSServer()
        let store = try await connectedStore([server], instance: "honest")
        let forger = try await Forger.connect(server)
        // Adopted, the next refresh would add 1 to it and trap.
        try await forger.put("generations", "users", #"{"generation":9223372036854775807,"seed":"s","fingerprint":"f"}"#)
        #expect(try await store.generation(of: "users") == nil)
        #expect(rejected(store, .generation) == 1)
        // An instance joining writes over what is not a generation.
        let started = try await store.startGeneration(of: "users", replacing: nil, seed: "seed", fingerprint: "definition", firstNumber: 5)
        #expect(started.generation == 5)
        #expect(try await store.generation(of: "users") == started)

        let generations = store.generations()
        #expect(try await next(of: generations, "the current generation") == started)
        let rejectedBefore = rejected(store, .generation)
        try await forger.put("generations", "users", #"{"generation":2,"seed":"s","fingerprint":"definition"}"#)
        try await forger.put("generations", "users", #"{"generation":6,"seed":"after","fingerprint":"definition"}"#)
        // The watch passes over the one going back and delivers the next valid one.
        #expect(try await next(of: generations, "the next generation").seed == "after")
        #expect(rejected(store, .generation) == rejectedBefore + 1)
        await forger.close()
        await store.close()
    }

    @Test func a_forged_cursor_out_of_range_or_in_a_generation_never_started_is_neither_resumed_from_nor_kept() async throws {
        let server = try NATSServer()
        let store = try await connectedStore([server], instance: "honest")
        let forger = try await Forger.connect(server)
        _ = try await store.startGeneration(of: "users", replacing: nil, seed: "seed", fingerprint: "definition")
        _ = try await store.advanceCursor(feed: "users", consumer: "app", to: CursorPosition(generation: 1, page: 2))

        for forged in [#"{"generation":1,"page":2199023255552}"#, #"{"generation":7,"page":1}"#, #"{"generation":-4,"page":"three"}"#] {
            try await forger.put("cursors", "users.app", forged)
            #expect(try await store.cursor(feed: "users", consumer: "app") == nil, "\(forged)")
        }
        #expect(rejected(store, .cursor) == 3)
        // Nor does one stop the consumer's next acknowledgement from being stored.
        #expect(try await store.advanceCursor(feed: "users", consumer: "app", to: CursorPosition(generation: 1, page: 3)) == CursorPosition(generation: 1, page: 3))
        #expect(try await store.cursor(feed: "users", consumer: "app") == CursorPosition(generation: 1, page: 3))
        // A cursor in a generation started elsewhere a moment ago is believed.
        let second = try await connectedStore([server], instance: "refresher")
        _ = try await second.startGeneration(of: "users", replacing: try await second.generation(of: "users"), seed: "seed-2", fingerprint: "definition")
        _ = try await second.advanceCursor(feed: "users", consumer: "app", to: CursorPosition(generation: 2, page: 1))
        #expect(try await store.cursor(feed: "users", consumer: "app") == CursorPosition(generation: 2, page: 1))
        await second.close()
        await forger.close()
        await store.close()
    }

    @Test func a_forged_claim_that_is_not_what_its_key_names_is_dropped() async throws {
        let server = try NATSServer()
        let store = try await connectedStore([server], instance: "honest")
        let forger = try await Forger.connect(server)
        let claims = store.consumerClaims()
        try await forger.put("consumers", "users.app", #"{"feed":"users","consumer":"other","instance":"mallory"}"#)
        try await forger.put("consumers", "users.other", #"{"feed":"users","instance":"mallory"}"#)
        // Keys of their own, so the watch sees both forgeries however late it starts, and before the claim.
        try await store.claimConsumer(feed: "users", consumer: "app2")
        let first = try await next(of: claims, "the first valid claim")
        #expect(first == ConsumerClaim(feed: "users", consumer: "app2", instance: "honest"))
        #expect(rejected(store, .claim) == 2)
        await forger.close()
        await store.close()
    }

    @Test func a_second_publication_on_an_address_is_refused_by_the_server_whoever_sends_it() async throws {
        let server = try NATSServer()
        let store = try await connectedStore([server], instance: "honest")
        let forger = try await Forger.connect(server)
        let page = PageAddress(feed: "users", generation: 1, page: 1)
        #expect(try await store.publishPage(page, line: Array("first\n".utf8)) == .published)
        // A plain publication, with no expectation, and another message id.
        await #expect(throws: NATSError.self) {
            _ = try await forger.client.publish(
                subject: store.subject(of: page), payload: Array("second\n".utf8), messageID: "forged", onlyIfSubjectIsEmpty: false)
        }
        #expect(try await store.page(page) == Array("first\n".utf8))
        // An instance publishing late is told so, and the first stays.
        #expect(try await store.publishPage(page, line: Array("late\n".utf8)) == .alreadyPublished)
        let joiner = try await connectedStore([server], instance: "joiner")
        #expect(try await joiner.page(page) == Array("first\n".utf8))
        await joiner.close()
        await forger.close()
        await store.close()
    }

    @Test func a_pages_stream_made_by_an_older_feedd_is_updated_to_keep_each_first_page() async throws {
        let server = try NATSServer()
        let forger = try await Forger.connect(server)
        // The stream as feedd made it before: one message per subject, the oldest discarded.
        let old = StreamConfiguration(name: "feedd-test-pages", subjects: ["feedd.test.pages.>"], replicas: 1, maxMessagesPerSubject: 1, duplicateWindow: .seconds(120))
        #expect(try await retryingWhileUnavailable { try await forger.client.ensureStream(old) } == .ready)
        let subject = "feedd.test.pages.users.1.1"
        _ = try await forger.client.publish(subject: subject, payload: Array("first\n".utf8), messageID: "a", onlyIfSubjectIsEmpty: false)
        _ = try await forger.client.publish(subject: subject, payload: Array("replaced\n".utf8), messageID: "b", onlyIfSubjectIsEmpty: false)

        let store = try await connectedStore([server], instance: "upgraded")
        let page = PageAddress(feed: "users", generation: 1, page: 1)
        #expect(try await store.page(page) == Array("replaced\n".utf8))
        await #expect(throws: NATSError.self) {
            _ = try await forger.client.publish(subject: subject, payload: Array("again\n".utf8), messageID: "c", onlyIfSubjectIsEmpty: false)
        }
        #expect(try await store.page(page) == Array("replaced\n".utf8))
        await forger.close()
        await store.close()
    }

    @Test func records_and_subjects_that_are_not_what_they_claim_never_stop_a_watch() async throws {
        let server = try NATSServer()
        let store = try await connectedStore([server], instance: "honest")
        let forger = try await Forger.connect(server)
        let pages = await store.pages(of: nil)
        // A subject that is not a page's, then a page: only the page comes through.
        _ = try await retryingWhileUnavailable {
            try await store.publishPage(PageAddress(feed: "users", generation: 1, page: 1), line: Array("one\n".utf8))
        }
        _ = try? await forger.client.publish(subject: "feedd.test.pages.users.x.1", payload: [1, 2], messageID: "odd", onlyIfSubjectIsEmpty: false)
        _ = try await store.publishPage(PageAddress(feed: "users", generation: 1, page: 2), line: Array("two\n".utf8))
        let received = try await within(.seconds(5), "two pages") {
            var lines: [[UInt8]] = []
            for await page in pages {
                lines.append(page.line)
                if lines.count == 2 { return lines }
            }
            throw TestFailure("the pages stream ended")
        }
        #expect(received == [Array("one\n".utf8), Array("two\n".utf8)])
        #expect(rejected(store, .page) == 1)
        await forger.close()
        await store.close()
    }
}
