/// Writes JSON as UTF-8 straight into a byte buffer.
///
/// Every outgoing line is built with this writer rather than `JSONEncoder`, which is an order of
/// magnitude slower; a page line is built once and its bytes are shared by every subscriber.
package struct JSONWriter: Sendable {
    /// The bytes written so far.
    package var bytes: [UInt8]

    package init(reservingCapacity capacity: Int = 256) {
        bytes = []
        bytes.reserveCapacity(capacity)
    }

    package mutating func raw(_ text: StaticString) {
        text.withUTF8Buffer { bytes.append(contentsOf: $0) }
    }

    package mutating func raw(_ byte: UInt8) {
        bytes.append(byte)
    }

    package mutating func value(_ value: JSONValue) {
        switch value {
        case .null: raw("null")
        case .bool(let flag): flag ? raw("true") : raw("false")
        case .integer(let integer): number(integer)
        case .double(let double): number(double)
        case .string(let string): self.string(string)
        case .array(let elements):
            raw(UInt8(ascii: "["))
            for (index, element) in elements.enumerated() {
                if index > 0 { raw(UInt8(ascii: ",")) }
                self.value(element)
            }
            raw(UInt8(ascii: "]"))
        case .object(let members):
            raw(UInt8(ascii: "{"))
            for (index, key) in members.keys.sorted().enumerated() {
                if index > 0 { raw(UInt8(ascii: ",")) }
                string(key)
                raw(UInt8(ascii: ":"))
                self.value(members[key]!)
            }
            raw(UInt8(ascii: "}"))
        }
    }

    package mutating func number(_ integer: some BinaryInteger) {
        guard let value = Int64(exactly: integer) else { return bytes.append(contentsOf: String(integer).utf8) }
        // The digits written straight into the bytes: going through `String(_:)` was a third of
        // encoding an `ack` line (callgrind of an ack storm).
        withUnsafeTemporaryAllocation(of: UInt8.self, capacity: 20) { digits in
            var magnitude = value.magnitude
            var start = digits.count
            repeat {
                start -= 1
                digits[start] = UInt8(ascii: "0") + UInt8(magnitude % 10)
                magnitude /= 10
            } while magnitude > 0
            if value < 0 { bytes.append(UInt8(ascii: "-")) }
            bytes.append(contentsOf: UnsafeBufferPointer(rebasing: digits[start...]))
        }
    }

    package mutating func number(_ double: Double) {
        guard double.isFinite else { return raw("null") }
        // An integral value Int64 holds is written as the integer it exactly is, so it reads back
        // as the same integer however it was spelt; anything else in Swift's shortest round-trip
        // form. The bound is exactly Int64's: under a rounder one (9.2e18), 9.222222222222222e18
        // was written with an exponent, read back as an integer and wrote other digits (fuzzer).
        if let integer = Int64(exactly: double) {
            return number(integer)
        }
        bytes.append(contentsOf: double.description.utf8)
    }

    /// A JSON string: quotes, backslashes and control characters escaped, everything else as UTF-8.
    package mutating func string(_ string: String) {
        raw(UInt8(ascii: "\""))
        var string = string
        string.withUTF8 { utf8 in
            var runStart = 0
            for index in 0..<utf8.count {
                let byte = utf8[index]
                guard byte < 0x20 || byte == UInt8(ascii: "\"") || byte == UInt8(ascii: "\\") else { continue }
                bytes.append(contentsOf: UnsafeBufferPointer(rebasing: utf8[runStart..<index]))
                runStart = index + 1
                switch byte {
                case UInt8(ascii: "\""): raw("\\\"")
                case UInt8(ascii: "\\"): raw("\\\\")
                case 0x0A: raw("\\n")
                case 0x0D: raw("\\r")
                case 0x09: raw("\\t")
                default:
                    raw("\\u00")
                    bytes.append(Self.hexDigits[Int(byte >> 4)])
                    bytes.append(Self.hexDigits[Int(byte & 0x0F)])
                }
            }
            bytes.append(contentsOf: UnsafeBufferPointer(rebasing: utf8[runStart..<utf8.count]))
        }
        raw(UInt8(ascii: "\""))
    }

    /// Writes `"key":` for the next member of an object the caller is building.
    package mutating func key(_ key: StaticString) {
        raw(UInt8(ascii: "\""))
        raw(key)
        raw("\":")
    }

    private static let hexDigits: [UInt8] = Array("0123456789abcdef".utf8)
}

extension JSONValue {
    /// This value as compact JSON text.
    package var serialized: [UInt8] {
        var writer = JSONWriter()
        writer.value(self)
        return writer.bytes
    }

    /// This value as compact JSON text in a `String`.
    package var jsonText: String { String(decoding: serialized, as: UTF8.self) }
}
