import CSimdJSON

/// One value in a ``JSONDocument``, read where it lies in the text.
///
/// Accessors answer nil for a value of another kind, as ``JSONValue``'s do. A number is kept as
/// written: ``numberText`` is exact whatever its size, ``integerValue`` only what fits in 64 bits.
public struct JSONElement: Sendable {
    /// The document the value is in; it lives as long as the element.
    public let document: JSONDocument
    let index: Int

    init(document: JSONDocument, index: Int) {
        self.document = document
        self.index = index
    }

    /// What kind of JSON value this is.
    public enum Kind: Sendable, Hashable {
        case null, bool, number, string, array, object
    }

    private var entry: feedd_json_entry { document.entries[index] }

    public var kind: Kind {
        switch entry.shape & FEEDD_JSON_KIND_MASK {
        case FEEDD_JSON_NULL.rawValue: .null
        case FEEDD_JSON_FALSE.rawValue, FEEDD_JSON_TRUE.rawValue: .bool
        case FEEDD_JSON_NUMBER.rawValue: .number
        case FEEDD_JSON_STRING.rawValue: .string
        case FEEDD_JSON_ARRAY.rawValue: .array
        default: .object
        }
    }

    /// The value's JSON text as the source wrote it (compacted onto one line if it spanned several).
    public var raw: RawJSON {
        let bytes = document.bytes(of: index)
        guard document.hasLineBreaks, bytes.contains(where: { $0 == 0x0A || $0 == 0x0D }) else { return RawJSON(checked: bytes) }
        return RawJSON(checked: bytes.withUnsafeBufferPointer { text in
            Array(unsafeUninitializedCapacity: text.count) { compact, count in
                count = feedd_json_minify(text.baseAddress, text.count, compact.baseAddress)
            }
        }[...])
    }

    /// The value's JSON text as a string, for messages.
    public var jsonText: String { String(decoding: document.bytes(of: index), as: UTF8.self) }

    public var isNull: Bool { kind == .null }

    public var boolValue: Bool? {
        switch entry.shape & FEEDD_JSON_KIND_MASK {
        case FEEDD_JSON_TRUE.rawValue: true
        case FEEDD_JSON_FALSE.rawValue: false
        default: nil
        }
    }

    /// The string's value, escapes resolved.
    public var stringValue: String? { kind == .string ? document.string(at: index) : nil }

    /// The number exactly as written, such as `17`, `-2.5e-3` or `123456789012345678901234567890`.
    public var numberText: String? { kind == .number ? jsonText : nil }

    /// Whether this is a number written without a fraction or an exponent, of any size.
    public var isInteger: Bool { entry.shape & FEEDD_JSON_INTEGER != 0 }

    /// The number, if it is written as an integer that fits in 64 bits.
    public var integerValue: Int64? { isInteger ? Int64(jsonText) : nil }

    /// The number as the nearest double (±infinity beyond its range).
    public var doubleValue: Double? { kind == .number ? Double(jsonText) : nil }

    /// An array's elements or an object's members; 0 for anything else.
    public var count: Int {
        kind == .array || kind == .object ? Int(entry.shape >> FEEDD_JSON_COUNT_SHIFT) : 0
    }

    /// The elements, if this is an array.
    public var elements: Elements? {
        kind == .array ? Elements(positions: positions(valueOffset: 0)) { JSONElement(document: $0, index: $1) } : nil
    }

    /// The members, if this is an object.
    public var members: Members? {
        kind == .object ? Members(positions: positions(valueOffset: 1)) { ($0.string(at: $1), JSONElement(document: $0, index: $1 + 1)) } : nil
    }

    private func positions(valueOffset: Int) -> Positions {
        Positions(document: document, position: index + 1, left: count, valueOffset: valueOffset)
    }

    /// The member `key` of an object; nil for a missing key or a value that is not an object.
    public subscript(key: String) -> JSONElement? { member(Substring(key)) }

    private func member(_ name: Substring) -> JSONElement? {
        guard kind == .object, let key = positions(valueOffset: 1).first(where: { document.string(at: $0, equals: name) }) else { return nil }
        return JSONElement(document: document, index: key + 1)
    }

    private func element(_ position: Int) -> JSONElement? {
        guard kind == .array, position < count else { return nil }
        var positions = positions(valueOffset: 0)
        for _ in 0..<position { _ = positions.next() }
        return positions.next().map { JSONElement(document: document, index: $0) }
    }

