import Foundation

/// Why some bytes are not a JSON value.
public struct JSONParseError: Error, Sendable, CustomStringConvertible {
    public let description: String
}

extension JSONValue {
    /// Parses one JSON text (any value, not only objects) with Foundation's parser.
    public init(parsing bytes: some Collection<UInt8>) throws(JSONParseError) {
        let data = Data(bytes)
        let object: Any
        do {
            object = try JSONSerialization.jsonObject(with: data, options: [.fragmentsAllowed])
        } catch {
            throw JSONParseError(description: Self.reason(error))
        }
        self = Self.converting(object)
    }

    /// Parses one JSON text given as a string.
    public init(parsing text: String) throws(JSONParseError) {
        try self.init(parsing: Array(text.utf8))
    }

    private static func reason(_ error: any Error) -> String {
        let nsError = error as NSError
        if let detail = nsError.userInfo[NSDebugDescriptionErrorKey] as? String { return detail }
        return "not valid JSON"
    }

    /// Foundation hands back NSNumber for numbers and booleans alike; the Objective-C type
    /// code is the only reliable way to tell `true` from `1` on Linux.
    private static func converting(_ object: Any) -> JSONValue {
        switch object {
        case let string as String:
            return .string(string)
        case let number as NSNumber:
            switch UInt8(bitPattern: number.objCType.pointee) {
            case UInt8(ascii: "c"), UInt8(ascii: "B"):
                return .bool(number.boolValue)
            case UInt8(ascii: "d"), UInt8(ascii: "f"):
                return .double(number.doubleValue)
            case UInt8(ascii: "Q"):
                let unsigned = number.uint64Value
                return unsigned <= UInt64(Int64.max) ? .integer(Int64(unsigned)) : .double(number.doubleValue)
            default:
                return .integer(number.int64Value)
            }
        case let array as [Any]:
            return .array(array.map(converting))
        case let dictionary as [String: Any]:
            return .object(dictionary.mapValues(converting))
        default:
            return .null
        }
    }
}
