import Glibc

/// A page's items as a page line's `items` array already holds them, `[{"id":"1","data":…},…]`:
/// an adapter whose items are lines of JSON text with numbers for ids (a file) writes them once,
/// straight from its read buffer, instead of making an ``Item`` of each that the engine then
/// writes again (BENCHMARKS.md "The catch-up drain: written pages"). What any other adapter
/// returns is wrapped (``init(_:)``) and written when its page is encoded, as before.
///
/// Made only by an initialiser that checks what it writes: each line is kept as it is only if
/// it is one JSON text as ``RawJSON/init(validating:)`` accepts it (no line break, valid UTF-8,
/// within ``JSONDocument/maximumDepth``), so no adapter can hand over bytes that break the line
/// protocol. The bytes are exactly what ``Item`` writes for the same items.
public struct WrittenItems: Sendable {
    private enum Storage: Sendable {
        case items([Item])
        /// The array's bytes, each item's id and where its data lies in them.
        case written([UInt8], numbers: [Int], data: [Range<Int>])
        /// The array's bytes when every line was JSON, each item's id and where its line ended
        /// in the text (the caller's arrays, kept rather than a new one made for each page).
        case lines([UInt8], numbers: [Int], ends: [Int])
    }

    private let storage: Storage
    /// How many items there are.
    public let count: Int

    /// `items`, written when the page is encoded.
    public init(_ items: [Item]) {
        storage = .items(items)
        count = items.count
    }

    /// The lines of `text` as items whose ids are `numbers` in decimal (a file's line numbers):
    /// line 0 is `text[0..<ends[0]]`, line i + 1 starts one byte after `ends[i]`, as
    /// ``RawJSON/lines(of:endingAt:)`` cuts them. A line that is one JSON text is the item's data
    /// as it is; any other line (not JSON, not UTF-8, nested too deeply) is a JSON string of its
    /// text, invalid UTF-8 replaced by U+FFFD: what ``Item/init(id:json:feed:)`` of the line, or
    /// ``Item/init(id:data:feed:)`` of `.string(String(decoding: line, as: UTF8.self))`, writes.
    public init(lines text: [UInt8], endingAt ends: [Int], numbers: [Int]) {
        precondition(numbers.count == ends.count, "one number a line")
        let verdicts = RawJSON.verdicts(of: text, endingAt: ends)
        count = ends.count
        if verdicts.allSatisfy({ $0 }) && numbers.allSatisfy({ $0 >= 0 }) {
            storage = .lines(Self.writeJSONLines(text, endingAt: ends, numbers: numbers), numbers: numbers, ends: ends)
        } else {
            var data: [Range<Int>] = []
            data.reserveCapacity(ends.count)
            let bytes = Self.writeLines(text, endingAt: ends, numbers: numbers, verdicts: verdicts, data: &data)
            storage = .written(bytes, numbers: numbers, data: data)
        }
    }

    /// The items; made now from the written bytes, for a reader that looks inside (a test, an
    /// encoder of its own).
    public var items: [Item] {
        switch storage {
        case .items(let items):
            return items
        case .written(let bytes, let numbers, let data):
            // Each item's data alone, checked (or written as a string) when the items were: the
            // array as a whole may be nested two levels deeper than a document may be.
            return zip(numbers, data).map { Item(id: String($0), json: RawJSON(checked: bytes[$1])) }
        case .lines(let bytes, let numbers, let ends):
            // Where ``writeJSONLines(_:endingAt:numbers:)`` put each line.
            var items: [Item] = []
            var position = 1, start = 0
            for (number, end) in zip(numbers, ends) {
                if !items.isEmpty { position += 1 }
                position += Self.opening.count + Self.digitCount(number) + Self.dataKey.count
                items.append(Item(id: String(number), json: RawJSON(checked: bytes[position..<position + end - start])))
                position += end - start + 1
                start = end + 1
            }
            return items
        }
    }

    /// Writes the items as a page line's `items`, `[…]`, as ``Item/write(_:to:)`` writes them.
    package func write(to writer: inout JSONWriter) {
        switch storage {
        case .items(let items): Item.write(items, to: &writer)
        case .written(let bytes, _, _), .lines(let bytes, _, _): writer.bytes.append(contentsOf: bytes)
        }
    }

