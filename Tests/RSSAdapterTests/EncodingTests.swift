import FeedKit
import Foundation
@testable import RSSAdapter
import Testing
import TestSupport

/// Encodings found as RFC 7303 orders them (a byte-order mark, the HTTP charset, the XML
/// declaration, UTF-8) and converted with iconv (README, "Encodings").
@Suite struct EncodingTests {
    /// `<rss …><item><title>TITLE</title></item></rss>` with `declaration` first, in `encoding`.
    static func document(title: String, declaration: String? = nil, encoding: String.Encoding = .utf8) -> [UInt8] {
        let text = (declaration.map { #"<?xml version="1.0" encoding="\#($0)"?>"# + "\n" } ?? "")
            + #"<rss version="2.0"><channel><item><guid>g</guid><title>\#(title)</title></item></channel></rss>"#
        return Array(text.data(using: encoding)!)
    }

    static func title(_ bytes: [UInt8], contentType: String? = nil) throws -> JSONValue? {
        try read(bytes, contentType: contentType).first?.data["title"]
    }

    /// glibc's iconv, for encodings Foundation does not write.
    static func converted(_ text: String, to encoding: String) throws -> [UInt8] {
        let result = try ChildProcess.run("/usr/bin/env", ["sh", "-c", "printf '%s' \"$0\" | iconv -f UTF-8 -t \(encoding) | od -An -tx1 -v", text])
        return result.output.split(whereSeparator: \.isWhitespace).compactMap { UInt8($0, radix: 16) }
    }

    @Test func the_xml_declaration_names_the_encoding() throws {
        #expect(try Self.title(Self.document(title: "Grüße", declaration: "ISO-8859-1", encoding: .isoLatin1)) == "Grüße")
        #expect(try Self.title(Self.document(title: "Grüße", declaration: "windows-1252", encoding: .windowsCP1252)) == "Grüße")
    }

    @Test func the_http_charset_overrides_the_xml_declaration() throws {
        let bytes = Self.document(title: "Grüße", declaration: "UTF-8", encoding: .isoLatin1)
        #expect(try Self.title(bytes, contentType: "application/rss+xml; charset=iso-8859-1") == "Grüße")
        #expect(try Self.title(bytes, contentType: #"text/xml; charset="ISO-8859-1""#) == "Grüße")
    }

    @Test func a_byte_order_mark_overrides_the_http_charset_and_the_declaration() throws {
        let bytes = [0xEF, 0xBB, 0xBF] + Self.document(title: "Grüße", declaration: "ISO-8859-1")
        #expect(try Self.title(bytes, contentType: "text/xml; charset=windows-1252") == "Grüße")
    }

    @Test(arguments: [("UTF-16LE", [UInt8]([0xFF, 0xFE])), ("UTF-16BE", [0xFE, 0xFF]), ("UTF-32LE", [0xFF, 0xFE, 0, 0]), ("UTF-32BE", [0, 0, 0xFE, 0xFF])])
    func utf_16_and_utf_32_are_read_by_their_byte_order_mark_or_without_one(_ encoding: String, _ mark: [UInt8]) throws {
        let body = try Self.converted(String(decoding: Self.document(title: "Ωμέγα", declaration: encoding.prefix(6).description), as: UTF8.self), to: encoding)
        #expect(try Self.title(mark + body) == "Ωμέγα", "with a mark")
        #expect(try Self.title(body) == "Ωμέγα", "by the byte pattern of <?xml")
    }

    @Test(arguments: [
        ("CP437", "Café"), ("CP850", "Café"), ("MACINTOSH", "Café"), ("ebcdic-cp-us", "Café"), ("IBM037", "Café"), ("KOI8-R", "Привет"),
        ("windows-1251", "Привет"), ("SHIFT_JIS", "日本語"), ("EUC-JP", "日本語"), ("GB2312", "中文"), ("BIG5", "中文"), ("EUC-KR", "한국어"),
    ])
    func dos_mac_ebcdic_and_asian_code_pages_are_read(_ encoding: String, _ title: String) throws {
        let text = String(decoding: Self.document(title: title, declaration: encoding), as: UTF8.self)
        #expect(try Self.title(try Self.converted(text, to: encoding)) == .string(title))
    }

    @Test func latin_1_bytes_0x80_to_0x9f_are_windows_1252_as_browsers_read_them() throws {
        var bytes = Self.document(title: "QUOTE", declaration: "ISO-8859-1")
        let range = bytes.firstRange(of: Array("QUOTE".utf8))!
        bytes.replaceSubrange(range, with: [0x93, 0x41, 0x94, 0x80])
        #expect(try Self.title(bytes) == "“A”€")
        #expect(try Self.title(Array(#"<rss><channel><item><guid>g</guid><title>&#147;B&#148;</title></item></channel></rss>"#.utf8)) == "“B”")
    }

    @Test func an_encoding_iconv_does_not_know_is_an_error_naming_it_and_where_it_was_named() throws {
        #expect {
            try read(Self.document(title: "x", declaration: "x-klingon-8"))
        } throws: { error in
            (error as? FeedDocumentError)?.description == #"in the encoding "x-klingon-8" (its XML declaration says so), which iconv does not know"#
        }
        #expect {
            try read(Self.document(title: "x"), contentType: "application/rss+xml; charset=nope")
        } throws: { error in
            (error as? FeedDocumentError)?.description.contains(#""nope" (its HTTP Content-Type says so)"#) == true
        }
    }

    @Test func bytes_that_are_not_valid_in_the_declared_encoding_are_an_error_saying_where() throws {
        var bytes = Self.document(title: "XY", declaration: "UTF-16LE")
        bytes = try Self.converted(String(decoding: bytes, as: UTF8.self), to: "UTF-16LE")
        bytes.removeLast()
        #expect {
            try read(bytes)
        } throws: { error in
            (error as? FeedDocumentError)?.description.hasPrefix("not valid UTF-16LE (as its XML declaration says it is) at byte") == true
        }
        #expect(throws: FeedDocumentError.self) { try read([0x3C, 0x72, 0x73, 0x73, 0x3E, 0xFF, 0x3C, 0x2F, 0x72, 0x73, 0x73, 0x3E]) }
    }

    @Test func the_http_charset_reaches_the_adapter_from_the_upstream() async throws {
        let upstream = try LoopbackUpstream()
        upstream.setResource("/feed.xml", LoopbackUpstream.Resource(
            body: Self.document(title: "Grüße", declaration: "UTF-8", encoding: .isoLatin1), contentType: "text/xml; charset=ISO-8859-1"))
        let source = try RSSSource(
            options: AdapterOptions(feed: "news", values: ["url": .string(upstream.baseURL + "/feed.xml")]), context: AdapterConformance.context())
        guard case .page(let items, _) = try await source.fetch(PageRequest(page: 1, token: nil, generation: 1, seed: "s")) else {
            throw TestFailure("no page")
        }
        #expect(items.first?.data["title"] == "Grüße")
    }
}
