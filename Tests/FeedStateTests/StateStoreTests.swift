import FeedKit
import Foundation
import Testing
import TestSupport

@testable import FeedState

@Suite struct StateStoreTests {
    @Test func test_confirmed_state_survives_reopening() async throws {
        let fixture = try StoreFixture()
        do {
            let store = try await fixture.openWithFeed(pages: 3)
            try await store.setCursor(feed: "f", consumer: "dora", generation: 1, cursor: 3)
            try await store.setCursor(feed: "f", consumer: "eve", generation: 1, cursor: 1)
            #expect(try await store.forget(feed: "f", consumer: "eve"))
            #expect(try await store.forget(feed: "f", consumer: "eve") == false)
            store.close()
        }
        let store = try fixture.open()
        #expect(store.feed("f")?.generation == 1)
        #expect(store.feed("f")?.fingerprint == "shape-1")
        #expect(store.feed("f")?.seed == "s1")
        #expect(store.feed("f")?.pages.map(\.token) == ["t2", "t3", "t4"])
        #expect(store.cursor(feed: "f", consumer: "dora") == StoredCursor(generation: 1, cursor: 3))
        #expect(store.consumers(of: "f").map(\.name) == ["dora"])
    }

    @Test func test_generation_never_goes_backwards() async throws {
        let fixture = try StoreFixture()
        let store = try fixture.open()
        try await store.startGeneration(feed: "f", generation: 5, fingerprint: "a", seed: nil)
        await #expect(throws: StoreError.self) { try await store.startGeneration(feed: "f", generation: 4, fingerprint: "a", seed: nil) }
        await #expect(throws: StoreError.self) { try await store.startGeneration(feed: "f", generation: 5, fingerprint: "b", seed: nil) }
        try await store.startGeneration(feed: "f", generation: 5, fingerprint: "a", seed: nil)
        #expect(store.feed("f")?.generation == 5)
        store.close()
        #expect(try fixture.open().feed("f")?.generation == 5)
    }

