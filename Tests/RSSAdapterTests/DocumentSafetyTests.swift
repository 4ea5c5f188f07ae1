import FeedKit
import Foundation
@testable import RSSAdapter
import Testing
import TestSupport

/// The reader declares no entity to libxml2 and never touches the network: no external entity
/// (XXE), no external DTD, no entity expansion (billion laughs). Documents up to the body limit
/// parse (issue 23, item 8).
@Suite struct DocumentSafetyTests {
    static func title(_ document: String) throws -> JSONValue? {
        try read(document).first?.data["title"]
    }

    @Test func external_entities_are_never_fetched_nor_read() throws {
        let upstream = try LoopbackUpstream()
        upstream.setResource("/secret", .text("SECRET", contentType: "text/plain"))
        upstream.setResource("/evil.dtd", .text(#"<!ENTITY x "SECRET">"#, contentType: "application/xml-dtd"))
        let attacks = [
            #"<!DOCTYPE rss [<!ENTITY x SYSTEM "file:///etc/passwd">]><rss><channel><item><title>&x;</title></item></channel></rss>"#,
            #"<!DOCTYPE rss [<!ENTITY x SYSTEM "\#(upstream.baseURL)/secret">]><rss><channel><item><title>&x;</title></item></channel></rss>"#,
            #"<!DOCTYPE rss [<!ENTITY % p SYSTEM "\#(upstream.baseURL)/evil.dtd"> %p;]><rss><channel><item><title>&x;</title></item></channel></rss>"#,
            #"<!DOCTYPE rss SYSTEM "\#(upstream.baseURL)/evil.dtd"><rss><channel><item><title>&x;</title></item></channel></rss>"#,
            #"<!DOCTYPE rss PUBLIC "-//X//DTD X//EN" "file:///etc/passwd"><rss><channel><item><title>&x;</title></item></channel></rss>"#,
        ]
        for attack in attacks {
            // Refused where the entity must be declared; read without it where an external DTD
            // might declare it: either way nothing of what it names is in the entry.
            let title = try? Self.title(attack)
            #expect(title == nil || title == .null, "\(attack): \(String(describing: title))")
        }
        #expect(upstream.received.isEmpty, "fetched: \(upstream.received.map(\.target))")
    }

    @Test func a_billion_laughs_is_refused_without_expanding_anything() throws {
        var entities = #"<!ENTITY lol0 "lol">"#
        for level in 1...9 { entities += "<!ENTITY lol\(level) \"" + String(repeating: "&lol\(level - 1);", count: 10) + "\">" }
        let bomb = "<!DOCTYPE rss [\(entities)]><rss><channel><item><title>&lol9;</title></item></channel></rss>"
        #expect {
            try read(bomb)
        } throws: { error in
            (error as? FeedDocumentError)?.description.contains("Entity 'lol9' not defined") == true
        }
        // With an external DTD named, an undeclared entity is no error, and still nothing is expanded.
        let named = "<!DOCTYPE rss SYSTEM \"https://example.com/rss.dtd\" [\(entities)]><rss><channel><item><title>&lol9;</title><guid>g</guid></item></channel></rss>"
        #expect(try Self.title(named) == .null)
    }

    @Test func a_quadratic_blowup_is_refused() throws {
        let big = String(repeating: "A", count: 100_000)
        let document = "<!DOCTYPE rss [<!ENTITY a \"\(big)\">]><rss><channel><item><title>" + String(repeating: "&a;", count: 10_000)
            + "</title></item></channel></rss>"
        #expect(throws: FeedDocumentError.self) { try read(document) }
    }

    @Test func a_text_of_over_ten_megabytes_is_read() throws {
        // libxml2 refuses text nodes over 10,000,000 bytes unless told XML_PARSE_HUGE.
        let length = 12_000_000
        let document = Array("<rss><channel><item><guid>g</guid><description>".utf8) + [UInt8](repeating: UInt8(ascii: "a"), count: length)
            + Array("</description></item></channel></rss>".utf8)
        #expect(try read(document).first?.data["summary"]?.stringValue?.utf8.count == length)
    }

    @Test func a_document_of_thirty_megabytes_is_read() throws {
        let description = [UInt8](repeating: UInt8(ascii: "b"), count: 100_000)
        var document = Array("<rss><channel>".utf8)
        for index in 0..<300 {
            document += Array("<item><guid>\(index)</guid><description>".utf8) + description + Array("</description></item>".utf8)
        }
        document += Array("</channel></rss>".utf8)
        #expect(document.count > 30_000_000)
        #expect(try read(document).count == 300)
    }

    /// libxml2 reads the text 4,000 bytes at a time: wherever a chunk ends (inside a multi-byte
    /// character, an entity, a tag, a CDATA section), every entry comes out whole.
    @Test func a_document_reads_the_same_wherever_its_chunks_end() throws {
        var items = ""
        for index in 0..<200 {
            items += "<item><guid>\(index)</guid><title>é&amp;€&#x1F600;<![CDATA[<b>]]>日本\(index)</title><category>c\(index)</category></item>\n"
        }
        for shift in 0..<96 {
            let document = "<rss>" + String(repeating: " ", count: shift) + "<channel>" + items + "</channel></rss>"
            let entries = try read(document)
            #expect(entries.count == 200, "shifted by \(shift)")
            for (index, entry) in entries.enumerated() where entry.id != "\(index)" || entry.data["title"]?.stringValue != "é&€😀<b>日本\(index)"
                || entry.data["categories"] != .array([.string("c\(index)")])
            {
                Issue.record("shifted by \(shift), entry \(index): \(entry.id) \(entry.data)")
            }
        }
    }

    /// A body its Content-Type calls UTF-8 that libxml2 sees is UTF-16 (its first bytes `<\0?\0`)
    /// is converted as it is read, past its first chunk, not only its first line.
    @Test func a_utf16_body_labelled_utf8_is_read_to_its_end() throws {
        var text = #"<?xml version="1.0"?><rss><channel>"#
        for index in 0..<100 { text += "<item><guid>\(index)</guid><title>Grüße \(index)</title></item>" }
        text += "</channel></rss>"
        let bytes = text.utf16.flatMap { [UInt8($0 & 0xFF), UInt8($0 >> 8)] }
        #expect(bytes.count > 8_000)
        let entries = try read(bytes, contentType: "application/rss+xml; charset=utf-8")
        #expect(entries.map(\.id) == (0..<100).map { "\($0)" })
        #expect(entries.last?.data["title"] == .string("Grüße 99"))
    }

    @Test func an_empty_body_is_said_to_be_empty() throws {
        #expect {
            try read("")
        } throws: { error in
            (error as? FeedDocumentError)?.description.contains("Document is empty") == true
        }
    }

    @Test func deeply_nested_elements_are_read_without_recursion() throws {
        let document = "<rss><channel><item><guid>g</guid>" + String(repeating: "<x>", count: 100_000) + String(repeating: "</x>", count: 100_000)
            + "</item></channel></rss>"
        #expect(try read(document).map(\.id) == ["g"])
    }
}
