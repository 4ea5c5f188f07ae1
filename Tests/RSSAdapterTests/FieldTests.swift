import FeedKit
import Foundation
@testable import RSSAdapter
import Testing
import TestSupport

/// Which element fills which field (README, "Fields"), Atom's content types, links and `html = "text"`.
@Suite struct FieldTests {
    static func rssItem(_ inside: String, namespaces: String = "") -> String {
        """
        <rss version="2.0" xmlns:dc="http://purl.org/dc/elements/1.1/" xmlns:dcterms="http://purl.org/dc/terms/"
             xmlns:media="http://search.yahoo.com/mrss/" xmlns:itunes="http://www.itunes.com/dtds/podcast-1.0.dtd"
             xmlns:content="http://purl.org/rss/1.0/modules/content/" xmlns:atom="http://www.w3.org/2005/Atom" \(namespaces)>
        <channel><title>Channel</title><item><guid isPermaLink="false">g</guid>\(inside)</item></channel></rss>
        """
    }

    static func atomEntry(_ inside: String) -> String {
        #"<feed xmlns="http://www.w3.org/2005/Atom"><entry><id>e</id>\#(inside)</entry></feed>"#
    }

    static func data(_ document: String, url: String = "https://example.com/feeds/main.xml", contentLocation: String? = nil,
        plainText: Bool = false) throws -> JSONValue {
        try #require(try read(document, url: url, contentLocation: contentLocation, plainText: plainText).first).data
    }

