import FeedKit
@testable import RSSAdapter
import Testing
import TestSupport

/// The bytes of the `rss` adapter's pages, as the daemon writes them into page lines, for
/// documents of every format and most of what a field can hold: guarded by digests recorded from
/// main (0f041ce), before the pages were written straight from the batches' captured text, so that
/// any change to what a subscriber receives, down to a byte, fails here.
@Suite struct PageBytesTests {
    /// Every page of `document` served as `page_size` items, written as page lines write them.
    static func pageBytes(_ document: String, pageSize: Int, html: String = "html", contentType: String = "application/rss+xml") async throws -> [UInt8] {
        let upstream = try LoopbackUpstream()
        upstream.setResource("/feed.xml", .text(document, contentType: contentType))
        let source = try RSSSource(
            options: AdapterOptions(feed: "news", values: [
                "url": .string(upstream.baseURL + "/feed.xml"), "page_size": .integer(Int64(pageSize)), "html": .string(html),
            ]),
            context: AdapterConformance.context())
        var writer = JSONWriter()
        var request = PageRequest(page: 1, token: nil, generation: 1, seed: "test")
        while true {
            guard case .page(let items, let next) = try await source.fetch(request) else { throw TestFailure("expected a page") }
            Item.write(items, to: &writer)
            writer.raw(UInt8(ascii: "\n"))
            guard case .more(let token) = next else { return writer.bytes }
            request = PageRequest(page: request.page + 1, token: token, generation: 1, seed: "test")
        }
    }

    /// FNV-1a of the bytes and their count, as the digests below are written.
    static func digest(_ bytes: [UInt8]) -> String {
        "\(StableHash.hex(bytes)) \(bytes.count)"
    }

    /// 600 RSS 2.0 items (three batches), each with some of: a guid, a link relative to an
    /// `xml:base`, dates in several forms or none, escaped HTML, CDATA, quotes, backslashes,
    /// control and C1 characters, repeated categories, `dc:creator`; some have no id at all (the
    /// id is then a hash of the JSON).
    static let manyItems: String = {
        var items: [String] = []
        for index in 0..<600 {
            var item = index % 5 == 0 ? "<item xml:base=\"https://example.com/dir/\(index % 3)/\">" : "<item>"
            if index % 4 != 0 { item += "<guid isPermaLink=\"\(index % 8 == 1 ? "true" : "false")\">tag:example.com,2026:\(index % 97)</guid>" }
            if index % 6 != 0 { item += "<link>\(index % 5 == 0 ? "post/\(index)?a=1&amp;b=\"2\"" : "https://example.com/p/\(index)")</link>" }
            item += "<title>Title \(index) &amp; \"quoted\" \\ back&#x9;tab &#147;curly&#148; €</title>"
            switch index % 7 {
            case 0: break
            case 1: item += "<pubDate>Sun, \(1 + index % 28) Nov 2026 10:\(index % 60):00 +0100</pubDate>"
            case 2: item += "<dc:date>2026-11-\(10 + index % 18)T08:00:00.250-05:00</dc:date>"
            case 3: item += "<pubDate>\(1 + index % 28) November 2026</pubDate>"
            case 4: item += "<pubDate>not a date</pubDate>"
            case 5: item += "<pubDate>Tue, 03 Nov 2026 10:00:00 PT</pubDate>"
            default: item += "<pubDate>Sun, 01 Nov 2026 10:00:00 GMT</pubDate><dcterms:modified>2026-12-01T00:00:00Z</dcterms:modified>"
            }
            if index % 3 == 0 {
                item += "<description>&lt;p&gt;Escaped &lt;b&gt;HTML&lt;/b&gt; &amp;amp; line\nbreak\r\n \(index)&lt;/p&gt;</description>"
            } else if index % 3 == 1 {
                item += "<content:encoded><![CDATA[<div>Full <em>content</em> & \u{93} more \(index)</div>]]></content:encoded>"
            }
            if index % 2 == 0 { item += "<dc:creator> Author \(index % 13) </dc:creator>" }
            for category in 0..<(index % 4) { item += "<category>cat \((index + category) % 5)</category><category>cat \(index % 5)</category>" }
            items.append(item + "</item>")
        }
        return """
            <?xml version="1.0" encoding="UTF-8"?>
            <rss version="2.0" xmlns:content="http://purl.org/rss/1.0/modules/content/" xmlns:dc="http://purl.org/dc/elements/1.1/" \
            xmlns:dcterms="http://purl.org/dc/terms/">
            <channel><title>Many</title><link>https://example.com/</link>
            \(items.joined(separator: "\n"))
            </channel></rss>
            """
    }()

