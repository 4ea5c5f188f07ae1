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

    /// The lines of `text`, each as a JSON text if ``init(validating:)`` accepts it, else nil: line 0
    /// is `text[0..<ends[0]]`, line i + 1 starts one byte after `ends[i]` (past the line break
    /// between them). They are checked together, in one pass of the parser, whose cost for a
    /// line of a few dozen bytes is mostly per call (a page of them checked line by line spent
    /// 1,789 instructions a line, most of a drain's budget), and they share `text`'s storage.
    public static func lines(of text: [UInt8], endingAt ends: [Int]) -> [RawJSON?] {
        let valid = verdicts(of: text, endingAt: ends)
        var lines: [RawJSON?] = []
        lines.reserveCapacity(ends.count)
        var start = 0
        for (end, valid) in zip(ends, valid) {
            lines.append(valid ? RawJSON(checked: text[start..<end]) : nil)
            start = end + 1
        }
        return lines
    }

    /// Whether each line of `text` (as ``lines(of:endingAt:)`` cuts them) is one JSON text that
    /// ``init(validating:)`` accepts, checked together in one pass of the parser; for a caller
    /// that writes the lines on itself instead of keeping each as a ``RawJSON`` (``WrittenItems``).
    public static func verdicts(of text: [UInt8], endingAt ends: [Int]) -> [Bool] {
        precondition(
            (ends.first ?? 0) >= 0 && (ends.last ?? 0) <= text.count && zip(ends, ends.dropFirst()).allSatisfy { $0 < $1 },
            "line ends out of order or outside the text")
        // An empty text holds only empty lines, none of them JSON.
        guard !text.isEmpty else { return [Bool](repeating: false, count: ends.count) }
        // The parser writes 0 or 1 a line: a Bool's two values, so straight into the verdicts.
        return [Bool](unsafeUninitializedCapacity: ends.count) { valid, initialized in
            text.withUnsafeBufferPointer { text in
                ends.withUnsafeBufferPointer { ends in
                    UnsafeMutableRawBufferPointer(valid).withMemoryRebound(to: UInt8.self) { valid in
                        feedd_json_lines_valid(text.baseAddress, ends.baseAddress, ends.count, JSONDocument.maximumDepth, valid.baseAddress)
                    }
                }
            }
            initialized = ends.count
        }
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
