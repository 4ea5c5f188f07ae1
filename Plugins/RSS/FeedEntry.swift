import FeedKit
import Foundation

/// One entry of a feed document as the `rss` adapter publishes it: its id, its time, and its JSON
/// `{"title","link","published","updated","summary","author","categories"}` (times in RFC 3339, a
/// missing field null).
///
/// The adapter's own pages do not go through this type: they are written from the batches the
/// reader built (see ``BuiltBatch``), a page at a time. This is the document's entries one by
/// one, for a reader of the document alone (``FeedDocument/entries(in:context:)``), written by the
/// same code.
public struct FeedEntry: Sendable, Hashable {
    /// `guid`, else `atom:id` (a JSON Feed item's `id`), else the link, else a hash of the JSON.
    public let id: String
    /// When it was published, else last updated: what "newest" means.
    public let time: FeedTime?
    public let json: RawJSON

    /// The entry as a page item.
    public var item: Item { Item(id: id, json: json) }
}

extension JSONWriter {
    /// A JSON string of a feed's text; C1 control characters (U+0080 to U+009F), which
    /// no feed means as such, become the Windows-1252 characters their bytes stand for, as
    /// browsers and feedparser read them (a `&#147;` or a Latin-1 document's `0x93` is “).
    mutating func feedText(_ utf8: UnsafeBufferPointer<UInt8>) {
        raw(UInt8(ascii: "\""))
        var runStart = 0
        var index = 0
        while index < utf8.count {
            // Eight bytes at a time while none of them needs care, which is nearly always.
            if index + 8 <= utf8.count, !JSONText.needsCare(UnsafeRawPointer(utf8.baseAddress! + index).loadUnaligned(as: UInt64.self)) {
                index += 8
                continue
            }
            let byte = utf8[index]
            guard JSONText.needsCare(byte) else {
                index += 1
                continue
            }
            let replacement: [UInt8]
            var length = 1
            if byte == 0xC2 {
                guard index + 1 < utf8.count, let character = JSONText.windows1252(utf8[index + 1]) else {
                    index += 1
                    continue
                }
                (replacement, length) = (character, 2)
            } else {
                replacement = JSONText.escapes[Int(byte)]
            }
            bytes.append(contentsOf: UnsafeBufferPointer(rebasing: utf8[runStart..<index]))
            bytes.append(contentsOf: replacement)
            index += length
            runStart = index
        }
        bytes.append(contentsOf: UnsafeBufferPointer(rebasing: utf8[runStart..<utf8.count]))
        raw(UInt8(ascii: "\""))
    }

    /// A time as an RFC 3339 JSON string, or null.
    mutating func time(_ time: FeedTime?) {
        guard let time else { return raw("null") }
        raw(UInt8(ascii: "\""))
        time.appendRFC3339(to: &bytes)
        raw(UInt8(ascii: "\""))
    }
}

/// How feed text is written into a JSON string.
enum JSONText {
    /// Whether a byte does not stand for itself in a JSON string: control characters, `"` and
    /// `\\`, and 0xC2, which may start a C1 control (see ``windows1252(_:)``).
    static func needsCare(_ byte: UInt8) -> Bool {
        byte < 0x20 || byte == 0x22 || byte == 0x5C || byte == 0xC2
    }

    /// Whether any of eight bytes needs care: the bit tricks of "Bit Twiddling Hacks" (a byte
    /// below 0x20; a byte equal to one of three values).
    static func needsCare(_ word: UInt64) -> Bool {
        let ones: UInt64 = 0x0101_0101_0101_0101
        let highs: UInt64 = 0x8080_8080_8080_8080
        func hasZero(_ value: UInt64) -> Bool { (value &- ones) & ~value & highs != 0 }
        let control = (word &- ones &* 0x20) & ~word & highs != 0
        return control || hasZero(word ^ (ones &* 0x22)) || hasZero(word ^ (ones &* 0x5C)) || hasZero(word ^ (ones &* 0xC2))
    }

    /// What a byte that needs care (but 0xC2) becomes.
    static let escapes: [[UInt8]] = (0...255).map { byte -> [UInt8] in
        switch byte {
        case 0x22: Array(#"\""#.utf8)
        case 0x5C: Array(#"\\"#.utf8)
        case 0x0A: Array(#"\n"#.utf8)
        case 0x0D: Array(#"\r"#.utf8)
        case 0x09: Array(#"\t"#.utf8)
        case ..<0x20: Array(String(format: "\\u%04x", byte).utf8)
        default: [UInt8(byte)]
        }
    }

    /// The UTF-8 bytes of what Windows-1252 puts where ISO-8859-1 and Unicode have the C1 control
    /// whose second UTF-8 byte is `byte` (U+0080 is C2 80); nil for a byte outside 0x80...0x9F,
    /// or one Windows-1252 leaves undefined.
    static func windows1252(_ byte: UInt8) -> [UInt8]? {
        guard byte >= 0x80, byte <= 0x9F else { return nil }
        return characters[Int(byte - 0x80)]
    }

    private static let characters: [[UInt8]?] = [
        "€", nil, "‚", "ƒ", "„", "…", "†", "‡", "ˆ", "‰", "Š", "‹", "Œ", nil, "Ž", nil,
        nil, "‘", "’", "“", "”", "•", "–", "—", "˜", "™", "š", "›", "œ", nil, "ž", "Ÿ",
    ].map { $0.map { Array($0.utf8) } }
}