    static let jsonFeed = """
        {"version": "https://jsonfeed.org/version/1.1", "title": "J", "authors": [{"name": "Feed Author"}],
         "items": [
          {"id": "1", "url": "https://example.org/1", "title": "One \\"q\\" \\u0093", "content_html": "<p>Hi &amp; bye</p>",
           "date_published": "2026-11-30T10:00:00Z", "tags": ["a", " b ", "a", ""]},
          {"id": 2, "external_url": "https://example.org/2", "content_text": "Text\\nonly", "date_modified": "2026-11-29T10:00:00+01:00",
           "authors": [{"name": "Someone"}]},
          {"url": "https://example.org/3", "summary": "S"},
          {"title": "No id, no link"}
         ]}
        """

    static let cases: [(name: String, document: String, pageSize: Int, html: String, contentType: String, digest: String)] = [
        ("rich RSS 2.0", Documents.richRSS2, 1, "html", "application/rss+xml", "4cb1c6ecf1b0b05b 495"),
        ("RDF", Documents.rdf, 20, "html", "application/rss+xml", "83d24c80227ccc8f 230"),
        ("Atom", Documents.atom, 20, "html", "application/atom+xml", "e1715dc3b55c4453 430"),
        ("600 items", manyItems, 7, "html", "application/rss+xml", "baac5a1fe5dc06c9 67809"),
        ("600 items, html as text", manyItems, 1_000, "text", "application/rss+xml", "4a1126b57bc02c92 64398"),
        ("JSON Feed", jsonFeed, 3, "html", "application/feed+json", "b857a7f81837cae3 712"),
        ("JSON Feed, html as text", jsonFeed, 3, "text", "application/feed+json", "1df2b40d5fb19129 701"),
    ]

    @Test(arguments: 0..<cases.count)
    func pages_are_the_bytes_they_were(_ index: Int) async throws {
        let example = Self.cases[index]
        let bytes = try await Self.pageBytes(example.document, pageSize: example.pageSize, html: example.html, contentType: example.contentType)
        #expect(Self.digest(bytes) == example.digest, "\(example.name): \(String(decoding: bytes.prefix(600), as: UTF8.self))")
    }

    /// A document's pages are written into one buffer, used again once a page's items are let
    /// go: items still held when the next page is written keep their bytes.
    @Test func items_held_while_later_pages_are_written_keep_their_bytes() async throws {
        let upstream = try LoopbackUpstream()
        upstream.setResource("/feed.xml", .text(Self.manyItems, contentType: "application/rss+xml"))
        let source = try RSSSource(
            options: AdapterOptions(feed: "news", values: ["url": .string(upstream.baseURL + "/feed.xml"), "page_size": .integer(50)]),
            context: AdapterConformance.context())
        func bytes(_ items: [Item]) -> [UInt8] {
            var writer = JSONWriter()
            Item.write(items, to: &writer)
            return writer.bytes
        }
        var held: [(items: [Item], bytes: [UInt8])] = []
        var request = PageRequest(page: 1, token: nil, generation: 1, seed: "test")
        while true {
            guard case .page(let items, let next) = try await source.fetch(request) else { throw TestFailure("expected a page") }
            held.append((items, bytes(items)))
            guard case .more(let token) = next else { break }
            request = PageRequest(page: request.page + 1, token: token, generation: 1, seed: "test")
        }
        #expect(held.count == 5)
        for (number, page) in held.enumerated() { #expect(bytes(page.items) == page.bytes, "page \(number + 1)") }
        #expect(Set(held.flatMap { $0.items.map(\.id) }).count > 100)
    }
}
