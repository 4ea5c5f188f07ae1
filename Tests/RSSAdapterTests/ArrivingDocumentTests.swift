import FeedKit
import Foundation
@testable import RSSAdapter
import Testing

/// A body read as it downloads (`FeedDocument.entries(arriving:)`) gives what the same bytes read
/// whole give: parsed as they arrive when they are UTF-8 XML, waited for whole otherwise.
@Suite struct ArrivingDocumentTests {
    /// `bytes` appended to a body from another thread, `piece` bytes at a time, while it is read.
    static func arriving(_ bytes: [UInt8], piece: Int) -> HTTPBodyStream {
        let body = HTTPBodyStream(expectedBytes: nil, stopTransfer: {})
        Thread.detachNewThread {
            for start in stride(from: 0, to: bytes.count, by: piece) {
                let end = min(bytes.count, start + piece)
                _ = bytes[start..<end].withUnsafeBufferPointer { body.append($0) }
            }
            body.finish()
        }
        return body
    }

    /// What reading `bytes` whole gives, and what reading them as they arrive gives.
    static func bothWays(_ bytes: [UInt8], contentType: String? = nil, piece: Int) -> (whole: String, arriving: String) {
        let context = DocumentContext(url: "https://example.com/feed", contentType: contentType)
        func outcome(_ read: () throws(FeedDocumentError) -> [FeedEntry]) -> String {
            do {
                // The JSON text as written, not a parsed value's description: a dictionary's order
                // is its instance's, and two equal ones printed differently under the sanitizer.
                return try read().map { "\($0.id) \(String(decoding: $0.json.bytes, as: UTF8.self))" }.joined(separator: "\n")
            } catch {
                return "error: \(error.description)"
            }
        }
        return (
            outcome { () throws(FeedDocumentError) in try FeedDocument.entries(in: bytes, context: context) },
            outcome { () throws(FeedDocumentError) in try FeedDocument.entries(arriving: arriving(bytes, piece: piece), context: context) }
        )
    }

    /// White space after the root element, so that a short document is long enough to be read as it arrives.
    static func padded(_ text: String) -> [UInt8] {
        Array((text + String(repeating: " ", count: 2_000)).utf8)
    }

    @Test(arguments: [1, 7, 4_000, 100_000])
    func utf_8_xml_read_as_it_arrives_gives_the_entries_read_whole(_ piece: Int) {
        for document in [Documents.richRSS2, Documents.rdf, Documents.atom] {
            let result = Self.bothWays(Self.padded(document), piece: piece)
            #expect(result.arriving == result.whole)
            #expect(!result.whole.hasPrefix("error"))
        }
        let marked = Self.bothWays([0xEF, 0xBB, 0xBF] + Self.padded(Documents.richRSS2), contentType: "text/xml; charset=iso-8859-1", piece: piece)
        #expect(marked.arriving == marked.whole && !marked.whole.hasPrefix("error"), "a UTF-8 byte-order mark outranks the charset")
    }

    @Test func a_document_of_megabytes_reads_alike() {
        let document = Array(Documents.rss2((1...12_000).map { ("g\($0)", "Entry \($0)", "Sun, 01 Nov 2026 10:00:00 GMT") }).utf8)
        #expect(document.count > 1 << 20)
        let result = Self.bothWays(document, piece: 16_384)
        #expect(result.arriving == result.whole && result.whole.split(separator: "\n").count == 12_000)
    }

    @Test func a_document_that_is_not_well_formed_fails_alike_either_way() {
        let result = Self.bothWays(Self.padded("<rss><channel><item><title>A</titel></item></channel></rss>"), piece: 100)
        #expect(result.whole.hasPrefix("error: not well-formed XML at line 1"))
        #expect(result.arriving == result.whole)
    }

    @Test func documents_in_other_encodings_or_json_are_read_whole_as_before() throws {
        let latin1 = Array((#"<?xml version="1.0" encoding="ISO-8859-1"?><rss><channel><item><guid>g</guid><title>Grüße</title></item></channel></rss>"#
            + String(repeating: " ", count: 2_000)).data(using: .isoLatin1)!)
        let utf16 = [0xFF, 0xFE] + Array((#"<rss><channel><item><guid>g</guid><title>Ωμέγα</title></item></channel></rss>"#
            + String(repeating: " ", count: 2_000)).data(using: .utf16LittleEndian)!)
        let json = Self.padded(#"{"version":"https://jsonfeed.org/version/1.1","items":[{"id":"a","content_text":"T"}]}"#)
        let cases: [(bytes: [UInt8], contentType: String?, title: String)] = [
            (latin1, nil, "Grüße"), (utf16, nil, "Ωμέγα"), (json, "application/feed+json", "T"),
            (Self.padded(#"<rss><channel><item><guid>g</guid><title>Grüße</title></item></channel></rss>"#), "text/xml; charset=windows-1252", "GrÃ¼Ã"),
        ]
        for (bytes, contentType, title) in cases {
            let result = Self.bothWays(bytes, contentType: contentType, piece: 300)
            #expect(result.arriving == result.whole)
            #expect(result.whole.contains(title) && !result.whole.hasPrefix("error"), "\(result.whole.prefix(300))")
        }
        let declaredLatin1 = Self.bothWays(Array(String(decoding: latin1, as: UTF8.self).utf8), contentType: "text/xml; charset=UTF-8", piece: 300)
        #expect(declaredLatin1.arriving == declaredLatin1.whole, "the HTTP charset outranks the declaration either way")
    }

    @Test func a_body_that_fails_is_not_read_in_full_and_says_why() throws {
        let body = HTTPBodyStream(expectedBytes: nil, stopTransfer: {})
        let start = Self.padded("<rss><channel><item><title>A</title></item>")
        _ = start.withUnsafeBufferPointer { body.append($0) }
        body.fail(ConnectionReset())
        #expect(throws: FeedDocumentError(description: "not read in full")) { try FeedDocument.entries(arriving: body) }
        #expect(body.failureRead is ConnectionReset)
    }

    struct ConnectionReset: Error {}
}