    /// The value at `path` below this one (``DotPath``'s rules: member names, or decimal indexes
    /// into arrays); nil where a member or an index is missing.
    public func value(at path: DotPath) -> JSONElement? {
        var current = self
        for component in path.components {
            switch current.kind {
            case .object:
                guard let member = current.member(component) else { return nil }
                current = member
            case .array:
                guard component.utf8.allSatisfy({ (UInt8(ascii: "0")...UInt8(ascii: "9")).contains($0) }), let position = Int(component),
                    let element = current.element(position)
                else { return nil }
                current = element
            default:
                return nil
            }
        }
        return current
    }

    /// A short name of the value's JSON type, for error messages, as ``JSONValue/typeDescription``.
    public var typeDescription: String {
        switch kind {
        case .null: "null"
        case .bool: "a boolean"
        case .number: isInteger ? "an integer" : "a number"
        case .string: "a string"
        case .array: "an array"
        case .object: "a table"
        }
    }

    /// The values of an array, in order.
    public typealias Elements = Values<JSONElement>
    /// The members of an object, in the order written.
    public typealias Members = Values<(key: String, value: JSONElement)>

    /// A container's values (``Elements``) or members (``Members``), read in turn.
    public struct Values<Value>: Sequence, Sendable {
        let positions: Positions
        let value: @Sendable (JSONDocument, Int) -> Value
        public var count: Int { positions.left }
        public var underestimatedCount: Int { count }

        public func makeIterator() -> Iterator { Iterator(positions: positions, value: value) }

        public struct Iterator: IteratorProtocol {
            var positions: Positions
            let value: @Sendable (JSONDocument, Int) -> Value

            public mutating func next() -> Value? { positions.next().map { value(positions.document, $0) } }
        }
    }

    /// The entries of a container's values in turn (of an object's member names, each followed
    /// by its value), stepping over everything inside each.
    struct Positions: Sequence, IteratorProtocol, Sendable {
        let document: JSONDocument
        var position: Int
        var left: Int
        /// 1 in an object, where the entry to step over is the value after the name.
        let valueOffset: Int

        mutating func next() -> Int? {
            guard left > 0 else { return nil }
            left -= 1
            defer { position = Int(document.entries[position + valueOffset].next) }
            return position
        }
    }
}

extension JSONElement {
    /// The value as a tree, for the few readers that need one. A number that is not an integer
    /// within 64 bits becomes the nearest double (±infinity beyond its range).
    public var value: JSONValue {
        switch kind {
        case .null: return .null
        case .bool: return .bool(boolValue!)
        case .number:
            if let integer = integerValue { return .integer(integer) }
            return .double(doubleValue ?? .nan)
        case .string: return .string(stringValue!)
        case .array: return .array(elements!.map(\.value))
        case .object:
            var members: [String: JSONValue] = [:]
            members.reserveCapacity(count)
            for (key, value) in self.members! { members[key] = value.value }
            return .object(members)
        }
    }

    /// The value written as ``JSONValue/serialized`` writes the same value (members sorted by
    /// name, strings escaped alike, numbers in the same form), except that a number a double
    /// cannot hold exactly keeps its own text: what a content hash of an item is taken over, so
    /// that the same data keeps its id however the source spaced it, ordered its members or
    /// escaped its strings.
    package var canonicalText: [UInt8] {
        var writer = JSONWriter(reservingCapacity: Int(entry.end - entry.start))
        writeCanonical(to: &writer)
        return writer.bytes
    }

    private func writeCanonical(to writer: inout JSONWriter) {
        switch kind {
        case .null, .bool:
            writer.bytes.append(contentsOf: document.bytes(of: index))
        case .number:
            if let integer = integerValue {
                writer.number(integer)
            } else if !isInteger, let double = doubleValue, double.isFinite {
                writer.number(double)
            } else {
                writer.bytes.append(contentsOf: document.bytes(of: index))
            }
        case .string:
            writer.string(stringValue!)
        case .array:
            writer.raw(UInt8(ascii: "["))
            for (position, element) in elements!.enumerated() {
                if position > 0 { writer.raw(UInt8(ascii: ",")) }
                element.writeCanonical(to: &writer)
            }
            writer.raw(UInt8(ascii: "]"))
        case .object:
            writer.raw(UInt8(ascii: "{"))
            for (position, member) in members!.sorted(by: { $0.key < $1.key }).enumerated() {
                if position > 0 { writer.raw(UInt8(ascii: ",")) }
                writer.string(member.key)
                writer.raw(UInt8(ascii: ":"))
                member.value.writeCanonical(to: &writer)
            }
            writer.raw(UInt8(ascii: "}"))
        }
    }
}