    /// About how many bytes ``write(to:)`` writes, to size a page's buffer.
    package var estimatedSize: Int {
        switch storage {
        case .items(let items): Item.estimatedSize(of: items)
        case .written(let bytes, _, _), .lines(let bytes, _, _): bytes.count
        }
    }

    private static let opening = Array(#"{"id":""#.utf8)
    private static let dataKey = Array(#"","data":"#.utf8)

    /// Every line JSON, every number ≥ 0: the array written at its exact size, each item's
    /// opening, id and `"data":` put down together before its line is copied.
    private static func writeJSONLines(_ text: [UInt8], endingAt ends: [Int], numbers: [Int]) -> [UInt8] {
        let perItem = opening.count + dataKey.count + 2  // and `}` and `,` (or `]` after the last)
        var size = 2 + ends.count * perItem - (ends.isEmpty ? 0 : 1)
        var start = 0
        for index in ends.indices {
            size += ends[index] - start + digitCount(numbers[index])
            start = ends[index] + 1
        }
        return [UInt8](unsafeUninitializedCapacity: size) { buffer, initialized in
            var out = buffer.baseAddress!
            out.pointee = UInt8(ascii: "[")
            out += 1
            text.withUnsafeBufferPointer { text in
                var start = 0
                for index in ends.indices {
                    if index > 0 {
                        out.pointee = UInt8(ascii: ",")
                        out += 1
                    }
                    out.update(from: opening, count: opening.count)
                    out += opening.count
                    out = writeDecimal(numbers[index], at: out)
                    out.update(from: dataKey, count: dataKey.count)
                    out += dataKey.count
                    let length = ends[index] - start
                    if length > 0 { memcpy(out, text.baseAddress! + start, length) }
                    out += length
                    out.pointee = UInt8(ascii: "}")
                    out += 1
                    start = ends[index] + 1
                }
            }
            out.pointee = UInt8(ascii: "]")
            out += 1
            initialized = out - buffer.baseAddress!
            precondition(initialized == size, "written items sized wrongly")
        }
    }

    /// The general case: lines that are not JSON become strings, as the items of them would.
    private static func writeLines(_ text: [UInt8], endingAt ends: [Int], numbers: [Int], verdicts: [Bool], data: inout [Range<Int>]) -> [UInt8] {
        var writer = JSONWriter(reservingCapacity: text.count + ends.count * 32 + 2)
        writer.raw(UInt8(ascii: "["))
        var start = 0
        for index in ends.indices {
            if index > 0 { writer.raw(UInt8(ascii: ",")) }
            writer.raw("{\"id\":")
            writer.string(String(numbers[index]))
            writer.raw(",\"data\":")
            let line = text[start..<ends[index]]
            let dataStart = writer.bytes.count
            if verdicts[index] {
                writer.bytes.append(contentsOf: line)
            } else {
                writer.string(String(decoding: line, as: UTF8.self))
            }
            data.append(dataStart..<writer.bytes.count)
            writer.raw(UInt8(ascii: "}"))
            start = ends[index] + 1
        }
        writer.raw(UInt8(ascii: "]"))
        return writer.bytes
    }

    private static func digitCount(_ number: Int) -> Int {
        var count = 1
        var rest = number / 10
        while rest > 0 {
            count += 1
            rest /= 10
        }
        return count
    }

    /// Writes `number` (≥ 0) in decimal at `out`; where it ends.
    private static func writeDecimal(_ number: Int, at out: UnsafeMutablePointer<UInt8>) -> UnsafeMutablePointer<UInt8> {
        let end = out + digitCount(number)
        var cursor = end
        var rest = number
        repeat {
            cursor -= 1
            cursor.pointee = UInt8(ascii: "0") + UInt8(rest % 10)
            rest /= 10
        } while rest > 0
        return end
    }
}

/// What an adapter answers to a ``PageRequest`` asked through
/// ``SourceAdapter/fetch(_:writtenPages:)``: a ``FetchResult`` whose items are written.
public enum WrittenFetchResult: Sendable {
    /// The page's items, in order, and how the page after it is fetched.
    case page(WrittenItems, next: NextPage)
    /// As ``FetchResult/notYet``.
    case notYet

    /// `result`, its items wrapped.
    public init(_ result: FetchResult) {
        switch result {
        case .page(let items, let next): self = .page(WrittenItems(items), next: next)
        case .notYet: self = .notYet
        }
    }
}
