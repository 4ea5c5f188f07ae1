import FeedKit
import Foundation
@testable import RSSAdapter
import Testing
import TestSupport

/// A polled feed remembers every entry it published in a generation, however many, across
/// restarts (issue 23, item 7).
@Suite struct PublishedEntriesTests {
    static func document(entries: Int) -> String {
        var text = #"<rss version="2.0"><channel><title>Big</title>"#
        for index in 0..<entries { text += "<item><guid>id-\(index)</guid><title>\(index)</title></item>" }
        return text + "</channel></rss>"
    }

    /// Walks the feed as the daemon does: page after page, and at each `.notYet` one more poll,
    /// until `polls` polls have found nothing new. Returns every id published.
    static func walk(_ source: RSSSource, polls: Int, generation: Int = 1, from token: String? = nil) async throws -> [String] {
        var token = token
        var page = 1
        var published: [String] = []
        var quietPolls = 0
        while quietPolls < polls {
            switch try await source.fetch(PageRequest(page: page, token: token, generation: generation, seed: "s")) {
            case .notYet:
                quietPolls += 1
            case .page(let items, let next):
                published += items.map(\.id)
                guard case .more(let nextToken) = next else { throw TestFailure("a polled feed ended: \(next)") }
                token = nextToken
                page += 1
            }
        }
        return published
    }

    static func source(_ upstream: LoopbackUpstream, state: String?, pageSize: Int = 1_000) throws -> RSSSource {
        try RSSSource(
            options: AdapterOptions(feed: "big", values: ["url": .string(upstream.baseURL + "/feed.xml"), "page_size": .integer(Int64(pageSize))]),
            context: AdapterConformance.context(poll: .seconds(60), stateDirectory: state))
    }

    @Test func a_12000_entry_document_polled_5_times_publishes_12000_entries() async throws {
        let upstream = try LoopbackUpstream()
        // No validators: every poll gets the whole document again, as from a server without ETag.
        upstream.setResource("/feed.xml", .text(Self.document(entries: 12_000), contentType: "application/rss+xml"))
        let published = try await Self.walk(try Self.source(upstream, state: nil), polls: 5)
        #expect(published.count == 12_000)
        #expect(Set(published).count == 12_000)
        #expect(upstream.received.count == 6, "the first read and five polls")
    }

    @Test func what_was_published_survives_a_restart_and_a_new_generation_starts_over() async throws {
        let upstream = try LoopbackUpstream()
        let state = try TemporaryDirectory()
        upstream.setResource("/feed.xml", .text(Self.document(entries: 10_500), contentType: "application/rss+xml"))
        #expect(try await Self.walk(try Self.source(upstream, state: state.path), polls: 1).count == 10_500)
        let file = state.path + "/published-entries"
        let size = try #require(try FileManager.default.attributesOfItem(atPath: file)[.size] as? Int)
        #expect(size < 10_500 * 8 + 64, "a hash per entry, not the entry: \(size) bytes")
        let restarted = try Self.source(upstream, state: state.path)
        #expect(try await Self.walk(restarted, polls: 3, from: "2.1").isEmpty, "nothing is published again after a restart")
        #expect(try await Self.walk(restarted, polls: 1, generation: 2).count == 10_500, "a refresh pages the whole document")
    }

    @Test func a_restart_in_the_middle_of_a_batch_goes_on_with_what_was_never_published() async throws {
        let upstream = try LoopbackUpstream()
        let state = try TemporaryDirectory()
        upstream.setResource("/feed.xml", .text(Self.document(entries: 30), contentType: "application/rss+xml"))
        let before = try Self.source(upstream, state: state.path, pageSize: 10)
        guard case .page(let first, .more(let token)) = try await before.fetch(PageRequest(page: 1, token: nil, generation: 1, seed: "s")) else {
            throw TestFailure("no first page")
        }
        let after = try Self.source(upstream, state: state.path, pageSize: 10)
        let rest = try await Self.walk(after, polls: 1, from: token)
        #expect(rest.count == 20 && Set(rest).isDisjoint(with: first.map(\.id)), "the page after the one served, however the batch is rebuilt")
    }

    @Test func an_older_feedds_list_of_ids_is_taken_over_and_a_torn_last_record_is_ignored() async throws {
        let upstream = try LoopbackUpstream()
        let state = try TemporaryDirectory()
        upstream.setResource("/feed.xml", .text(Self.document(entries: 3), contentType: "application/rss+xml"))
        try #"{"generation":1,"seen":["id-0","id-1"]}"#.write(toFile: state.path + "/seen-entries.json", atomically: true, encoding: .utf8)
        #expect(try await Self.walk(try Self.source(upstream, state: state.path), polls: 1) == ["id-2"])
        #expect(!FileManager.default.fileExists(atPath: state.path + "/seen-entries.json"))
        let handle = try FileHandle(forWritingTo: URL(fileURLWithPath: state.path + "/published-entries"))
        try handle.seekToEnd()
        try handle.write(contentsOf: [1, 2, 3])
        try handle.close()
        #expect(try await Self.walk(try Self.source(upstream, state: state.path), polls: 1, from: "2.1").isEmpty)
    }

    @Test func a_file_that_is_not_a_list_of_published_entries_is_reported_and_replaced() async throws {
        let upstream = try LoopbackUpstream()
        let state = try TemporaryDirectory()
        upstream.setResource("/feed.xml", .text(Self.document(entries: 2), contentType: "application/rss+xml"))
        try "garbage".write(toFile: state.path + "/published-entries", atomically: true, encoding: .utf8)
        let log = WarningsSink()
        let source = try RSSSource(
            options: AdapterOptions(feed: "big", values: ["url": .string(upstream.baseURL + "/feed.xml")]),
            context: AdapterConformance.context(poll: .seconds(60), sink: log, stateDirectory: state.path))
        #expect(try await Self.walk(source, polls: 1).count == 2)
        #expect(log.messages.withLock { $0 }.contains { $0.contains("is not a list of published entries") })
    }
}

/// The messages an adapter logs.
private struct WarningsSink: LogSink {
    let messages = Locked<[String]>([])

    func write(_ level: LogLevel, _ message: String) {
        messages.withLock { $0.append(message) }
    }
}
