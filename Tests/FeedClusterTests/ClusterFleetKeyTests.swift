import FeedCluster
import FeedKit
import Foundation
import TestSupport
import Testing

/// SPEC §8: with `key_file`, every record an instance writes is sealed, and a record whose seal
/// does not verify is rejected, whoever wrote it.
@Suite(.serialized, .timeLimit(.minutes(2)))
struct ClusterFleetKeyTests {
    static let oldKey = String(repeating: "0123456789abcdef", count: 4)
    static let newKey = String(repeating: "fedcba9876543210", count: 4)

    let files: TemporaryDirectory

    init() throws {
        files = try TemporaryDirectory()
    }

    func keyedStore(_ server: NATSServer, instance: String, keys: [String]) async throws -> ClusterStore {
        let key = try FleetKey(contentsOf: try files.write("\(instance).key", "# the fleet key\n" + keys.joined(separator: "\n") + "\n"))
        return try await connectedStore([server], instance: instance) { $0.fleetKey = key }
    }

    @Test func instances_with_the_key_share_every_kind_of_record_and_a_forger_without_it_shares_none() async throws {
        let server = try NATSServer()
        let first = try await keyedStore(server, instance: "first", keys: [Self.oldKey])
        let second = try await keyedStore(server, instance: "second", keys: [Self.oldKey])
        let page = PageAddress(feed: "users", generation: 1, page: 1)
        let generation = try await first.startGeneration(of: "users", replacing: nil, seed: "seed", fingerprint: "definition")
        #expect(try await second.generation(of: "users") == generation)
        #expect(try await first.publishPage(page, line: Array("one\n".utf8), headers: ["Feedd-Page": "{}"]) == .published)
        #expect(try await second.publishedPage(page) == PublishedPage(page: page, line: Array("one\n".utf8), headers: ["Feedd-Page": "{}"]))
        _ = try await first.advanceCursor(feed: "users", consumer: "app", to: CursorPosition(generation: 1, page: 1))
        #expect(try await second.cursor(feed: "users", consumer: "app") == CursorPosition(generation: 1, page: 1))
        guard case .acquired = try await first.acquireLease(PageAddress(feed: "users", generation: 1, page: 2)) else { throw TestFailure("no lease") }
        guard case .heldElsewhere(let holder, _) = try await second.acquireLease(PageAddress(feed: "users", generation: 1, page: 2)) else {
            throw TestFailure("a sealed lease was not believed")
        }
        #expect(holder == "first")

        // A client without the key: each record it writes is not believed.
        let forger = try await ClusterForgeryTests.Forger.connect(server)
        try await forger.put("generations", "users", #"{"generation":2,"seed":"forged","fingerprint":"definition"}"#)
        try await forger.put("cursors", "users.app", #"{"generation":1,"page":1}"#)
        try await forger.put("leases", "users.1.3", #"{"holder":"mallory","expires_ms":\#(Int64(Date().timeIntervalSince1970 * 1_000) + 5_000)}"#)
        _ = try await forger.client.publish(
            subject: first.subject(of: PageAddress(feed: "users", generation: 1, page: 4)), payload: Array("forged\n".utf8),
            headers: ["Feedd-Page": "{}", "Feedd-Mac": String(repeating: "0", count: 64)], messageID: "forged", onlyIfSubjectIsEmpty: false)
        #expect(try await second.generation(of: "users") == nil)
        #expect(try await second.cursor(feed: "users", consumer: "app") == nil)
        guard case .acquired = try await second.acquireLease(PageAddress(feed: "users", generation: 1, page: 3)) else {
            throw TestFailure("a lease without a seal held the page")
        }
        #expect(try await second.publishedPage(PageAddress(feed: "users", generation: 1, page: 4)) == nil)
        #expect(second.rejections.counts[.mac] == 4)
        await forger.close()
        await first.close()
        await second.close()
    }

    @Test func a_record_moved_to_another_address_keeps_a_seal_that_no_longer_verifies() async throws {
        let server = try NATSServer()
        let store = try await keyedStore(server, instance: "first", keys: [Self.oldKey])
        _ = try await store.advanceCursor(feed: "users", consumer: "app", to: CursorPosition(generation: 1, page: 7))
        // Copy the sealed cursor of one consumer to another, byte for byte.
        let reader = try await ClusterForgeryTests.Forger.connect(server)
        let bucket = try await reader.client.keyValueBucket(BucketConfiguration(name: "feedd-test-cursors", replicas: 1))
        let sealed = try #require(try await bucket.entry("users.app"))
        _ = try await bucket.put("users.other", value: sealed.value)
        #expect(try await store.cursor(feed: "users", consumer: "other") == nil)
        #expect(store.rejections.counts[.mac] == 1)
        await reader.close()
        await store.close()
    }

    @Test func a_key_is_rotated_without_a_pause_and_the_old_one_is_then_refused() async throws {
        let server = try NATSServer()
        let onlyOld = try await keyedStore(server, instance: "only-old", keys: [Self.oldKey])
        let accepting = try await keyedStore(server, instance: "accepting", keys: [Self.oldKey, Self.newKey])
        let sealingNew = try await keyedStore(server, instance: "sealing-new", keys: [Self.newKey, Self.oldKey])
        let onlyNew = try await keyedStore(server, instance: "only-new", keys: [Self.newKey])

        _ = try await onlyOld.advanceCursor(feed: "users", consumer: "old", to: CursorPosition(generation: 1, page: 1))
        #expect(try await accepting.cursor(feed: "users", consumer: "old") == CursorPosition(generation: 1, page: 1))
        #expect(try await sealingNew.cursor(feed: "users", consumer: "old") == CursorPosition(generation: 1, page: 1))
        #expect(try await onlyNew.cursor(feed: "users", consumer: "old") == nil)

        _ = try await sealingNew.advanceCursor(feed: "users", consumer: "new", to: CursorPosition(generation: 1, page: 2))
        #expect(try await accepting.cursor(feed: "users", consumer: "new") == CursorPosition(generation: 1, page: 2))
        #expect(try await onlyNew.cursor(feed: "users", consumer: "new") == CursorPosition(generation: 1, page: 2))
        #expect(try await onlyOld.cursor(feed: "users", consumer: "new") == nil)
        for store in [onlyOld, accepting, sealingNew, onlyNew] { await store.close() }
    }

    @Test func a_key_file_that_does_not_hold_one_or_two_keys_is_refused_and_says_where() throws {
        for (text, problem) in [
            ("", "(0 found)"), ("abc\n", "line 1 is not a key"), ("\(Self.oldKey)\n\n\(Self.newKey)zz\n", "line 3 is not a key"),
            ([Self.oldKey, Self.newKey, Self.oldKey].joined(separator: "\n"), "(3 found)"),
        ] {
            let path = try files.write("bad.key", text)
            #expect {
                _ = try FleetKey(contentsOf: path)
            } throws: { error in
                "\(error)".contains(path) && "\(error)".contains(problem)
            }
        }
        #expect(throws: NATSError.self) { _ = try FleetKey(contentsOf: files.path("missing.key")) }
    }
}
