import FeedKit
import Foundation
@testable import RSSAdapter
import Testing

/// Reads `document` as the adapter would have fetched it from `url`, returning each entry's id and data.
func read(_ document: String, url: String = "https://example.com/feeds/main.xml", contentType: String? = nil,
    contentLocation: String? = nil, plainText: Bool = false) throws -> [(id: String, data: JSONValue)] {
    try read(Array(document.utf8), url: url, contentType: contentType, contentLocation: contentLocation, plainText: plainText)
}

func read(_ bytes: [UInt8], url: String = "https://example.com/feeds/main.xml", contentType: String? = nil,
    contentLocation: String? = nil, plainText: Bool = false) throws -> [(id: String, data: JSONValue)] {
    let context = DocumentContext(url: url, contentType: contentType, contentLocation: contentLocation, plainText: plainText)
    return try FeedDocument.entries(in: bytes, context: context).map { ($0.id, $0.item.data) }
}

/// Every format the README lists is read, detected from the document alone (SPEC §9).
@Suite struct FeedFormatTests {
    @Test(arguments: ["0.91", "0.92", "0.93", "0.94", "2.0", ""])
    func rss_of_every_version_is_read(_ version: String) throws {
        let document = #"<rss version="\#(version)"><channel><title>C</title><item><title>T</title><link>https://x/1</link>"#
            + "<description>D</description></item></channel></rss>"
        let entries = try read(document)
        #expect(entries.map(\.id) == ["https://x/1"])
        #expect(entries.first?.data["title"] == "T" && entries.first?.data["summary"] == "D")
    }

    @Test func rss_0_90_is_read_with_its_netscape_namespace() throws {
        let document = """
            <rdf:RDF xmlns:rdf="http://www.w3.org/1999/02/22-rdf-syntax-ns#" xmlns="http://my.netscape.com/rdf/simple/0.9/">
            <channel><title>C</title><link>https://x/</link></channel>
            <item><title>First</title><link>https://x/1</link></item><item><title>Second</title><link>https://x/2</link></item>
            </rdf:RDF>
            """
        #expect(try read(document).map { $0.data["title"] } == ["First", "Second"])
    }

    @Test func rss_whose_root_carries_a_namespace_is_read() throws {
        for namespace in ["http://backend.userland.com/rss2", "http://blogs.law.harvard.edu/tech/rss", "urn:some:private:namespace"] {
            let document = #"<rss xmlns="\#(namespace)" version="2.0"><channel><item><title>T</title><guid>g</guid></item></channel></rss>"#
            #expect(try read(document).map(\.id) == ["g"], "\(namespace)")
        }
    }

    @Test func rss_0_91_with_netscapes_doctype_reads_html_entities_its_dtd_declares() throws {
        let document = """
            <?xml version="1.0" encoding="ISO-8859-1"?>
            <!DOCTYPE rss PUBLIC "-//Netscape Communications//DTD RSS 0.91//EN" "http://my.netscape.com/publish/formats/rss-0.91.dtd">
            <rss version="0.91"><channel><title>C</title>
            <item><title>Caf&eacute; &amp; cr&egrave;me&nbsp;br&ucirc;l&eacute;e</title><link>https://x/1</link></item>
            </channel></rss>
            """
        #expect(try read(document).first?.data["title"] == "Café & crème\u{A0}brûlée")
    }

    @Test func atom_0_3_is_read_with_its_own_element_names() throws {
        let document = """
            <feed version="0.3" xmlns="http://purl.org/atom/ns#">
              <title>Old Atom</title>
              <entry>
                <title>An entry</title>
                <link rel="alternate" type="text/html" href="https://x/1"/>
                <id>tag:x,2004:1</id>
                <issued>2004-01-01T10:00:00-05:00</issued>
                <modified>2004-01-02T10:00:00Z</modified>
                <author><name>Ann</name><email>ann@x</email></author>
                <summary type="text/plain">Short</summary>
                <content type="text/html" mode="escaped">&lt;p&gt;Long&lt;/p&gt;</content>
              </entry>
            </feed>
            """
        let entries = try read(document)
        #expect(entries.count == 1)
        #expect(entries.first?.id == "tag:x,2004:1")
        #expect(entries.first?.data == [
            "title": "An entry", "link": "https://x/1", "published": "2004-01-01T15:00:00Z", "updated": "2004-01-02T10:00:00Z",
            "summary": "Short", "author": "Ann", "categories": nil,
        ])
    }

    @Test func atom_1_0_is_read() throws {
        let entries = try read(Documents.atom)
        #expect(entries.map(\.id) == ["urn:uuid:1225c695-cfb8-4ebb-aaaa-80da344efa6a", "urn:2"])
    }

    @Test func json_feed_1_1_is_read_with_the_same_shape() throws {
        let document = """
            {"version": "https://jsonfeed.org/version/1.1", "title": "J", "authors": [{"name": "Feed Author"}],
             "items": [
               {"id": "1", "title": "First", "url": "/posts/1", "content_html": "<p>Hi</p>",
                "date_published": "2026-11-30T05:00:00+01:00", "date_modified": "2026-11-30T06:00:00Z", "tags": ["a", "b", "a"]},
               {"id": 2, "content_text": "Plain", "summary": "Sum", "authors": [{"name": "Ann"}]}
             ]}
            """
        let entries = try read(document)
        #expect(entries.map(\.id) == ["1", "2"])
        #expect(entries[0].data == [
            "title": "First", "link": "https://example.com/posts/1", "published": "2026-11-30T04:00:00Z",
            "updated": "2026-11-30T06:00:00Z", "summary": "<p>Hi</p>", "author": "Feed Author", "categories": ["a", "b"],
        ])
        #expect(entries[1].data["summary"] == "Sum" && entries[1].data["author"] == "Ann" && entries[1].data["title"] == .null)
    }

    @Test func json_feed_1_0_is_read_with_its_single_author() throws {
        let document = #"{"version":"https://jsonfeed.org/version/1","items":[{"id":"a","content_text":"T","author":{"name":"Bo"}}]}"#
        #expect(try read(document).first?.data["author"] == "Bo")
    }

    @Test func cdf_the_channel_definition_format_is_read() throws {
        let document = #"<CHANNEL HREF="https://x/"><ITEM HREF="https://x/1" LASTMOD="2004-04-06T23:05:43-05:00"><TITLE>T</TITLE><ABSTRACT>A</ABSTRACT></ITEM></CHANNEL>"#
        let entries = try read(document)
        #expect(entries.first?.data["link"] == "https://x/1" && entries.first?.data["summary"] == "A")
        #expect(entries.first?.data["updated"] == "2004-04-07T04:05:43Z")
    }

    @Test(arguments: [
        (#"{"title": "not a feed"}"#, #"JSON, but not a JSON Feed (its "version" is not https://jsonfeed.org/version/1 or 1.1)"#),
        (#"{"version": "https://jsonfeed.org/version/1.1"}"#, #"a JSON Feed without an "items" array"#),
        ("{broken", "not valid JSON"),
        ("<html><body>Not a feed</body></html>", "not an RSS, Atom or JSON Feed document (its root element is <html>)"),
    ])
    func a_document_of_no_known_format_is_refused_saying_what_it_is(_ document: String, _ reason: String) {
        #expect {
            try read(document)
        } throws: { error in
            (error as? FeedDocumentError)?.description.hasPrefix(reason) == true
        }
    }
}
