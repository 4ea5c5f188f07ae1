import FeedEngine
import FeedKit
import FeedServer
import Testing

/// A page whose items an adapter wrote (``WrittenItems``) is encoded into the very line the
/// items would make, and an encoder that knows only items still gets equal items.
@Suite struct WrittenPageLineTests {
    /// Lines of every kind a file holds: JSON of several shapes, text, invalid UTF-8, too deep.
    static let lines: [[UInt8]] = [
        #"{"a":1,"b":[true,null,"é"]}"#, "plain text", "  42  ", #""s\"\\\u0001""#, #"{"x":"\#u{1}"}"#,
        String(repeating: "[", count: 600) + String(repeating: "]", count: 600), "[1,", "",
    ].map { Array($0.utf8) } + [[0xFF, 0xFE], [UInt8(ascii: "\""), 0xC3, UInt8(ascii: "\"")]]

    static func joined(_ lines: [[UInt8]]) -> (text: [UInt8], ends: [Int]) {
        var text: [UInt8] = [], ends: [Int] = []
        for line in lines {
            if !ends.isEmpty { text.append(UInt8(ascii: "\n")) }
            text += line
            ends.append(text.count)
        }
        return (text, ends)
    }

    static func items(_ lines: [[UInt8]], numbers: [Int]) -> [Item] {
        zip(lines, numbers).map { line, number in
            RawJSON(validating: line).map { Item(id: String(number), json: $0) } ?? Item(id: String(number), data: .string(String(decoding: line, as: UTF8.self)))
        }
    }

    @Test(arguments: [0, 1, 3, 10])
    func a_written_page_line_is_the_line_of_its_items_byte_for_byte(count: Int) {
        let lines = Array((0..<count).map { Self.lines[$0 % Self.lines.count] })
        let numbers = (0..<count).map { $0 * 997 + 1 }
        let (text, ends) = Self.joined(lines)
        let written = WrittenItems(lines: text, endingAt: ends, numbers: numbers)
        let encoder = PageLineEncoder()
        for isLast in [false, true] {
            let fromWritten = encoder.encode(feed: "f\"eed", generation: 3, number: 17, written: written, isLast: isLast)
            let fromItems = encoder.encode(feed: "f\"eed", generation: 3, number: 17, items: Self.items(lines, numbers: numbers), isLast: isLast)
            #expect(Array(fromWritten.buffer) == Array(fromItems.buffer))
            #expect(fromWritten.buffer.last == UInt8(ascii: "\n") && fromWritten.buffer.dropLast().allSatisfy { $0 != 0x0A && $0 != 0x0D })
        }
    }

    /// An encoder of its own (a test's, say) that writes from items gets the items back.
    @Test func an_encoder_of_items_gets_equal_items_from_written_ones() {
        struct Recording: PageEncoder {
            let seen = Locked<[Item]>([])
            func encode(feed: String, generation: Int, number: Int, items: [Item], isLast: Bool) -> SharedBytes {
                seen.withLock { $0 = items }
                return SharedBytes(Array("}\n".utf8))
            }
        }
        let lines = Array(Self.lines.prefix(7))
        let (text, ends) = Self.joined(lines)
        let encoder = Recording()
        _ = encoder.encode(feed: "f", generation: 1, number: 1, written: WrittenItems(lines: text, endingAt: ends, numbers: Array(1...7)), isLast: false)
        #expect(encoder.seen.withLock { $0 } == Self.items(lines, numbers: Array(1...7)))
    }
}
