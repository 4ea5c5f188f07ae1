import FeedKit
import Foundation
@testable import RSSAdapter
import Testing
import TestSupport

/// The `rss` adapter against a loopback server (SPEC §9).
@Suite struct RSSSourceTests {
    static func source(_ upstream: LoopbackUpstream, path: String = "/feed.xml", pageSize: Int = 20, poll: Duration? = nil, state: String? = nil) throws -> RSSSource {
        try RSSSource(
            options: AdapterOptions(feed: "news", values: ["url": .string(upstream.baseURL + path), "page_size": .integer(Int64(pageSize))]),
            context: AdapterConformance.context(poll: poll, stateDirectory: state))
    }

    static func serve(_ upstream: LoopbackUpstream, _ document: String, entityTag: String? = nil) {
        upstream.setResource("/feed.xml", .text(document, contentType: "application/rss+xml", entityTag: entityTag))
    }

    static func request(_ page: Int, _ token: String?, generation: Int = 1) -> PageRequest {
        PageRequest(page: page, token: token, generation: generation, seed: "test")
    }

    static func items(_ result: FetchResult) throws -> (ids: [String], next: NextPage) {
        guard case .page(let items, let next) = result else { throw TestFailure("expected a page, got \(result)") }
        return (items.map(\.id), next)
    }

    static let fiveEntries = Documents.rss2((1...5).map { ("g\($0)", "Entry \($0)", "Sun, 0\($0) Nov 2026 10:00:00 GMT") })

    @Test func conforms() async throws {
        let upstream = try LoopbackUpstream()
        Self.serve(upstream, Self.fiveEntries)
        try await AdapterConformance.check(
            try Self.source(upstream, pageSize: 2), pages: .finite(3), failing: try Self.source(upstream, path: "/missing.xml"))
    }

    @Test func its_pages_are_never_taken_to_come_back_alike_so_the_daemon_keeps_them() throws {
        let upstream = try LoopbackUpstream()
        #expect(try !Self.source(upstream).reproducesPages)
        #expect(try !Self.source(upstream, poll: .seconds(60)).reproducesPages)
    }

    @Test func the_first_fetch_pages_entries_newest_first_and_without_poll_the_last_page_ends() async throws {
        let upstream = try LoopbackUpstream()
        Self.serve(upstream, Documents.rss2([("old", "Old", "Sun, 01 Nov 2026 10:00:00 GMT"), ("new", "New", "Tue, 03 Nov 2026 10:00:00 GMT"),
            ("mid", "Mid", "2 Nov 2026 10:00 GMT")]))
        let source = try Self.source(upstream, pageSize: 2)
        let first = try Self.items(try await source.fetch(Self.request(1, nil)))
        #expect(first.ids == ["new", "mid"] && first.next == .more(token: "1.2"))
        let second = try Self.items(try await source.fetch(Self.request(2, "1.2")))
        #expect(second.ids == ["old"] && second.next == .end)
    }

    @Test func entries_of_several_batches_are_sorted_together_ties_and_undated_entries_in_document_order() async throws {
        // 700 entries: the reader builds them in batches of 256 on other threads, and the sort
        // takes them across batches; nine dates repeat in every batch, and every eleventh entry
        // has no date it can read.
        #expect(CapturedBatch.size < 350)
        let entries = (0..<700).map { index in
            (guid: "g\(index)", title: "Entry \(index)", date: index % 11 == 0 ? "" : "\(1 + index % 9) Nov 2026 10:00:00 GMT")
        }
        let upstream = try LoopbackUpstream()
        Self.serve(upstream, Documents.rss2(entries))
        let page = try Self.items(try await Self.source(upstream, pageSize: 1_000).fetch(Self.request(1, nil)))
        let expected = (0..<700).sorted { a, b in
            let (dayA, dayB) = (a % 11 == 0 ? 0 : 1 + a % 9, b % 11 == 0 ? 0 : 1 + b % 9)
            return dayA != dayB ? dayA > dayB : a < b
        }
        #expect(page.ids == expected.map { "g\($0)" } && page.next == .end)
    }

