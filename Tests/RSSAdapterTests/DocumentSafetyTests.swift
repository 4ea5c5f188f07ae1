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

    @Test func deeply_nested_elements_are_read_without_recursion() throws {
        let document = "<rss><channel><item><guid>g</guid>" + String(repeating: "<x>", count: 100_000) + String(repeating: "</x>", count: 100_000)
            + "</item></channel></rss>"
        #expect(try read(document).map(\.id) == ["g"])
    }
}
