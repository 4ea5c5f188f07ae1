import Foundation
import Glibc

/// A document's text as UTF-8, whatever encoding it came in: found as RFC 7303 (section 3) orders
/// it (a byte-order mark, then the `charset` of the HTTP `Content-Type`, then the XML
/// declaration's `encoding`, then UTF-8) and converted with glibc's iconv, which knows every
/// encoding feeds are written in (`iconv -l`). A UTF-8 document is used as it is, not copied.
struct DecodedDocument: ~Copyable {
    /// The UTF-8 text: `bytes` from `start` on (past a UTF-8 byte-order mark).
    private let bytes: [UInt8]
    private let start: Int

    /// The encoding of `body`, and `body` as UTF-8; throws naming the encoding when iconv does
    /// not know it, or when the bytes are not valid in it.
    init(_ body: consuming [UInt8], contentType: String?) throws(FeedDocumentError) {
        let (name, source, offset) = Self.encoding(of: body, contentType: contentType)
        if Self.isUTF8(name) {
            bytes = consume body
            start = offset
            return
        }
        var converted = try Self.convert(body[offset...], from: name, source: source)
        if converted.starts(with: [0xEF, 0xBB, 0xBF]) { converted.removeFirst(3) }
        bytes = converted
        start = 0
    }

    /// Calls `body` with the UTF-8 text.
    func withText<T>(_ body: (UnsafeBufferPointer<UInt8>) throws(FeedDocumentError) -> T) throws(FeedDocumentError) -> T {
        try bytes.withUnsafeBufferPointer { buffer throws(FeedDocumentError) in try body(UnsafeBufferPointer(rebasing: buffer[start...])) }
    }

    /// Whether the text, past white space, starts with `{`: a JSON text rather than XML.
    var isJSON: Bool {
        bytes[start...].first(where: { !Trimming.isSpace($0) }) == UInt8(ascii: "{")
    }

    /// How many bytes of a document's start its encoding is found from (the XML declaration is
    /// looked for there).
    static let sniffedBytes = 1024

    /// Where the text starts (past a UTF-8 byte-order mark) in a document that is UTF-8 XML,
    /// as its start `first` (its first ``sniffedBytes`` bytes, or all of it) shows; nil for
    /// another encoding, a JSON text, or a start of nothing but white space.
    static func utf8XMLStart(_ first: [UInt8], contentType: String?) -> Int? {
        let (name, _, offset) = encoding(of: first, contentType: contentType)
        guard isUTF8(name), let text = first[offset...].first(where: { !Trimming.isSpace($0) }), text != UInt8(ascii: "{") else { return nil }
        return offset
    }

    // MARK: Finding the encoding

    /// The encoding's name, where the name came from, and where the text starts (past a BOM).
    private static func encoding(of body: [UInt8], contentType: String?) -> (name: String, source: String, offset: Int) {
        if let (name, length) = byteOrderMark(body) { return (name, "byte-order mark", length) }
        let family = family(of: body)
        if let charset = contentType.flatMap(charset(in:)) { return (specific(charset, family: family), "HTTP Content-Type", 0) }
        if let declared = declaredEncoding(body, family: family) { return (specific(declared, family: family), "XML declaration", 0) }
        return (family ?? "UTF-8", "byte pattern", 0)
    }

    private static func byteOrderMark(_ body: [UInt8]) -> (name: String, length: Int)? {
        if body.starts(with: [0xEF, 0xBB, 0xBF]) { return ("UTF-8", 3) }
        if body.starts(with: [0x00, 0x00, 0xFE, 0xFF]) { return ("UTF-32BE", 4) }
        if body.starts(with: [0xFF, 0xFE, 0x00, 0x00]) { return ("UTF-32LE", 4) }
        if body.starts(with: [0xFE, 0xFF]) { return ("UTF-16BE", 2) }
        if body.starts(with: [0xFF, 0xFE]) { return ("UTF-16LE", 2) }
        return nil
    }

    /// What the first bytes say of a document without a BOM, which starts `<?xml` (XML 1.0,
    /// appendix F): UTF-32 or UTF-16 of either order, or EBCDIC; nil for an ASCII-compatible one.
    private static func family(of body: [UInt8]) -> String? {
        switch Array(body.prefix(4)) {
        case [0x00, 0x00, 0x00, 0x3C]: "UTF-32BE"
        case [0x3C, 0x00, 0x00, 0x00]: "UTF-32LE"
        case [0x00, 0x3C, 0x00, 0x3F]: "UTF-16BE"
        case [0x3C, 0x00, 0x3F, 0x00]: "UTF-16LE"
        case [0x4C, 0x6F, 0xA7, 0x94]: "IBM037"
        default: nil
        }
    }

    /// A name that leaves the byte order open (`UTF-16`) made specific by what the bytes show,
    /// and a name in the UTF-16 or UTF-32 family overruled by bytes that show another.
    private static func specific(_ name: String, family: String?) -> String {
        guard let family, family.hasPrefix("UTF-") else { return name }
        let lowered = name.lowercased()
        let wide = family.hasPrefix("UTF-32")
        if ["utf-16", "utf16", "ucs-2", "iso-10646-ucs-2", "unicode", "csunicode"].contains(lowered), !wide { return family }
        if ["utf-32", "utf32", "ucs-4", "iso-10646-ucs-4", "csucs4"].contains(lowered), wide { return family }
        return lowered.hasPrefix("utf-16") || lowered.hasPrefix("utf-32") ? name : family
    }

