import CJSONValidator

/// One JSON text kept as its own bytes, checked once: an adapter whose source already speaks
/// JSON (a line of a file, say) hands it on without parsing it into a ``JSONValue`` tree, which
/// costs many times the text's size in memory and most of the time spent on a page.
///
/// The bytes go to subscribers exactly as they came (key order and spacing kept), so they must
/// not contain a line break outside strings; the check guarantees they are one valid JSON text
/// (RFC 8259, UTF-8), and the bytes of a line never hold a newline.
public struct RawJSON: Sendable, Hashable {
    /// The JSON text.
    public let bytes: [UInt8]

    /// `bytes` if they are exactly one JSON text without a newline; nil otherwise.
    public init?(validating bytes: some Collection<UInt8>) {
        let bytes = Array(bytes)
        guard !bytes.contains(UInt8(ascii: "\n")) else { return nil }
        let valid = bytes.withUnsafeBufferPointer { feedd_json_is_valid($0.baseAddress, $0.count) == 1 }
        guard valid else { return nil }
        self.bytes = bytes
    }

    /// The value the text holds, parsed (for the rare reader that needs to look inside).
    public var value: JSONValue {
        // Validated at init: a failure here would be a disagreement between the two parsers.
        (try? JSONValue(parsing: bytes)) ?? .null
    }
}
