/// A JSON value, as items carry it from a source to subscribers.
///
/// Numbers keep the distinction between integers and everything else so that an
/// id like `17` never comes back as `17.0`. Object keys are written sorted, which
/// makes every encoding of the same value the same bytes.
public enum JSONValue: Sendable, Hashable {
    case null
    case bool(Bool)
    case integer(Int64)
    case double(Double)
    case string(String)
    case array([JSONValue])
    case object([String: JSONValue])
}

extension JSONValue {
    /// The member `key` of an object; `nil` for a missing key or a value that is not an object.
    public subscript(key: String) -> JSONValue? {
        if case .object(let members) = self { return members[key] }
        return nil
    }

    /// The string, if this is one.
    public var stringValue: String? {
        if case .string(let string) = self { return string }
        return nil
    }

    /// The integer, if this is an integral number.
    public var integerValue: Int64? {
        switch self {
        case .integer(let value): return value
        case .double(let value) where value.rounded() == value && abs(value) < 9.0e18: return Int64(value)
        default: return nil
        }
    }

    /// The boolean, if this is one.
    public var boolValue: Bool? {
        if case .bool(let value) = self { return value }
        return nil
    }

    /// The elements, if this is an array.
    public var arrayValue: [JSONValue]? {
        if case .array(let elements) = self { return elements }
        return nil
    }

    /// The members, if this is an object.
    public var objectValue: [String: JSONValue]? {
        if case .object(let members) = self { return members }
        return nil
    }

    /// A short name of the value's JSON type, for error messages ("expected a string, got an array").
    public var typeDescription: String {
        switch self {
        case .null: return "null"
        case .bool: return "a boolean"
        case .integer: return "an integer"
        case .double: return "a number"
        case .string: return "a string"
        case .array: return "an array"
        case .object: return "a table"
        }
    }
}

extension JSONValue: ExpressibleByStringLiteral, ExpressibleByIntegerLiteral, ExpressibleByBooleanLiteral,
    ExpressibleByArrayLiteral, ExpressibleByDictionaryLiteral, ExpressibleByNilLiteral, ExpressibleByFloatLiteral
{
    /// `"text"` as a JSON string, and the other literals as their JSON values.
    public init(stringLiteral value: String) { self = .string(value) }
    /// `3` as a JSON integer.
    public init(integerLiteral value: Int64) { self = .integer(value) }
    /// `2.5` as a JSON number.
    public init(floatLiteral value: Double) { self = .double(value) }
    /// `true` as a JSON boolean.
    public init(booleanLiteral value: Bool) { self = .bool(value) }
    /// `[…]` as a JSON array.
    public init(arrayLiteral elements: JSONValue...) { self = .array(elements) }
    /// `nil` as JSON `null`.
    public init(nilLiteral: ()) { self = .null }
    /// `[key: value, …]` as a JSON object (a key given twice keeps its last value).
    public init(dictionaryLiteral elements: (String, JSONValue)...) {
        self = .object(Dictionary(elements, uniquingKeysWith: { _, last in last }))
    }
}
