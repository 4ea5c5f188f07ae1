import FeedKit
import Foundation
import Testing
import TestSupport

@testable import FeedState

/// A state file written by someone else (issue 24): every number read from it is range-checked
/// where it is read, `check` says what it rejects, `check` only reads, and `repair` works in
/// bounded memory.
@Suite(.serialized) struct HostileStateTests {
    /// Every number the store reads, set to what no feedd writes.
    static let hostileValues: [(sql: String, rejected: String)] = [
        ("UPDATE feeds SET generation = 9223372036854775806", "generation 9223372036854775806 is outside 1...1099511627776"),
        ("UPDATE feeds SET generation = 1099511627777", "generation 1099511627777 is outside 1...1099511627776"),
        ("UPDATE feeds SET bodies_dropped_through = 9223372036854775807", "bodies_dropped_through 9223372036854775807 is outside 0...1099511627776"),
        ("UPDATE consumers SET cursor = 9223372036854775807", "cursor 9223372036854775807 of consumer dora is outside 0...3"),
        ("UPDATE consumers SET generation = -9223372036854775808", "consumer dora is in generation -9223372036854775808"),
        ("UPDATE pages SET page = 9223372036854775807 WHERE page = 3", "page 9223372036854775807 of generation 1 follows a gap after page 2"),
    ]

    @Test(arguments: hostileValues.indices)
    func test_a_number_out_of_range_is_rejected_when_read_and_check_names_it(_ index: Int) async throws {
        let (sql, rejected) = Self.hostileValues[index]
        let fixture = try StoreFixture()
        let store = try await fixture.openWithFeed(pages: 3)
        try await store.setCursor(feed: "f", consumer: "dora", generation: 1, cursor: 2)
        try await store.executeOnWriter(sql)
        store.close()

        let report = StateMaintenance.check(directory: fixture.directory)
        #expect(report.isHealthy)
        #expect(report.rejectedRows.contains { $0.contains(rejected) }, "\(report.rejectedRows)")

        let reopened = try fixture.open()
        #expect(fixture.sink.recorded.contains { $0.contains(rejected) })
        // What is left is within range: a new generation can always follow.
        let generation = reopened.feed("f")?.generation ?? 0
        #expect((0...StoredFeed.maximumGeneration).contains(generation))
        let pageCount = reopened.feed("f")?.pages.count ?? 0
        for consumer in reopened.consumers(of: "f") { #expect((0...pageCount).contains(consumer.cursor.cursor)) }
        try await reopened.startGeneration(feed: "f", generation: generation + 1, fingerprint: "next", seed: nil)
    }

    @Test func test_a_generation_past_the_last_one_is_refused_not_stored() async throws {
        let fixture = try StoreFixture()
        let store = try fixture.open()
        try await store.startGeneration(feed: "f", generation: StoredFeed.maximumGeneration, fingerprint: "x", seed: nil)
        let error = await #expect(throws: StoreError.self) {
            try await store.startGeneration(feed: "f", generation: StoredFeed.maximumGeneration + 1, fingerprint: "x", seed: nil)
        }
        #expect(error?.kind == .rejected)
        #expect(store.feed("f")?.generation == StoredFeed.maximumGeneration)
    }

    /// After `kill -9` the write-ahead log holds the last commits; `check` must leave it as it
    /// is, for `repair` to copy byte for byte (a read-write open would checkpoint it into
    /// `state.db` and delete it when it closes).
    @Test func test_check_only_reads_a_store_left_with_its_write_ahead_log() async throws {
        let fixture = try StoreFixture()
        // A copy of a store's files as a crash leaves them: state.db, state.db-wal and -shm,
        // taken while it is open and its log is not checkpointed.
        let store = try await fixture.openWithFeed(pages: 20)
        try await store.setCursor(feed: "f", consumer: "dora", generation: 1, cursor: 7)
        let crashed = fixture.temporary.path("crashed")
        try FileManager.default.createDirectory(atPath: crashed, withIntermediateDirectories: true)
        for suffix in ["", "-wal", "-shm"] {
            try FileManager.default.copyItem(atPath: fixture.databasePath + suffix, toPath: "\(crashed)/\(StateStore.databaseName)\(suffix)")
        }
        store.close()
        let files = ["", "-wal"].map { "\(crashed)/\(StateStore.databaseName)\($0)" }
        let before = try files.map { try Data(contentsOf: URL(fileURLWithPath: $0)) }
        #expect(before[1].count > 0, "the log holds the commits")

        let report = StateMaintenance.check(directory: crashed)
        #expect(report.isHealthy && report.consumers == 1 && report.pages == 20)
        let after = try files.map { try Data(contentsOf: URL(fileURLWithPath: $0)) }
        #expect(after == before, "state.db and state.db-wal are as they were")
    }

    /// A 24 MiB page body: the old repair held it whole, twice (the row, then its bound copy);
    /// now it is copied 64 KiB at a time.
    @Test func test_repair_copies_a_large_page_body_in_bounded_memory() async throws {
        let fixture = try StoreFixture()
        let options = StateStore.Options(pageBodyBudget: 64 << 20)
        let store = try fixture.open(options: options)
        try await store.startGeneration(feed: "f", generation: 1, fingerprint: "shape-1", seed: nil)
        var body = [UInt8](repeating: 7, count: 24 << 20)
        for offset in stride(from: 0, to: body.count, by: 4093) { body[offset] = UInt8(truncatingIfNeeded: offset >> 12) }
        try await store.recordPage(feed: "f", generation: 1, page: 1, token: "t", body: body)
        store.close()

        let growth = try Self.peakGrowth { _ = try StateMaintenance.repair(directory: fixture.directory) }
        #expect(growth < 12 << 20, "repair took \(growth >> 20) MiB more at its peak")
        let repaired = try fixture.open(options: options)
        #expect(try await repaired.pageBody(feed: "f", generation: 1, page: 1) == body)
    }

    /// How far the process's resident memory peaked above where it was while `body` ran
    /// (VmHWM, reset first through /proc/self/clear_refs).
    private static func peakGrowth(_ body: () throws -> Void) throws -> Int {
        func field(_ name: String) throws -> Int {
            let status = try String(contentsOfFile: "/proc/self/status", encoding: .utf8)
            let line = status.split(separator: "\n").first { $0.hasPrefix(name + ":") } ?? ""
            return (Int(line.split(separator: " ").dropFirst().first ?? "0") ?? 0) << 10
        }
        try "5".write(toFile: "/proc/self/clear_refs", atomically: false, encoding: .utf8)
        let start = try field("VmRSS")
        try body()
        return try field("VmHWM") - start
    }
}