    @Test func test_a_new_generation_puts_every_consumer_back_at_0_and_drops_its_pages() async throws {
        let fixture = try StoreFixture()
        let store = try await fixture.openWithFeed(pages: 4)
        try await store.setCursor(feed: "f", consumer: "a", generation: 1, cursor: 4)
        try await store.setCursor(feed: "f", consumer: "b", generation: 1, cursor: 2)
        try await store.startGeneration(feed: "f", generation: 2, fingerprint: "shape-2", seed: "s2")
        for name in ["a", "b"] { #expect(store.cursor(feed: "f", consumer: name) == StoredCursor(generation: 2, cursor: 0)) }
        #expect(store.feed("f")?.pages.isEmpty == true)
        // A cursor of the old generation, or past the pages known, is refused.
        await #expect(throws: StoreError.self) { try await store.setCursor(feed: "f", consumer: "a", generation: 1, cursor: 1) }
        await #expect(throws: StoreError.self) { try await store.setCursor(feed: "f", consumer: "a", generation: 2, cursor: 1) }
        await #expect(throws: StoreError.self) { try await store.setCursor(feed: "f", consumer: "a", generation: 2, cursor: -1) }
        store.close()
        let reopened = try fixture.open()
        #expect(reopened.cursor(feed: "f", consumer: "a") == StoredCursor(generation: 2, cursor: 0))
        #expect(reopened.feed("f")?.seed == "s2")
    }

    @Test func test_pages_are_recorded_without_gaps() async throws {
        let fixture = try StoreFixture()
        let store = try await fixture.openWithFeed(pages: 2)
        await #expect(throws: StoreError.self) { try await store.recordPage(feed: "f", generation: 1, page: 4, token: nil, body: nil) }
        await #expect(throws: StoreError.self) { try await store.recordPage(feed: "g", generation: 1, page: 1, token: nil, body: nil) }
        try await store.recordPage(feed: "f", generation: 1, page: 2, token: "again", body: nil)
        #expect(store.feed("f")?.pages.map(\.token) == ["t2", "again"])
    }

    /// Bytes kept elsewhere, stored as a body's tail (Sendable: never written after `init`).
    final class Tail: FixedBytes, @unchecked Sendable {
        let bytes: UnsafeMutableRawBufferPointer
        var buffer: UnsafeRawBufferPointer { UnsafeRawBufferPointer(bytes) }
        init(_ contents: [UInt8]) {
            let storage = UnsafeMutableRawBufferPointer.allocate(byteCount: max(contents.count, 1), alignment: 1)
            storage.copyBytes(from: contents)
            bytes = UnsafeMutableRawBufferPointer(rebasing: storage[..<contents.count])
        }
        deinit { bytes.deallocate() }
    }

    @Test func test_a_body_with_a_tail_is_stored_as_its_two_parts_one_after_the_other() async throws {
        let fixture = try StoreFixture()
        let store = try fixture.open()
        try await store.startGeneration(feed: "f", generation: 1, fingerprint: "x", seed: nil)
        let line = (0..<300_000).map { UInt8(truncatingIfNeeded: $0 % 251) }
        let pages = [
            NewPage(token: "2", body: Array("head\n".utf8), bodyTail: Tail(line)), NewPage(token: "3", body: [], bodyTail: Tail([1, 2])),
            NewPage(token: nil, body: [9], bodyTail: Tail([])),
        ]
        try await store.recordPages(feed: "f", generation: 1, first: 1, pages: pages)
        store.close()
        let reopened = try fixture.open()
        #expect(try await reopened.pageBody(feed: "f", generation: 1, page: 1) == Array("head\n".utf8) + line)
        #expect(try await reopened.pageBody(feed: "f", generation: 1, page: 2) == [1, 2])
        #expect(try await reopened.pageBody(feed: "f", generation: 1, page: 3) == [9])
        #expect(reopened.feed("f")?.pages.map(\.bodyBytes) == [line.count + 5, 2, 1])
    }

    @Test func test_pages_recorded_together_and_writes_from_one_actor_commit_in_order() async throws {
        let fixture = try StoreFixture()
        let store = try fixture.open()
        try await MainActor.run {
            // Queued before each task first suspends: the generation, then its pages, then the cursor.
            Task { try await store.startGeneration(feed: "f", generation: 1, fingerprint: "x", seed: nil) }
            Task { try await store.recordPages(feed: "f", generation: 1, first: 1, pages: [NewPage(token: "2"), NewPage(token: "3"), NewPage(token: nil)]) }
        }
        let cursor = Task { @MainActor in try await store.setCursor(feed: "f", consumer: "a", generation: 1, cursor: 3) }
        try await cursor.value
        #expect(store.feed("f")?.pages.map(\.token) == ["2", "3", nil])
        #expect(store.cursor(feed: "f", consumer: "a")?.cursor == 3)
    }

    @Test func test_page_bodies_stay_within_the_budget_oldest_dropped_first() async throws {
        let fixture = try StoreFixture()
        let store = try fixture.open(options: .init(pageBodyBudget: 250))
        try await store.startGeneration(feed: "f", generation: 1, fingerprint: "x", seed: nil)
        for page in 1...5 {
            try await store.recordPage(feed: "f", generation: 1, page: page, token: nil, body: Array(repeating: UInt8(page), count: 100))
        }
        let feed = try #require(store.feed("f"))
        #expect(feed.bodiesDroppedThrough == 3)
        #expect(feed.pages.map(\.hasBody) == [false, false, false, true, true])
        #expect(try await store.pageBody(feed: "f", generation: 1, page: 5) == Array(repeating: 5, count: 100))
        #expect(try await store.pageBody(feed: "f", generation: 1, page: 2) == nil)
        store.close()
        let reopened = try fixture.open(options: .init(pageBodyBudget: 250))
        #expect(reopened.feed("f") == feed)
    }

    @Test func test_a_damaged_cursor_is_rejected_at_load_with_a_log_line() async throws {
        let fixture = try StoreFixture()
        let store = try await fixture.openWithFeed(pages: 3)
        try await store.setCursor(feed: "f", consumer: "good", generation: 1, cursor: 2)
        try await store.setCursor(feed: "f", consumer: "negative", generation: 1, cursor: 1)
        try await store.setCursor(feed: "f", consumer: "beyond", generation: 1, cursor: 1)
        try await store.startGeneration(feed: "g", generation: 1, fingerprint: "y", seed: nil)
        try await store.setCursor(feed: "g", consumer: "other", generation: 1, cursor: 0)
        try await store.executeOnWriter("UPDATE consumers SET cursor = -5 WHERE consumer IN ('negative', 'other'); UPDATE consumers SET cursor = 99 WHERE consumer = 'beyond'")
        store.close()
        let reopened = try fixture.open()
        #expect(reopened.consumers(of: "f").map(\.name) == ["good"])
        #expect(reopened.consumers(of: "g").isEmpty)
        reopened.close()
        // The rejected rows were removed, so the next start has nothing to say.
        let lines = fixture.sink.recorded.count
        _ = try fixture.open()
        #expect(fixture.sink.recorded.count == lines)
        let logged = fixture.sink.recorded
        #expect(logged.contains { $0.contains("cursor -5 of consumer negative is outside 0...3") })
        #expect(logged.contains { $0.contains("cursor 99 of consumer beyond is outside 0...3") })
    }

    @Test func test_a_second_opener_is_told_the_directory_and_the_pid_holding_it() throws {
        let fixture = try StoreFixture()
        let store = try fixture.open()
        let error = #expect(throws: StoreError.self) { try fixture.open() }
        #expect(error?.kind == .locked)
        #expect(error?.description.contains(fixture.directory) == true)
        #expect(error?.description.contains("pid \(getpid())") == true)
        #expect(throws: StoreError.self) { try StateMaintenance.repair(directory: fixture.directory) }
        store.close()
        _ = try fixture.open()
    }
}
