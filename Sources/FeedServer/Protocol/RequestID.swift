import FeedKit

/// A request's `id`, kept as the exact JSON text the client sent, so that every reply echoes it
/// byte for byte (SPEC §5): `123456789012345678901234567890` stays that integer, `1.50` stays `1.50`.
public struct RequestID: Sendable, Hashable, CustomStringConvertible {
    /// The id's JSON text, without surrounding whitespace.
    public let json: [UInt8]

    public init(json: [UInt8]) {
        self.json = json
    }

    public var description: String { String(decoding: json, as: UTF8.self) }

    /// The text of the member `"id"` of the JSON object in `line`, which must already be known to be
    /// valid JSON. A member named twice gives its last value, as the JSON parser does.
    static func find(in line: ArraySlice<UInt8>) -> RequestID? {
        var scanner = MemberScanner(bytes: line)
        var found: RequestID?
        while let (key, value) = scanner.nextMember() {
            if key.elementsEqual("\"id\"".utf8) || (key.contains(UInt8(ascii: "\\")) && (try? JSONValue(parsing: key)) == "id") {
                found = RequestID(json: Array(value))
            }
        }
        return found
    }
}

/// Walks the top-level members of a valid JSON object, giving each key's and value's raw text.
private struct MemberScanner {
    let bytes: ArraySlice<UInt8>
    var index: Int

    init(bytes: ArraySlice<UInt8>) {
        self.bytes = bytes
        index = bytes.startIndex
        skipWhitespace()
        if index < bytes.endIndex, bytes[index] == UInt8(ascii: "{") { index += 1 } else { index = bytes.endIndex }
    }

    mutating func nextMember() -> (key: ArraySlice<UInt8>, value: ArraySlice<UInt8>)? {
        skipWhitespace()
        if index < bytes.endIndex, bytes[index] == UInt8(ascii: ",") { index += 1 }
        skipWhitespace()
        guard index < bytes.endIndex, bytes[index] == UInt8(ascii: "\"") else { return nil }
        let keyStart = index
        skipString()
        let key = bytes[keyStart..<index]
        skipWhitespace()
        guard index < bytes.endIndex, bytes[index] == UInt8(ascii: ":") else { return nil }
        index += 1
        skipWhitespace()
        let valueStart = index
        skipValue()
        return (key, bytes[valueStart..<index])
    }

    private mutating func skipWhitespace() {
        while index < bytes.endIndex, [0x20, 0x09, 0x0A, 0x0D].contains(bytes[index]) { index += 1 }
    }

    /// From an opening quote to just past its closing quote.
    private mutating func skipString() {
        index += 1
        while index < bytes.endIndex {
            switch bytes[index] {
            case UInt8(ascii: "\\"): index += 2
            case UInt8(ascii: "\""):
                index += 1
                return
            default: index += 1
            }
        }
        index = min(index, bytes.endIndex)
    }

    /// One value: a string, an array or object with all it nests, or a scalar up to the next delimiter.
    private mutating func skipValue() {
        var depth = 0
        while index < bytes.endIndex {
            switch bytes[index] {
            case UInt8(ascii: "\""):
                skipString()
                if depth == 0 { return }
                continue
            case UInt8(ascii: "{"), UInt8(ascii: "["):
                depth += 1
            case UInt8(ascii: "}"), UInt8(ascii: "]"):
                if depth == 0 { return }
                depth -= 1
                if depth == 0 {
                    index += 1
                    return
                }
            case UInt8(ascii: ","), 0x20, 0x09, 0x0A, 0x0D:
                if depth == 0 { return }
            default:
                break
            }
            index += 1
        }
    }
}
