import FeedKit
import Foundation
import Testing
import TestSupport

@testable import FeedState

/// The store's connection writes its write-ahead log through a VFS that gathers the writes
/// (`gathering_vfs.h`): what a commit confirmed is in the file, for any other connection to read,
/// and a write that fails when the gathered bytes go to the file fails the commit.
@Suite struct LogWriteGatheringTests {
    /// Bytes that differ from page to page and along the page.
    private static func body(page: Int, count: Int) -> [UInt8] {
        (0..<count).map { UInt8(truncatingIfNeeded: $0 &* 31 &+ page &* 7) }
    }

    @Test(.timeLimit(.minutes(1))) func test_another_connection_reads_every_confirmed_body_while_the_store_is_open() async throws {
        let fixture = try StoreFixture()
        let store = try fixture.open(options: .init(pageBodyBudget: 64 << 20))
        try await store.startGeneration(feed: "f", generation: 1, fingerprint: "shape-1", seed: nil)
        // Another process's connection (`feedd state check` beside the daemon), on the default VFS.
        let reader = try SQLiteConnection(path: fixture.databasePath, create: false, readOnly: true)
        // Bodies smaller than the buffer, larger than it, and a commit larger than SQLite's page
        // cache (2 MiB), whose first frames go to the log before the commit.
        let commits: [[Int]] = [[100], [5_000, 70_000], [300_000], [1_200_000], [1_500_000, 1_500_000, 900]]
        var page = 0
        for sizes in commits {
            let first = page + 1
            let pages = sizes.map { count in
                page += 1
                return NewPage(token: "t\(page + 1)", body: Self.body(page: page, count: count))
            }
            try await store.recordPages(feed: "f", generation: 1, first: first, pages: pages)
            for (offset, count) in sizes.enumerated() {
                #expect(try reader.pageBody(feed: "f", generation: 1, page: first + offset) == Self.body(page: first + offset, count: count), "page \(first + offset)")
            }
        }
    }

    @Test(.timeLimit(.minutes(1))) func test_a_full_disk_met_by_a_commits_gathered_writes_fails_that_commit() async throws {
        let fixture = try StoreFixture()
        guard let disk = SmallDisk(in: fixture.temporary) else { return }
        defer { disk.unmount() }
        let directory = "\(disk.path)/state"
        let store = try await fixture.openWithFeed(pages: 3, directory: directory)
        let stored = Self.body(page: 4, count: 64 << 10)
        try await store.recordPage(feed: "f", generation: 1, page: 4, token: "t5", body: stored)
        // The next commit's frames, some 110 KiB, all wait in the buffer (128 KiB) and meet the
        // full disk when the commit's sync sends them.
        let filler = disk.fill()
        let refused = Self.body(page: 5, count: 96 << 10)
        let error = await #expect(throws: StoreError.self) {
            try await store.recordPage(feed: "f", generation: 1, page: 5, token: "t6", body: refused)
        }
        #expect(error?.kind == .unavailable)
        #expect(error?.description.contains("the disk is full") == true)
        #expect(store.feed("f")?.pages.count == 4)
        // Room again: the page is stored this time, and reopening finds each confirmed page.
        try FileManager.default.removeItem(atPath: filler)
        try await store.recordPage(feed: "f", generation: 1, page: 5, token: "t6", body: refused)
        store.close()
        let reopened = try fixture.open(directory)
        #expect(reopened.feed("f")?.pages.map(\.token) == ["t2", "t3", "t4", "t5", "t6"])
        #expect(try await reopened.pageBody(feed: "f", generation: 1, page: 4) == stored)
        #expect(try await reopened.pageBody(feed: "f", generation: 1, page: 5) == refused)
    }
}
