import FeedKit

/// How a text's characters are to be read: as text, as HTML (escaped or in CDATA, or inline), or
/// as bytes that are no text at all (an image in Atom `content`).
enum TextKind: Sendable {
    case text, html, markup, binary

    /// Atom's `type` and Atom 0.3's `mode` (RFC 4287 3.1.1 and 4.1.3, Atom 0.3 3.1): `text`,
    /// `html` and `xhtml` (the last's wrapping `div` dropped, as for `application/xhtml+xml` in
    /// an Atom 1.0 document), or a media type: `text/html` is HTML, other `text/…` text, `…/xml`
    /// and `…+xml` inline markup, anything else Base64. Atom 0.3's `mode="base64"` is Base64
    /// too, `mode="escaped"` escaped text.
    static func of(type: String?, mode: String?, default fallback: TextKind, atom10: Bool) -> (kind: TextKind, base64: Bool, unwrapsDiv: Bool) {
        let base64 = mode?.lowercased() == "base64"
        guard let type = type?.lowercased().trimmingCharacters(in: .whitespaces), !type.isEmpty else { return (fallback, base64, false) }
        switch type {
        case "text", "text/plain": return (.text, base64, false)
        case "html", "text/html": return (.html, base64, false)
        case "xhtml": return (.markup, base64, true)
        case "application/xhtml+xml": return (mode?.lowercased() == "escaped" ? .html : .markup, base64, atom10)
        default:
            if type.hasPrefix("text/") { return (.text, base64, false) }
            if type.hasSuffix("/xml") || type.hasSuffix("+xml") { return (mode?.lowercased() == "escaped" ? .html : .markup, base64, false) }
            return (.binary, true, false)
        }
    }
}

/// The fields an entry's elements fill (see ``ElementRole/slot``).
enum Field: Int, CaseIterable {
    case title, link, summary, content, published, updated
    /// `dc:date`: the publication time, else the update time, when neither is given otherwise.
    case date
    case author, guid, id
}

/// One field of the entry being read: where the best text found for it so far is in the batch's
/// bytes, by priority (0 first), the first of equal priority winning.
struct FieldSlot {
    private(set) var range: Range<Int> = 0..<0
    private(set) var priority: UInt8 = .max
    private(set) var kind: TextKind = .text
    /// The base URI a link's text is relative to, where the element was.
    private(set) var base = BaseNumber.document

    var isEmpty: Bool { priority == .max }

    func accepts(_ priority: UInt8) -> Bool { priority < self.priority }

    /// Takes the text at `range` (not empty, white space trimmed) if `priority` beats the
    /// slot's; whether it did.
    @discardableResult
    mutating func take(_ range: Range<Int>, priority: UInt8, kind: TextKind = .text, base: BaseNumber = .document) -> Bool {
        guard priority < self.priority, !range.isEmpty else { return false }
        self.range = range
        self.priority = priority
        self.kind = kind
        self.base = base
        return true
    }

    mutating func reset() {
        priority = .max
        base = .document
    }
}

/// Which base URI a link is relative to: the document's, or the reader's n-th `xml:base` (see
/// ``XMLEntryReader/uri(of:)``). A number, so that the slots and the capture do not retain and
/// release a string with every field and entry (perf, a 20k read: ~5% of the body's thread).
struct BaseNumber: Equatable {
    let value: Int32

    static let document = BaseNumber(value: 0)
}

/// Everything the reader has found of the entry being read, as places in its batch's bytes.
struct EntryFields {
    /// By ``Field``'s raw value.
    var slots = [FieldSlot](repeating: FieldSlot(), count: Field.allCases.count)
    /// Each category once, in document order.
    var categories: [Range<Int>] = []

    subscript(field: Field) -> FieldSlot { slots[field.rawValue] }

    @discardableResult
    mutating func take(_ field: Field, _ range: Range<Int>, priority: UInt8, kind: TextKind = .text, base: BaseNumber = .document) -> Bool {
        slots[field.rawValue].take(range, priority: priority, kind: kind, base: base)
    }

    mutating func reset() {
        for index in slots.indices where !slots[index].isEmpty { slots[index].reset() }
        categories.clear()
    }

    /// Adds the category at `range` of `bytes`, unless it is empty or the entry has it already;
    /// whether it did.
    mutating func addCategory(_ range: Range<Int>, in bytes: [UInt8]) -> Bool {
        guard !range.isEmpty, !categories.contains(where: { bytes[$0].elementsEqual(bytes[range]) }) else { return false }
        categories.append(range)
        return true
    }
}

extension Array {
    /// Empties the array, keeping its storage for the next entry; free when it is empty already.
    mutating func clear() {
        if !isEmpty { removeAll(keepingCapacity: true) }
    }
}

/// White space at both ends of a field's text, which feeds put there for layout only.
enum Trimming {
    static func isSpace(_ byte: UInt8) -> Bool {
        byte == 0x20 || byte == 0x0A || byte == 0x09 || byte == 0x0D
    }

    /// `range` of `bytes` without white space at either end.
    static func trimmed(_ range: Range<Int>, in bytes: [UInt8]) -> Range<Int> {
        var end = range.upperBound
        while end > range.lowerBound, isSpace(bytes[end - 1]) { end -= 1 }
        var start = range.lowerBound
        while start < end, isSpace(bytes[start]) { start += 1 }
        return start..<end
    }

    /// `bytes` without white space at either end.
    static func trimmed(_ bytes: ArraySlice<UInt8>) -> ArraySlice<UInt8> {
        var end = bytes.endIndex
        while end > bytes.startIndex, isSpace(bytes[end - 1]) { end -= 1 }
        var start = bytes.startIndex
        while start < end, isSpace(bytes[start]) { start += 1 }
        return bytes[start..<end]
    }
}
