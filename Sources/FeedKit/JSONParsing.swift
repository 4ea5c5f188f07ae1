import Foundation

extension JSONValue {
    /// Parses one JSON text (any value, not only objects) with Foundation's parsers.
    ///
    /// JSONSerialization is fast but rounds some non-integral numbers to a neighbouring Double
    /// (it reads `2.2222222222200023e+120` as `…037e+120`; the fuzzer found it), so a text holding
    /// any such number is read again with JSONDecoder, which is exact and slower.
    public init(parsing bytes: some Collection<UInt8>) throws(JSONParseError) {
        let data = Data(bytes)
        let object: Any
        do {
            object = try JSONSerialization.jsonObject(with: data, options: [.fragmentsAllowed])
        } catch {
            throw JSONParseError(description: Self.reason(error))
        }
        var hasInexactNumbers = false
        let converted = Self.converting(object, hasInexactNumbers: &hasInexactNumbers)
        guard hasInexactNumbers else {
            self = converted
            return
        }
        do {
            self = try JSONDecoder().decode(JSONValue.self, from: data)
        } catch {
            throw JSONParseError(description: Self.reason(error))
        }
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
    private static func converting(_ object: Any, hasInexactNumbers: inout Bool) -> JSONValue {
        switch object {
        case let string as String:
            return .string(string)
        case let number as NSNumber:
            switch UInt8(bitPattern: number.objCType.pointee) {
            case UInt8(ascii: "c"), UInt8(ascii: "B"):
                return .bool(number.boolValue)
            case UInt8(ascii: "d"), UInt8(ascii: "f"):
                hasInexactNumbers = true
                return .double(number.doubleValue)
            case UInt8(ascii: "Q"):
                let unsigned = number.uint64Value
                if unsigned <= UInt64(Int64.max) { return .integer(Int64(unsigned)) }
                hasInexactNumbers = true
                return .double(number.doubleValue)
            default:
                return .integer(number.int64Value)
            }
        case let array as [Any]:
            return .array(array.map { converting($0, hasInexactNumbers: &hasInexactNumbers) })
        case let dictionary as [String: Any]:
            return .object(dictionary.mapValues { converting($0, hasInexactNumbers: &hasInexactNumbers) })
        default:
            return .null
        }
    }
}

extension JSONValue: Codable {
    /// Decodes any JSON value. Strings are tried first, as the commonest kind, since every kind
    /// tried and missed costs a thrown error.
    public init(from decoder: any Decoder) throws {
        let single = try decoder.singleValueContainer()
        if single.decodeNil() {
            self = .null
        } else if let string = try? single.decode(String.self) {
            self = .string(string)
        } else if let object = try? decoder.container(keyedBy: MemberKey.self) {
            var members: [String: JSONValue] = [:]
            for key in object.allKeys { members[key.stringValue] = try object.decode(JSONValue.self, forKey: key) }
            self = .object(members)
        } else if var array = try? decoder.unkeyedContainer() {
            var elements: [JSONValue] = []
            while !array.isAtEnd { elements.append(try array.decode(JSONValue.self)) }
            self = .array(elements)
        } else if let flag = try? single.decode(Bool.self) {
            self = .bool(flag)
        } else if let integer = try? single.decode(Int64.self) {
            self = .integer(integer)
        } else {
            self = .double(try single.decode(Double.self))
        }
    }

    /// Encodes the value as the JSON it is.
    public func encode(to encoder: any Encoder) throws {
        var single = encoder.singleValueContainer()
        switch self {
        case .null: try single.encodeNil()
        case .bool(let flag): try single.encode(flag)
        case .integer(let integer): try single.encode(integer)
        case .double(let double): try single.encode(double)
        case .string(let string): try single.encode(string)
        case .array(let elements): try single.encode(elements)
        case .object(let members): try single.encode(members)
        }
    }

    private struct MemberKey: CodingKey {
        let stringValue: String
        init(stringValue: String) { self.stringValue = stringValue }
        var intValue: Int? { nil }
        init?(intValue: Int) { nil }
    }
}
