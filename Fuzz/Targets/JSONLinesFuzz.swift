// Fuzz target: any bytes read as a page of lines (split at each line break), checked together by
// RawJSON.lines(of:endingAt:), as the file adapter checks a page.
// Invariant: every line gets the verdict RawJSON(validating:) gives it alone, and keeps its bytes.
// The pass over the whole page must never accept a line the one-by-one check refuses (a value
// that runs on into the next line, two values on one line) nor refuse one it accepts.
// And the same page written at once, as the file adapter hands it over (WrittenItems), is byte
// for byte the items array of the items made one by one: a line's JSON as it is, any other line
// a JSON string of its text; no adapter's bytes can reach a page line any other way.
import Foundation

@_cdecl("LLVMFuzzerTestOneInput")
public func fuzzJSONLines(_ data: UnsafePointer<UInt8>, _ size: Int) -> CInt {
    let text = Array(UnsafeBufferPointer(start: data, count: size))
    var ends: [Int] = []
    for (offset, byte) in text.enumerated() where byte == UInt8(ascii: "\n") { ends.append(offset) }
    ends.append(text.count)
    let together = RawJSON.lines(of: text, endingAt: ends)
    precondition(together.count == ends.count, "a verdict missing")
    var start = 0
    for (end, line) in zip(ends, together) {
        let alone = RawJSON(validating: text[start..<end])
        precondition((alone == nil) == (line == nil), "line \(start)..<\(end) checked together disagrees with it alone")
        if let line { precondition(line.bytes.elementsEqual(text[start..<end]), "a line's bytes changed") }
        start = end + 1
    }
    let numbers = Array(1...ends.count)
    var expected = JSONWriter(reservingCapacity: text.count * 2 + 64)
    start = 0
    let items = zip(zip(ends, together), numbers).map { (line, number) -> Item in
        let (end, json) = line
        defer { start = end + 1 }
        if let json { return Item(id: String(number), json: json) }
        return Item(id: String(number), data: .string(String(decoding: text[start..<end], as: UTF8.self)))
    }
    Item.write(items, to: &expected)
    var written = JSONWriter(reservingCapacity: text.count * 2 + 64)
    let page = WrittenItems(lines: text, endingAt: ends, numbers: numbers)
    page.write(to: &written)
    precondition(written.bytes == expected.bytes, "written items differ from the items written")
    precondition(page.items == items, "written items read back differ from the items")
    return 0
}