    @Test func extension_elements_stand_in_for_missing_fields() throws {
        let data = try Self.data(Self.rssItem("""
            <dc:title>DC title</dc:title><media:title>Media title</media:title>
            <dc:description>DC description</dc:description><itunes:summary>iTunes summary</itunes:summary>
            <dcterms:issued>2026-11-01T00:00:00Z</dcterms:issued><dcterms:modified>2026-11-02T00:00:00Z</dcterms:modified>
            <itunes:author>iTunes author</itunes:author>
            <media:category>media</media:category><itunes:category text="Technology"><itunes:category text="Gadgets"/></itunes:category>
            """))
        #expect(data == [
            "title": "DC title", "link": .null, "published": "2026-11-01T00:00:00Z", "updated": "2026-11-02T00:00:00Z",
            "summary": "DC description", "author": "iTunes author", "categories": ["media", "Technology", "Gadgets"],
        ])
    }

    @Test func a_fields_own_element_wins_over_its_fallbacks_wherever_they_are() throws {
        let data = try Self.data(Self.rssItem("""
            <dc:title>Fallback</dc:title><title>Own</title><itunes:summary>Fallback</itunes:summary><description>Own</description>
            <dc:creator>Fallback</dc:creator><author>own@example.com (Own)</author><pubDate>Mon, 02 Nov 2026 00:00:00 GMT</pubDate>
            <dc:date>2026-01-01</dc:date><content:encoded>Content</content:encoded>
            """))
        #expect(data["title"] == "Own" && data["summary"] == "Own" && data["author"] == "own@example.com (Own)")
        #expect(data["published"] == "2026-11-02T00:00:00Z" && data["updated"] == "2026-01-01T00:00:00Z", "dc:date fills what is missing")
    }

    @Test func media_rss_counts_inside_a_media_group_and_nothing_counts_inside_other_children() throws {
        let data = try Self.data(Self.rssItem("""
            <media:group><media:content url="https://x/v.mp4"><media:title>In group</media:title></media:content></media:group>
            <source url="https://other/"><title>Not mine</title></source><image><title>Not mine either</title></image>
            """))
        #expect(data["title"] == "In group")
    }

    @Test func categories_come_from_their_own_text_or_term_each_once() throws {
        let rss = try Self.data(Self.rssItem("""
            <category domain="https://x/">news</category><category> news </category><dc:subject>science</dc:subject>
            <category><b>inner text is not the category's</b></category>
            """))
        #expect(rss["categories"] == ["news", "science"])
        let atom = try Self.data(Self.atomEntry(#"<category term="t" label="Label" scheme="https://x/"/><category>text</category>"#))
        #expect(atom["categories"] == ["t", "text"])
    }

    @Test func atom_text_constructs_of_every_type_are_decoded() throws {
        func summary(_ content: String) throws -> JSONValue? { try Self.data(Self.atomEntry(content))["summary"] }
        #expect(try summary(#"<content type="text">1 &lt; 2</content>"#) == "1 < 2")
        #expect(try summary(#"<content type="html">&lt;p&gt;Hi&lt;/p&gt;</content>"#) == "<p>Hi</p>")
        #expect(try summary(#"<content type="xhtml"><div xmlns="http://www.w3.org/1999/xhtml"><p class="a">1 &lt; 2</p><br/></div></content>"#)
            == #"<p class="a">1 &lt; 2</p><br></br>"#)
        #expect(try summary(#"<content type="xhtml"><div xmlns="http://www.w3.org/1999/xhtml">one</div><div xmlns="http://www.w3.org/1999/xhtml">two</div></content>"#)
            == "<div>one</div><div>two</div>", "only a single wrapping div is dropped")
        #expect(try summary(#"<content type="text/html">&lt;b&gt;B&lt;/b&gt;</content>"#) == "<b>B</b>")
        #expect(try summary(#"<content type="application/xhtml+xml"><div xmlns="http://www.w3.org/1999/xhtml"><i>I</i></div></content>"#) == "<i>I</i>")
        #expect(try summary(#"<content type="text/plain">Plain</content>"#) == "Plain")
        #expect(try summary(#"<content type="image/svg+xml"><svg xmlns="http://www.w3.org/2000/svg"><circle r="1"/></svg></content>"#)
            == #"<svg xmlns="http://www.w3.org/2000/svg"><circle r="1"></circle></svg>"#)
        let base64 = Data("<p>Encoded</p>".utf8).base64EncodedString()
        #expect(try summary(#"<content type="text/html">\#(base64)</content>"#) == .string(base64), "text/html is not Base64 in Atom 1.0")
        #expect(try summary(#"<content type="application/octet-stream">\#(base64)</content>"#) == .null, "binary content is no summary")
        #expect(try summary(#"<content type="image/png">iVBORw0KGgo=</content><summary>S</summary>"#) == "S")
        #expect(try summary(#"<content src="https://x/out-of-line"/>"#) == .null)
    }

    @Test func atom_0_3_base64_content_is_decoded() throws {
        let base64 = Data("<p>Encoded ünïcode</p>".utf8).base64EncodedString()
        let document = #"<feed version="0.3" xmlns="http://purl.org/atom/ns#"><entry><id>e</id><content type="text/html" mode="base64">\#(base64)</content></entry></feed>"#
        #expect(try Self.data(document)["summary"] == "<p>Encoded ünïcode</p>")
    }

    @Test func links_resolve_against_xml_base_then_content_location_then_the_document_url() throws {
        let url = "https://example.com/feeds/main.xml"
        #expect(try Self.data(Self.atomEntry(#"<link href="1.html"/>"#), url: url)["link"] == "https://example.com/feeds/1.html")
        #expect(try Self.data(Self.atomEntry(#"<link href="/1.html"/>"#), url: url, contentLocation: "https://cdn.example.net/a/b.xml")["link"]
            == "https://cdn.example.net/1.html")
        let nested = #"<feed xmlns="http://www.w3.org/2005/Atom" xml:base="https://base.example.org/x/"><entry xml:base="y/"><id>e</id><link xml:base="z/" href="../1.html"/></entry></feed>"#
        #expect(try Self.data(nested, url: url)["link"] == "https://base.example.org/x/y/1.html")
        #expect(try Self.data(Self.rssItem("<link>posts/2</link>"), url: url)["link"] == "https://example.com/feeds/posts/2")
        #expect(try Self.data(Self.atomEntry(#"<link href="https://absolute.example/a/../b"/>"#), url: url)["link"] == "https://absolute.example/a/../b",
            "an absolute link is given as written")
        let unsafeBase = #"<feed xmlns="http://www.w3.org/2005/Atom" xml:base="javascript:alert(1)//"><entry><id>e</id><link href="1"/></entry></feed>"#
        #expect(try Self.data(unsafeBase, url: url)["link"] == "https://example.com/feeds/1", "a base in another scheme is ignored")
    }

    @Test func a_permalink_guid_is_the_link_when_there_is_none() throws {
        #expect(try Self.data(#"<rss><channel><item><guid>https://x/1</guid></item></channel></rss>"#)["link"] == "https://x/1")
        #expect(try Self.data(#"<rss><channel><item><guid isPermaLink="false">https://x/1</guid></item></channel></rss>"#)["link"] == .null)
        #expect(try Self.data(#"<rss><channel><item><guid>https://x/1</guid><link>https://x/2</link></item></channel></rss>"#)["link"] == "https://x/2")
    }

    @Test func the_id_is_the_guid_else_the_id_else_the_link_else_a_hash_of_the_entry() throws {
        let document = """
            <rss><channel>
            <item><guid isPermaLink="false">g</guid><id>i</id><link>https://x/1</link></item>
            <item><id>i2</id><link>https://x/2</link></item>
            <item><guid isPermaLink="false"></guid><link>https://x/3</link></item>
            <item><title>t</title></item>
            </channel></rss>
            """
        let ids = try read(document).map(\.id)
        #expect(Array(ids.prefix(3)) == ["g", "i2", "https://x/3"])
        #expect(ids.count == 4 && !ids[3].isEmpty && !ids.prefix(3).contains(ids[3]))
        #expect(try read(document).map(\.id) == ids, "the hash is the same at every read")
    }

    @Test func alternate_html_links_are_the_entrys_link_other_relations_are_not() throws {
        let data = try Self.data(Self.atomEntry("""
            <link rel="edit" href="https://x/edit"/><link rel="alternate" type="application/atom+xml" href="https://x/feed"/>
            <link rel="enclosure" href="https://x/a.mp3"/><link rel="alternate" type="text/html" href="https://x/page"/>
            """))
        #expect(data["link"] == "https://x/page")
    }

    @Test func html_text_gives_plain_text_summaries_through_an_html_parser() throws {
        let document = Self.rssItem("""
            <title>Tom &amp; Jerry &lt;3</title>
            <description><![CDATA[<p>First&nbsp;paragraph with <b>bold</b> &amp; <a href="x">a link</a>.</p><p>Second</p>
            <script>alert("no")</script><style>p{}</style><ul><li>one</li><li>two</li></ul>caf&eacute;<br>end]]></description>
            """)
        let data = try Self.data(document, plainText: true)
        #expect(data["summary"] == "First\u{A0}paragraph with bold & a link. Second one two café end")
        #expect(data["title"] == "Tom & Jerry <3", "an RSS title is text already, not HTML")
        #expect(try Self.data(document)["summary"]?.stringValue?.hasPrefix("<p>First&nbsp;paragraph") == true, "HTML is kept by default")
        let atom = Self.atomEntry(#"<title type="html">A &lt;em&gt;title&lt;/em&gt;</title><summary type="text">1 &lt; 2</summary>"#)
        #expect(try Self.data(atom, plainText: true) == [
            "title": "A title", "link": .null, "published": .null, "updated": .null, "summary": "1 < 2", "author": .null, "categories": .null,
        ])
    }

    @Test func the_html_option_is_checked() throws {
        let context = AdapterConformance.context()
        #expect(throws: OptionError.self) {
            try RSSSource(options: AdapterOptions(feed: "f", values: ["url": "https://x/", "html": "markdown"]), context: context)
        }
        _ = try RSSSource(options: AdapterOptions(feed: "f", values: ["url": "https://x/", "html": "text"]), context: context)
    }
}
