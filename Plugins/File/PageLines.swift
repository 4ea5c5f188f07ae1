import FeedKit

/// A page's lines gathered into one buffer: they are checked as JSON together, in one call of the
/// parser, and the items of those that are JSON share the buffer instead of an allocation each.
/// The check of a 67-byte line alone cost 1,789 instructions, most of it per call (callgrind,
/// BENCHMARKS.md "The drain in instructions").
struct PageLines {
    private var text: [UInt8] = []
    /// Where each line ends in `text`; the next starts one byte later, past a line break.
    private var ends: [Int] = []
    private var numbers: [Int] = []

    init(pageSize: Int) {
        ends.reserveCapacity(min(pageSize, 1 << 12))
        numbers.reserveCapacity(min(pageSize, 1 << 12))
    }

    var count: Int { ends.count }

    mutating func append(_ line: LineReader.Line) {
        if ends.isEmpty {
            // Room for a page of lines like the first, within reason.
            text.reserveCapacity(min((line.text.count + 1) * ends.capacity, 1 << 20))
        } else {
            text.append(UInt8(ascii: "\n"))
        }
        text.append(contentsOf: line.text)
        ends.append(text.count)
        numbers.append(line.number)
    }

    /// Each line as an item whose id is its line number: a line that is JSON carried as its own
    /// text, anything else as a string.
    func items() -> [Item] {
        let json = RawJSON.lines(of: text, endingAt: ends)
        var items: [Item] = []
        items.reserveCapacity(ends.count)
        var start = 0
        for index in ends.indices {
            let id = String(numbers[index])
            if let json = json[index] {
                items.append(Item(id: id, json: json))
            } else {
                items.append(Item(id: id, data: .string(String(decoding: text[start..<ends[index]], as: UTF8.self))))
            }
            start = ends[index] + 1
        }
        return items
    }

    /// The lines written as a page line's items, ids their line numbers, each as ``items()``
    /// would make it: no ``Item`` made.
    func written() -> WrittenItems {
        WrittenItems(lines: text, endingAt: ends, numbers: numbers)
    }
}
