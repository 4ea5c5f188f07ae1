import FeedKit
import Foundation

/// One entry of a feed document as the `rss` adapter publishes it: its id, its time, and its JSON
/// `{"title","link","published","updated","summary","author","categories"}` (times in RFC 3339, a
/// missing field null), written once as text while the document is read.
public struct FeedEntry: Sendable, Hashable {
    /// `guid`, else `atom:id` (a JSON Feed item's `id`), else the link, else a hash of the JSON.
    public let id: String
    /// When it was published, else last updated: what "newest" means.
    public let time: FeedTime?
    public let json: RawJSON

    /// The entry as a page item.
    public var item: Item { Item(id: id, json: json) }
}

/// The seven fields of an entry, as bytes in the document's text, on their way to JSON.
struct EntryValues {
    var title: ArraySlice<UInt8>?
    var link: String?
    var published: FeedTime?
    var updated: FeedTime?
    var summary: ArraySlice<UInt8>?
    var author: ArraySlice<UInt8>?
    var categories: [ArraySlice<UInt8>] = []

    /// The entry, with its id from `guid`, else `id`, else the link, else a hash of its JSON; nil
    /// only if its text is not UTF-8, which the readers never let through.
    func entry(guid: ArraySlice<UInt8>?, id: ArraySlice<UInt8>?) -> FeedEntry? {
        var writer = JSONWriter(reservingCapacity: 64 + (title?.count ?? 0) + (summary?.count ?? 0) + (link?.utf8.count ?? 0))
        writer.raw("{")
        writer.key("title")
        writer.feedText(title)
        writer.raw(",")
        writer.key("link")
        if let link { writer.string(link) } else { writer.raw("null") }
        writer.raw(",")
        writer.key("published")
        writer.time(published)
        writer.raw(",")
        writer.key("updated")
        writer.time(updated)
        writer.raw(",")
        writer.key("summary")
        writer.feedText(summary)
        writer.raw(",")
        writer.key("author")
        writer.feedText(author)
        writer.raw(",")
        writer.key("categories")
        if categories.isEmpty {
            writer.raw("null")
        } else {
            writer.raw("[")
            for (index, category) in categories.enumerated() {
                if index > 0 { writer.raw(",") }
                writer.feedText(category)
            }
            writer.raw("]")
        }
        writer.raw("}")
        guard let json = RawJSON(validating: writer.bytes) else { return nil }
        let identifier = [guid, id].lazy.compactMap { $0 }.first { !$0.isEmpty }.map { String(decoding: $0, as: UTF8.self) }
            ?? link.flatMap { $0.isEmpty ? nil : $0 } ?? StableHash.hex(writer.bytes)
        return FeedEntry(id: identifier, time: published ?? updated, json: json)
    }
}

extension JSONWriter {
    /// A JSON string of a feed's text, or null; C1 control characters (U+0080 to U+009F), which
    /// no feed means as such, become the Windows-1252 characters their bytes stand for, as
    /// browsers and feedparser read them (a `&#147;` or a Latin-1 document's `0x93` is “).
    mutating func feedText(_ text: ArraySlice<UInt8>?) {
        guard let text else { return raw("null") }
        raw(UInt8(ascii: "\""))
        text.withUnsafeBufferPointer { utf8 in
            var runStart = 0
            var index = 0
            while index < utf8.count {
                let byte = utf8[index]
                guard var replacement = JSONText.replacements[Int(byte)] else {
                    index += 1
                    continue
                }
                var length = 1
                if byte == 0xC2 {
                    guard index + 1 < utf8.count, let character = JSONText.windows1252(utf8[index + 1]) else {
                        index += 1
                        continue
                    }
                    (replacement, length) = (character, 2)
                }
                bytes.append(contentsOf: UnsafeBufferPointer(rebasing: utf8[runStart..<index]))
                bytes.append(contentsOf: replacement)
                index += length
                runStart = index
            }
            bytes.append(contentsOf: UnsafeBufferPointer(rebasing: utf8[runStart..<utf8.count]))
        }
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
private enum JSONText {
    /// What a byte becomes in a JSON string, for those that do not stand for themselves: control
    /// characters, `"` and `\\` escaped, and 0xC2, which may start a C1 control (see ``windows1252(_:)``).
    static let replacements: [[UInt8]?] = (0...255).map { byte -> [UInt8]? in
        switch byte {
        case 0x22: Array(#"\""#.utf8)
        case 0x5C: Array(#"\\"#.utf8)
        case 0x0A: Array(#"\n"#.utf8)
        case 0x0D: Array(#"\r"#.utf8)
        case 0x09: Array(#"\t"#.utf8)
        case 0xC2: []
        case ..<0x20: Array(String(format: "\\u%04x", byte).utf8)
        default: nil
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
