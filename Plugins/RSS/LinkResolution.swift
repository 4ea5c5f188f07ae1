import CLibXML2

/// Links resolved against their base URI (RFC 3986 section 5, by libxml2's resolver): an entry's
/// link against the `xml:base` in force where it is written, else the document's `Content-Location`,
/// else the document's URL.
enum LinkResolution {
    /// `link` resolved against `base`; a link that is already absolute is given as it is written.
    static func resolve(_ link: ArraySlice<UInt8>, against base: String) -> String {
        resolution(of: link, against: base) ?? String(decoding: link, as: UTF8.self)
    }

    /// `link` resolved against `base`, or nil where it stands as it is written: it is absolute,
    /// there is no base, or it cannot be resolved.
    static func resolution(of link: ArraySlice<UInt8>, against base: String) -> String? {
        guard !hasScheme(link), !base.isEmpty else { return nil }
        return resolved(String(decoding: link, as: UTF8.self), against: base)
    }

    /// `value` (an `xml:base` or a `Content-Location`) resolved against `base`, if the result
    /// can be the base of a feed's links: a base in another scheme (`javascript:`) is ignored.
    static func resolveBase(_ value: String, against base: String) -> String? {
        let trimmed = value.trimmingCharacters(in: .whitespaces)
        guard let absolute = hasScheme(trimmed.utf8) ? trimmed : resolved(trimmed, against: base) else { return nil }
        guard let colon = absolute.firstIndex(of: ":"), baseSchemes.contains(absolute[..<colon].lowercased()) else { return nil }
        return absolute
    }

    private static let baseSchemes: Set<String> = ["http", "https", "ftp", "file", "feed"]

    /// Whether `text` starts with a URI scheme (`http:`, `mailto:`, `tag:`).
    private static func hasScheme(_ text: some Sequence<UInt8>) -> Bool {
        var utf8 = text.makeIterator()
        guard let first = utf8.next(), (first | 0x20) &- UInt8(ascii: "a") < 26 else { return false }
        while let byte = utf8.next() {
            if byte == UInt8(ascii: ":") { return true }
            let isSchemeByte = (byte | 0x20) &- UInt8(ascii: "a") < 26 || byte &- UInt8(ascii: "0") < 10 || byte == UInt8(ascii: "+")
                || byte == UInt8(ascii: "-") || byte == UInt8(ascii: ".")
            if !isSchemeByte { return false }
        }
        return false
    }

    private static func resolved(_ reference: String, against base: String) -> String? {
        guard let result = feedd_resolve_uri(reference, base) else { return nil }
        defer { feedd_xml_free(result) }
        return String(cString: result)
    }
}
