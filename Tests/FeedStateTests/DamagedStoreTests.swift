import FeedKit
import Foundation
import Testing
import TestSupport

@testable import FeedState

/// Truncated, bit-flipped and emptied store files: a clear error at open, never a silent fresh
/// start, and `repair` salvages what is readable.
@Suite struct DamagedStoreTests {
    /// A closed store with `consumers` consumers on feed `f` (checkpointed into state.db on close).
    private func populatedStore(consumers: Int = 200) async throws -> StoreFixture {
        let fixture = try StoreFixture()
        let store = try await fixture.openWithFeed(pages: 50)
        try await withThrowingTaskGroup(of: Void.self) { group in
            for index in 0..<consumers {
                group.addTask { try await store.setCursor(feed: "f", consumer: "c\(index)", generation: 1, cursor: index % 50) }
            }
            try await group.waitForAll()
        }
        store.close()
        return fixture
    }

    private func damage(_ path: String, _ change: (inout [UInt8]) -> Void) throws {
        var bytes = [UInt8](try Data(contentsOf: URL(fileURLWithPath: path)))
        change(&bytes)
        try Data(bytes).write(to: URL(fileURLWithPath: path))
    }

    private func expectDamagedAtOpen(_ fixture: StoreFixture) {
        let error = #expect(throws: StoreError.self) { try fixture.open() }
        #expect(error?.kind == .damaged)
        #expect(error?.description.contains(fixture.databasePath) == true)
        #expect(error?.description.contains("feedd state repair") == true)
        #expect(StateMaintenance.check(directory: fixture.directory).isHealthy == false)
    }

    @Test func test_an_emptied_store_is_an_error_and_repair_starts_it_afresh_keeping_the_file() async throws {
        let fixture = try await populatedStore()
        try damage(fixture.databasePath) { $0.removeAll() }
        expectDamagedAtOpen(fixture)
        let report = try StateMaintenance.repair(directory: fixture.directory)
        #expect(report.keptAs.count == 1)
        #expect(FileManager.default.fileExists(atPath: report.keptAs[0]))
        #expect(report.consumers == 0)
        #expect(try fixture.open().consumers(of: "f").isEmpty)
    }

    @Test func test_a_truncated_store_is_an_error_and_repair_salvages_the_readable_rows() async throws {
        let fixture = try await populatedStore(consumers: 400)
        // The last page goes: most consumers' rows are on the pages before it.
        try damage(fixture.databasePath) { $0.removeLast(4096) }
        expectDamagedAtOpen(fixture)
        let report = try StateMaintenance.repair(directory: fixture.directory)
        #expect(report.keptAs.allSatisfy { FileManager.default.fileExists(atPath: $0) })
        let store = try fixture.open()
        let salvaged = store.consumers(of: "f")
        #expect(salvaged.count > 100)
        // Whatever was salvaged is exactly what had been stored.
        for (name, cursor) in salvaged { #expect(cursor.cursor == Int(name.dropFirst())! % 50) }
        #expect(StateMaintenance.check(directory: fixture.directory).isHealthy)
    }

    @Test func test_a_bit_flipped_header_or_btree_page_is_an_error_at_open() async throws {
        for offset in [0, 4096 + 0, 2 * 4096 + 3] {
            let fixture = try await populatedStore()
            try damage(fixture.databasePath) { $0[offset] ^= 0x40 }
            expectDamagedAtOpen(fixture)
            _ = try StateMaintenance.repair(directory: fixture.directory)
            #expect(StateMaintenance.check(directory: fixture.directory).isHealthy)
        }
    }

    @Test func test_check_reports_integrity_and_counts() async throws {
        let fixture = try await populatedStore(consumers: 7)
        let report = StateMaintenance.check(directory: fixture.directory)
        #expect(report.isHealthy)
        #expect((report.feeds, report.pages, report.consumers) == (1, 50, 7))
        #expect(StateMaintenance.check(directory: fixture.temporary.path("nothing")).isNew)
    }
}
