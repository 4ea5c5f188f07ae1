import FeedKit
import Foundation
import Testing
import TestSupport

@testable import FeedState

/// A full disk and an unwritable store: every write that was confirmed survives reopening, no
/// write that failed is reported as stored, in memory or on disk, and writes work again once the
/// disk has room.
@Suite(.serialized) struct DiskFaultTests {
    /// What a run of writes confirmed: the last confirmed cursor of each consumer.
    private struct Confirmed {
        var cursors: [String: Int] = [:]
        var failures: [StoreError] = []
    }

    /// Long names, so that many consumers need many database pages.
    private static func consumer(_ index: Int) -> String { "consumer-with-a-name-of-some-length-\(index)" }

    /// Each consumer moves its cursor forward one page at a time until a write fails or `until` says stop.
    private func ack(_ store: StateStore, consumers: Int, through pages: Int) async -> Confirmed {
        await withTaskGroup(of: (String, Int, StoreError?).self) { group in
            for index in 0..<consumers {
                group.addTask {
                    let name = Self.consumer(index)
                    var last = store.cursor(feed: "f", consumer: name)?.cursor ?? 0
                    for cursor in (last + 1)...max(last + 1, pages) where cursor <= pages {
                        do throws(StoreError) {
                            try await store.setCursor(feed: "f", consumer: name, generation: 1, cursor: cursor)
                            last = cursor
                        } catch {
                            return (name, last, error)
                        }
                    }
                    return (name, last, nil)
                }
            }
            var confirmed = Confirmed()
            for await (name, cursor, error) in group {
                confirmed.cursors[name] = cursor
                if let error { confirmed.failures.append(error) }
            }
            return confirmed
        }
    }

    private func expectStored(_ confirmed: Confirmed, in store: StateStore) {
        for (name, cursor) in confirmed.cursors {
            #expect(store.cursor(feed: "f", consumer: name)?.cursor ?? 0 == cursor, "consumer \(name)")
        }
    }

    @Test func test_a_full_database_rolls_back_the_write_and_keeps_every_confirmed_one() async throws {
        let fixture = try StoreFixture()
        let store = try await fixture.openWithFeed(pages: 30)
        // SQLITE_FULL, deterministically: the database may not grow past its current pages.
        try await store.executeOnWriter("PRAGMA wal_checkpoint(TRUNCATE)")
        let pageCount = try await store.onWriterThread { connection throws(StoreError) in try connection.textRows("PRAGMA page_count").first ?? "0" }
        try await store.executeOnWriter("PRAGMA max_page_count = \(pageCount)")
        let confirmed = await ack(store, consumers: 1000, through: 30)
        #expect(!confirmed.failures.isEmpty)
        #expect(confirmed.failures.allSatisfy { $0.kind == .unavailable && $0.description.contains("the disk is full") })
        expectStored(confirmed, in: store)
        // Room again: writing resumes where it stopped.
        try await store.executeOnWriter("PRAGMA max_page_count = 1073741823")
        let resumed = await ack(store, consumers: 1000, through: 30)
        #expect(resumed.failures.isEmpty)
        store.close()
        expectStored(resumed, in: try fixture.open())
    }

