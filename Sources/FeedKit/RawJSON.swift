import CSimdJSON
import Glibc

/// One JSON text kept as its own bytes, checked once: an adapter whose source already speaks
/// JSON (a line of a file, a value in an upstream body) hands it on without parsing it into a
/// ``JSONValue`` tree, which costs many times the text's size in memory and most of the time
/// spent on a page.
///
/// The bytes go to subscribers exactly as they came (key order, spacing, numbers of any size),
/// so they never contain a line break: JSON allows one only as whitespace between tokens, and a
/// value taken from a document that has some is compacted first (``JSONElement/raw``). They are
/// one JSON text as ``JSONDocument`` accepts it.
public struct RawJSON: Sendable, Hashable {
    /// The JSON text: a view of the bytes it was read from, which a value taken from a
    /// ``JSONDocument`` shares with the document's other values.
    public let bytes: ArraySlice<UInt8>

    /// `bytes` if they are exactly one JSON text, as ``JSONDocument`` accepts it, without a
    /// line break; nil otherwise.
    public init?(validating bytes: some Collection<UInt8>) {
        let bytes = Array(bytes)
        let valid = bytes.withUnsafeBufferPointer { text in
            guard let start = text.baseAddress else { return false }
            return memchr(start, 0x0A, text.count) == nil && memchr(start, 0x0D, text.count) == nil
                && feedd_json_is_valid(start, text.count, JSONDocument.maximumDepth) == 1
        }
        guard valid else { return nil }
        self.bytes = bytes[...]
    }

    /// `bytes` that a writer built as one JSON text, escaping every string it wrote itself (the
    /// `rss` adapter's entries, whose fuzz target, xml-entries, checks each against
    /// ``init(validating:)``): only what came from outside is checked, that the text is UTF-8
    /// without a line break; nil otherwise. A whole validation would cost more than the writing.
    package init?(written bytes: [UInt8]) {
        let valid = bytes.withUnsafeBufferPointer { text in
            guard let start = text.baseAddress else { return false }
            return memchr(start, 0x0A, text.count) == nil && memchr(start, 0x0D, text.count) == nil && feedd_utf8_is_valid(start, text.count) == 1
        }
        guard valid else { return nil }
        self.bytes = bytes[...]
    }

    /// Bytes already checked, by a ``JSONDocument``.
    init(checked bytes: ArraySlice<UInt8>) {
        self.bytes = bytes
    }

    /// The value the text holds, as a tree (for the rare reader that needs to look inside).
    public var value: JSONValue {
        // Checked at init: a failure here would be a disagreement between two runs of one parser.
        (try? JSONDocument(parsing: bytes))?.root.value ?? .null
    }
}