    /// The `charset` parameter of a `Content-Type` value, unquoted.
    static func charset(in contentType: String) -> String? {
        for parameter in contentType.split(separator: ";").dropFirst() {
            let parts = parameter.split(separator: "=", maxSplits: 1)
            guard parts.count == 2, parts[0].trimmingCharacters(in: .whitespaces).lowercased() == "charset" else { continue }
            let value = parts[1].trimmingCharacters(in: .whitespaces).trimmingCharacters(in: CharacterSet(charactersIn: "\"'"))
            return value.isEmpty ? nil : value
        }
        return nil
    }

    /// The `encoding` of the XML declaration, read in the byte pattern's family.
    private static func declaredEncoding(_ body: [UInt8], family: String?) -> String? {
        let prefix = Array(body.prefix(sniffedBytes))
        let ascii: [UInt8]
        switch family {
        case "UTF-32BE": ascii = stride(from: 3, to: prefix.count, by: 4).map { prefix[$0] }
        case "UTF-32LE": ascii = stride(from: 0, to: prefix.count, by: 4).map { prefix[$0] }
        case "UTF-16BE": ascii = stride(from: 1, to: prefix.count, by: 2).map { prefix[$0] }
        case "UTF-16LE": ascii = stride(from: 0, to: prefix.count, by: 2).map { prefix[$0] }
        case let name?: ascii = (try? convert(prefix[...], from: name, source: "", partial: true)) ?? []
        case nil: ascii = prefix
        }
        let text = String(decoding: ascii, as: UTF8.self)
        guard text.hasPrefix("<?xml"), let end = text.range(of: "?>") else { return nil }
        let declaration = text[..<end.lowerBound]
        guard let key = declaration.range(of: "encoding") else { return nil }
        var rest = declaration[key.upperBound...].drop { $0 == " " || $0 == "\t" || $0 == "\r" || $0 == "\n" }
        guard rest.first == "=" else { return nil }
        rest = rest.dropFirst().drop { $0 == " " || $0 == "\t" || $0 == "\r" || $0 == "\n" }
        guard let quote = rest.first, quote == "\"" || quote == "'" else { return nil }
        let value = rest.dropFirst().prefix { $0 != quote }
        return value.isEmpty ? nil : String(value)
    }

    // MARK: Converting

    private static func isUTF8(_ name: String) -> Bool {
        let lowered = name.lowercased()
        return lowered == "utf-8" || lowered == "utf8"
    }

    /// Names iconv reads under another spelling: browsers' labels for Latin-1 (whose 0x80 to
    /// 0x9F the JSON writer reads as Windows-1252, as browsers do), and `_` for `-`.
    private static func iconvNames(_ name: String) -> [String] {
        let lowered = name.lowercased()
        if ["us-ascii", "ascii", "iso-8859-1", "latin1", "latin-1", "l1", "iso_8859-1", "iso8859-1"].contains(lowered) { return ["ISO-8859-1"] }
        let aliases = ["x-mac-roman": "MACINTOSH", "macroman": "MACINTOSH", "x-sjis": "SHIFT_JIS", "x-euc-jp": "EUC-JP", "maccentraleurope": "MAC-CENTRALEUROPE"]
        if let alias = aliases[lowered] { return [alias] }
        return [name, name.replacingOccurrences(of: "_", with: "-")]
    }

    /// `bytes` in the encoding `name`, as UTF-8. With `partial`, conversion stops quietly at the
    /// first byte that does not convert (for reading a declaration from a document's start).
    private static func convert(_ bytes: ArraySlice<UInt8>, from name: String, source: String, partial: Bool = false) throws(FeedDocumentError) -> [UInt8] {
        guard let converter = iconvNames(name).lazy.map({ iconv_open("UTF-8", $0) }).first(where: { $0 != iconv_t(bitPattern: -1) }) else {
            throw FeedDocumentError(description: "in the encoding \"\(name)\" (its \(source) says so), which iconv does not know")
        }
        defer { iconv_close(converter) }
        var output = [UInt8](repeating: 0, count: bytes.count + bytes.count / 2 + 16)
        var written = 0
        var failure: Int?
        bytes.withUnsafeBufferPointer { input in
            var inputPointer = UnsafeMutablePointer(mutating: UnsafeRawPointer(input.baseAddress)?.assumingMemoryBound(to: CChar.self))
            var inputLeft = input.count
            while inputLeft > 0 {
                let outputLeftBefore = output.count - written
                var outputLeft = outputLeftBefore
                let result = output.withUnsafeMutableBytes { raw -> Int in
                    var outputPointer: UnsafeMutablePointer<CChar>? = raw.baseAddress!.advanced(by: written).assumingMemoryBound(to: CChar.self)
                    return iconv(converter, &inputPointer, &inputLeft, &outputPointer, &outputLeft)
                }
                written += outputLeftBefore - outputLeft
                guard result == -1 else { break }
                if errno == E2BIG {
                    output += [UInt8](repeating: 0, count: output.count)
                } else {
                    failure = input.count - inputLeft
                    break
                }
            }
        }
        output.removeSubrange(written...)
        if let failure, !partial {
            throw FeedDocumentError(description: "not valid \(name) (as its \(source) says it is) at byte \(failure)")
        }
        return output
    }
}
