/// Sample documents in the three formats, with the features real feeds use.
enum Documents {
    /// RSS 2.0 items: (guid, title, pubDate).
    static func rss2(_ items: [(guid: String, title: String, date: String)]) -> String {
        """
        <?xml version="1.0" encoding="UTF-8"?>
        <rss version="2.0" xmlns:content="http://purl.org/rss/1.0/modules/content/" xmlns:dc="http://purl.org/dc/elements/1.1/">
        <channel><title>Sample</title><link>https://example.com/</link><description>A channel</description>
        \(items.map { "<item><guid>\($0.guid)</guid><title>\($0.title)</title><pubDate>\($0.date)</pubDate></item>" }.joined(separator: "\n"))
        </channel></rss>
        """
    }

    static let richRSS2 = """
        <?xml version="1.0" encoding="UTF-8"?>
        <rss version="2.0" xmlns:content="http://purl.org/rss/1.0/modules/content/" xmlns:dcx="http://purl.org/dc/elements/1.1/">
        <channel>
          <title>Channel title is not an entry</title>
          <item>
            <title>Fish &amp; Chips &lt;today&gt; &#233;t&#xE9;</title>
            <link>https://example.com/posts/1</link>
            <description>&lt;p&gt;Escaped &lt;b&gt;HTML&lt;/b&gt;&lt;/p&gt;</description>
            <content:encoded><![CDATA[<p>Full <em>content</em> & more</p>]]></content:encoded>
            <dcx:creator>Zoë Example</dcx:creator>
            <category>food</category>
            <category>uk</category>
            <pubDate>Mon, 30 Nov 2026 05:00:00 +0100</pubDate>
            <guid isPermaLink="false">tag:example.com,2026:1</guid>
          </item>
          <item>
            <link>https://example.com/posts/2</link>
            <content:encoded><![CDATA[<p>Only content</p>]]></content:encoded>
            <dcx:date>2026-11-29T10:30:00.250-05:00</dcx:date>
          </item>
        </channel>
        </rss>
        """

    static let rdf = """
        <?xml version="1.0"?>
        <rdf:RDF xmlns:rdf="http://www.w3.org/1999/02/22-rdf-syntax-ns#" xmlns="http://purl.org/rss/1.0/"
                 xmlns:dc="http://purl.org/dc/elements/1.1/">
          <channel rdf:about="https://example.org/"><title>RDF channel</title><link>https://example.org/</link></channel>
          <item rdf:about="https://example.org/a">
            <title>RDF entry</title>
            <link>https://example.org/a</link>
            <description>Plain text</description>
            <dc:creator>An Author</dc:creator>
            <dc:date>2026-11-28</dc:date>
            <dc:subject>science</dc:subject>
          </item>
        </rdf:RDF>
        """

    static let atom = """
        <?xml version="1.0" encoding="utf-8"?>
        <feed xmlns="http://www.w3.org/2005/Atom">
          <title>Atom feed</title><id>urn:feed</id><updated>2026-11-30T00:00:00Z</updated>
          <author><name>Feed Author</name></author>
          <entry>
            <title type="html">A &lt;em&gt;title&lt;/em&gt;</title>
            <link rel="edit" href="https://example.net/edit/1"/>
            <link href="https://example.net/1"/>
            <id>urn:uuid:1225c695-cfb8-4ebb-aaaa-80da344efa6a</id>
            <updated>2026-11-30T12:00:00Z</updated>
            <published>2026-11-30T08:00:00+02:00</published>
            <author><name>Entry Author</name><email>a@example.net</email></author>
            <category term="news" label="News"/>
            <content type="xhtml"><div xmlns="http://www.w3.org/1999/xhtml"><p class="x">Hello &amp; <b>world</b></p></div></content>
          </entry>
          <entry>
            <title>Undated</title>
            <id>urn:2</id>
            <summary>Short</summary>
          </entry>
        </feed>
        """
}