    @Test func rss_2_items_read_namespaces_entities_cdata_and_html_as_text() async throws {
        let entries = try FeedDocument.entries(in: Array(Documents.richRSS2.utf8))
        #expect(entries.count == 2)
        #expect(entries[0].item == Item(id: "tag:example.com,2026:1", data: [
            "title": "Fish & Chips <today> été", "link": "https://example.com/posts/1",
            "published": "2026-11-30T04:00:00Z", "updated": nil,
            "summary": "<p>Escaped <b>HTML</b></p>", "author": "Zoë Example", "categories": ["food", "uk"],
        ]))
        #expect(entries[1].item == Item(id: "https://example.com/posts/2", data: [
            "title": nil, "link": "https://example.com/posts/2", "published": "2026-11-29T15:30:00.250Z",
            "updated": "2026-11-29T15:30:00.250Z", "summary": "<p>Only content</p>", "author": nil, "categories": nil,
        ]), "content:encoded stands in for a missing description, dc:date for pubDate and updated, the link for the guid")
    }

    @Test func rss_1_rdf_items_are_read() throws {
        let entries = try FeedDocument.entries(in: Array(Documents.rdf.utf8))
        #expect(entries.map(\.item) == [Item(id: "https://example.org/a", data: [
            "title": "RDF entry", "link": "https://example.org/a", "published": "2026-11-28T00:00:00Z", "updated": "2026-11-28T00:00:00Z",
            "summary": "Plain text", "author": "An Author", "categories": ["science"],
        ])])
    }

    @Test func atom_entries_are_read() throws {
        let entries = try FeedDocument.entries(in: Array(Documents.atom.utf8))
        #expect(entries.map(\.item) == [
            Item(id: "urn:uuid:1225c695-cfb8-4ebb-aaaa-80da344efa6a", data: [
                "title": "A <em>title</em>", "link": "https://example.net/1", "published": "2026-11-30T06:00:00Z",
                "updated": "2026-11-30T12:00:00Z", "summary": #"<p class="x">Hello &amp; <b>world</b></p>"#,
                "author": "Entry Author", "categories": ["news"],
            ]),
            Item(id: "urn:2", data: [
                "title": "Undated", "link": nil, "published": nil, "updated": nil, "summary": "Short", "author": nil, "categories": nil,
            ]),
        ])
    }

    @Test(arguments: [
        ("<html><body>Not a feed</body></html>", "not an RSS, Atom or JSON Feed document (its root element is <html>)"),
        ("<rss><channel><item><title>unclosed</channel></rss>", "not well-formed XML at line 1, column 46"),
        ("<rss><channel><item><title>&nbsp;</title></item></channel></rss>", "not well-formed XML at line 1, column 34"),
        ("{\"json\": true}", #"JSON, but not a JSON Feed (its "version" is not https://jsonfeed.org/version/1 or 1.1)"#),
        ("[\"json\"]", "not well-formed XML at line 1"),
    ])
    func a_document_that_is_not_rss_or_atom_is_rejected_with_the_url(_ body: String, _ reason: String) async throws {
        let upstream = try LoopbackUpstream()
        Self.serve(upstream, body)
        do {
            _ = try await Self.source(upstream).fetch(Self.request(1, nil))
            Issue.record("accepted \(body)")
        } catch let error as SourceError {
            #expect(error.kind == .rejected)
            #expect(error.message.hasPrefix("the document from \(upstream.baseURL)/feed.xml is \(reason)"), "\(error.message)")
        }
    }

    /// Enough entries that the document is read as it downloads (its start shows UTF-8 XML).
    static let longDocument = Documents.rss2((1...40).map { ("g\($0)", "Entry \($0) été", "Sun, 01 Nov 2026 10:\(10 + $0):00 GMT") })

    @Test func a_document_whose_rest_comes_later_is_read_whole() async throws {
        let upstream = try LoopbackUpstream()
        let bytes = Array(Self.longDocument.utf8)
        upstream.inject(.held(body: bytes, sentFirst: bytes.count / 2))
        let source = try Self.source(upstream, pageSize: 100)
        let fetch = Task { try await source.fetch(Self.request(1, nil)) }
        try upstream.waitForRequests(1)
        upstream.releaseHeldBodies()
        let page = try Self.items(try await fetch.value)
        #expect(page.ids == (1...40).reversed().map { "g\($0)" } && page.next == .end)
    }

    @Test func a_document_cut_off_mid_way_is_the_transfer_failure_not_a_malformed_document() async throws {
        let upstream = try LoopbackUpstream()
        let bytes = Array(Self.longDocument.utf8)
        upstream.inject(.cut(body: bytes, sentFirst: bytes.count / 2))
        do {
            _ = try await Self.source(upstream).fetch(Self.request(1, nil))
            Issue.record("a cut document was read")
        } catch let error as SourceError {
            #expect(error.kind == .transient, "retried with backoff, as a broken connection is")
            #expect(error.message.hasPrefix("GET \(upstream.baseURL)/feed.xml: "), "\(error.message)")
        }
    }

    @Test func a_document_in_another_encoding_is_read_whole_and_converted() async throws {
        let upstream = try LoopbackUpstream()
        let latin1 = Array(Self.longDocument.data(using: .isoLatin1)!)
        upstream.setResource("/feed.xml", .init(body: latin1, contentType: "application/rss+xml; charset=ISO-8859-1"))
        let result = try await Self.source(upstream, pageSize: 100).fetch(Self.request(1, nil))
        guard case .page(let items, _) = result else { throw TestFailure("expected a page, got \(result)") }
        #expect(items.count == 40 && items.last?.data["title"] == "Entry 1 été")
    }

    @Test func each_poll_publishes_only_entries_never_seen_newest_first_and_a_304_publishes_nothing() async throws {
        let upstream = try LoopbackUpstream()
        Self.serve(upstream, Documents.rss2([("a", "A", "Sun, 01 Nov 2026 10:00:00 GMT"), ("b", "B", "Mon, 02 Nov 2026 10:00:00 GMT")]), entityTag: "\"1\"")
        let source = try Self.source(upstream, pageSize: 2, poll: .seconds(1))
        let first = try Self.items(try await source.fetch(Self.request(1, nil)))
        #expect(first.ids == ["b", "a"] && first.next == .more(token: "2.1"), "a polled feed never ends")
        #expect(try await source.fetch(Self.request(2, "2.1")) == .notYet)
        #expect(upstream.received.last?.headers["if-none-match"] == "\"1\"")
        // Re-ordered, "a" edited, three new entries: only the new ones, newest first, two a page.
        Self.serve(upstream, Documents.rss2([
            ("c", "C", "Tue, 03 Nov 2026 10:00:00 GMT"), ("a", "A, edited", "Fri, 06 Nov 2026 10:00:00 GMT"),
            ("e", "E", "Thu, 05 Nov 2026 10:00:00 GMT"), ("b", "B", "Mon, 02 Nov 2026 10:00:00 GMT"), ("d", "D", "Wed, 04 Nov 2026 10:00:00 GMT"),
        ]), entityTag: "\"2\"")
        let second = try Self.items(try await source.fetch(Self.request(2, "2.1")))
        #expect(second.ids == ["e", "d"] && second.next == .more(token: "2.2"))
        #expect(try Self.items(try await source.fetch(Self.request(2, "2.1"))).ids == ["e", "d"], "a page asked for again is the same")
        let third = try Self.items(try await source.fetch(Self.request(3, "2.2")))
        #expect(third.ids == ["c"] && third.next == .more(token: "3.1"))
        #expect(try await source.fetch(Self.request(4, "3.1")) == .notYet)
    }

    @Test func the_ids_seen_survive_a_restart_and_a_new_generation_starts_over() async throws {
        let upstream = try LoopbackUpstream()
        let state = try TemporaryDirectory()
        let directory = state.path + "/news"
        Self.serve(upstream, Documents.rss2([("a", "A", "Sun, 01 Nov 2026 10:00:00 GMT")]))
        let before = try Self.source(upstream, poll: .seconds(1), state: directory)
        #expect(try Self.items(try await before.fetch(Self.request(1, nil))).ids == ["a"])
        Self.serve(upstream, Documents.rss2([("b", "B", "Mon, 02 Nov 2026 10:00:00 GMT"), ("a", "A", "Sun, 01 Nov 2026 10:00:00 GMT")]))
        let after = try Self.source(upstream, poll: .seconds(1), state: directory)
        #expect(try Self.items(try await after.fetch(Self.request(2, "2.1"))).ids == ["b"], "a is not published again after a restart")
        #expect(FileManager.default.fileExists(atPath: directory + "/published-entries"))
        #expect(try Self.items(try await after.fetch(Self.request(1, nil, generation: 2))).ids == ["b", "a"], "a refresh pages the whole document")
    }
}