    @Test func test_a_full_tmpfs_filled_while_acking_then_freed() async throws {
        let fixture = try StoreFixture()
        let mountPoint = fixture.temporary.path("small")
        try FileManager.default.createDirectory(atPath: mountPoint, withIntermediateDirectories: true)
        guard runCommand(["mount", "-t", "tmpfs", "-o", "size=16m", "tmpfs", mountPoint]) else {
            // Not root, or no mount permission in this container: the max_page_count test above
            // covers SQLITE_FULL; this one needs a real small file system.
            print("skipped: cannot mount a tmpfs here")
            return
        }
        defer { runCommand(["umount", "-l", mountPoint]) }
        let directory = "\(mountPoint)/state"
        let store = try await fixture.openWithFeed(pages: 400, directory: directory)
        // Acks confirmed while there is room; on a busy machine the race below may fill the disk
        // before any of its own acks commits.
        let beforeFull = await ack(store, consumers: 50, through: 5)
        #expect(beforeFull.failures.isEmpty)
        // Leave the store 1 MiB, then write page bodies and acks until the disk is full.
        let filler = "\(mountPoint)/filler"
        let free = try #require(try FileManager.default.attributesOfFileSystem(forPath: mountPoint)[.systemFreeSize] as? Int)
        try Data(count: free - (1 << 20)).write(to: URL(fileURLWithPath: filler))
        async let bodyFailure = Self.recordBodies(store, pages: 400)
        let confirmed = await ack(store, consumers: 50, through: 400)
        #expect(await bodyFailure?.description.contains("the disk is full") == true)
        #expect(!confirmed.failures.isEmpty)
        #expect(confirmed.cursors.values.contains { $0 > 0 })
        expectStored(confirmed, in: store)
        // Freed: every confirmed ack is there after reopening, and writing goes on.
        try FileManager.default.removeItem(atPath: filler)
        store.close()
        let reopened = try fixture.open(directory)
        expectStored(confirmed, in: reopened)
        try await reopened.startGeneration(feed: "f", generation: 2, fingerprint: "shape-2", seed: nil)
        try await reopened.recordPage(feed: "f", generation: 2, page: 1, token: nil, body: nil)
        try await reopened.setCursor(feed: "f", consumer: Self.consumer(0), generation: 2, cursor: 1)
        reopened.close()
        let again = try fixture.open(directory)
        #expect(again.cursor(feed: "f", consumer: Self.consumer(0)) == StoredCursor(generation: 2, cursor: 1))
        #expect(again.consumers(of: "f").allSatisfy { $0.name == Self.consumer(0) || $0.cursor == StoredCursor(generation: 2, cursor: 0) })
    }

    /// Stores 8 KiB bodies page by page until a write fails; returns that failure.
    private static func recordBodies(_ store: StateStore, pages: Int) async -> StoreError? {
        for page in 1...pages {
            do throws(StoreError) {
                try await store.recordPage(feed: "f", generation: 1, page: page, token: "t\(page + 1)", body: Array(repeating: 7, count: 8 << 10))
            } catch {
                return error
            }
        }
        return nil
    }

    /// Root ignores permissions, and neither a read-only remount (refused while the store has
    /// its files open for writing) nor `chattr +i` stops writes through descriptors already
    /// open. So: writes through a connection told to refuse them (`query_only`, which fails like
    /// a read-only file), and a store opened on a read-only file system.
    @Test func test_an_unwritable_store_fails_writes_with_nothing_changed() async throws {
        let fixture = try StoreFixture()
        let store = try await fixture.openWithFeed(pages: 20)
        let first = await ack(store, consumers: 10, through: 5)
        try await store.executeOnWriter("PRAGMA query_only = 1")
        let refused = await ack(store, consumers: 10, through: 10)
        #expect(refused.failures.count == 10)
        #expect(refused.failures.allSatisfy { $0.kind == .unavailable && $0.description.contains("not writable") })
        expectStored(first, in: store)
        try await store.executeOnWriter("PRAGMA query_only = 0")
        await #expect(throws: Never.self) { try await store.startGeneration(feed: "f", generation: 2, fingerprint: "x", seed: nil) }
        store.close()
        #expect(try fixture.open().feed("f")?.generation == 2)
    }

    @Test func test_a_store_on_a_read_only_file_system_is_a_clear_error_at_start() async throws {
        let fixture = try StoreFixture()
        let mountPoint = fixture.temporary.path("readonly")
        try FileManager.default.createDirectory(atPath: mountPoint, withIntermediateDirectories: true)
        guard runCommand(["mount", "-t", "tmpfs", "-o", "size=1m", "tmpfs", mountPoint]) else {
            print("skipped: cannot mount a tmpfs here")
            return
        }
        defer { runCommand(["umount", "-l", mountPoint]) }
        let directory = "\(mountPoint)/state"
        try await fixture.openWithFeed(pages: 3, directory: directory).close()
        #expect(runCommand(["mount", "-o", "remount,ro", mountPoint]))
        let error = #expect(throws: StoreError.self) { try fixture.open(directory) }
        #expect(error?.kind == .unavailable)
        #expect(error?.description.contains(directory) == true)
    }
}