/// The reader keeps no DTD declarations: nothing is expanded (no entity bombs) and nothing fetched.
@Suite struct XMLSafetyTests {
    @Test(arguments: [
        #"<!DOCTYPE rss [<!ENTITY a "AAA"><!ENTITY b "&a;&a;&a;&a;&a;&a;&a;&a;">]>"# + "\n<rss><channel><item><title>&b;</title></item></channel></rss>",
        #"<!DOCTYPE rss [<!ENTITY x SYSTEM "file:///etc/passwd">]>"# + "\n<rss><channel><item><title>&x;</title></item></channel></rss>",
    ])
    func a_document_using_entities_its_dtd_declares_is_refused(_ document: String) {
        #expect(throws: FeedDocumentError.self) { try FeedDocument.entries(in: Array(document.utf8)) }
    }

    @Test func predefined_entities_and_character_references_in_attributes_and_text_are_decoded() throws {
        let document = #"<feed xmlns="http://www.w3.org/2005/Atom"><entry><id>1</id><link href="https://x/?a=1&amp;b=&#50;"/></entry></feed>"#
        let link = try FeedDocument.entries(in: Array(document.utf8)).first?.item.data["link"]?.stringValue
        #expect(link == "https://x/?a=1&b=2", "\(link ?? "nil")")
    }
}
