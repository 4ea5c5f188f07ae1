/// A table of options from the config file: a feed's adapter options (its table minus the keys
/// the daemon itself reads), or the daemon's own `[daemon]` table.
///
/// A table declared with its keys (``ConfigKey``, as the daemon builds every table it reads)
/// knows its keys from them: ``unknownKeys`` are those present and not declared. A table
/// without declarations (an adapter's test building its options by hand) learns them by
/// reading: a key read is known. Accessors return `nil` for an absent key and throw
/// ``OptionError`` for a value of the wrong type or out of range.
public final class ConfigTable {
    /// The table's dotted name in the config file, such as `feeds.users`.
    public let name: String
    /// Every option as configured, for adapters that pass the table on (the `exec` adapter does).
    public let values: [String: JSONValue]
    /// The names of the declared keys; nil for a table without declarations.
    private let declaredNames: Set<String>?
    /// Declared with ``ConfigKey/otherKeys(_:)``: every key is known.
    private let acceptsOtherKeys: Bool
    private var readKeys: Set<String> = []

    /// A table named `name` holding `values`, whose keys are `declared` (nil: learnt by reading).
    public init(name: String, values: [String: JSONValue], declared: [ConfigKey]? = nil) {
        self.name = name
        self.values = values
        declaredNames = declared.map { Set($0.filter { !$0.isOtherKeys }.map(\.name)) }
        acceptsOtherKeys = declared?.contains(where: \.isOtherKeys) ?? false
    }

    /// The options of feed `feed`.
    public convenience init(feed: String, values: [String: JSONValue], declared: [ConfigKey]? = nil) {
        self.init(name: "feeds.\(feed)", values: values, declared: declared)
    }

    /// The keys present in the table that nothing read.
    public var unreadKeys: [String] {
        values.keys.filter { !readKeys.contains($0) }.sorted()
    }

    /// The keys present in the table that are not its own: not declared, or, for a table
    /// without declarations, never read.
    public var unknownKeys: [String] {
        guard let declaredNames else { return unreadKeys }
        if acceptsOtherKeys { return [] }
        return values.keys.filter { !declaredNames.contains($0) && !readKeys.contains($0) }.sorted()
    }

    /// The raw value of `key`, marking it as known.
    public func value(_ key: String) -> JSONValue? {
        // Reading a key its declarations lack would make the docs and "unknown key" wrong; debug
        // builds (every test) stop at it, naming the table and the key to declare.
        assert(
            declaredNames.map { $0.contains(key) || acceptsOtherKeys } ?? true,
            "\(name): \"\(key)\" is read but not declared; add a ConfigKey for it")
        readKeys.insert(key)
        return values[key]
    }

    /// Marks `keys` as known without reading them (options an adapter accepts and ignores).
    public func accept(_ keys: String...) {
        readKeys.formUnion(keys)
    }

    public func string(_ key: String) throws(OptionError) -> String? {
        try typed(key, expected: "a string") { $0.stringValue }
    }

    public func bool(_ key: String) throws(OptionError) -> Bool? {
        try typed(key, expected: "a boolean") { $0.boolValue }
    }

    /// A whole number written as a TOML integer: `2.0`, `1e3`, `inf`, `nan`, a date or a string is
    /// refused, not rounded or converted.
    public func integer(_ key: String, in range: ClosedRange<Int>) throws(OptionError) -> Int? {
        guard let integer = try typed(key, expected: "an integer", { value -> Int? in
            if case .integer(let integer) = value { return Int(integer) }
            return nil
        }) else {
            return nil
        }
        guard range.contains(integer) else {
            throw OptionError(table: name, key: key, message: "must be from \(range.lowerBound) to \(range.upperBound), got \(integer)")
        }
        return integer
    }

    /// A duration written as a string such as `"250ms"`, `"10s"`, `"5m"` (see ``parseDuration(_:)``).
    public func duration(_ key: String) throws(OptionError) -> Duration? {
        guard let text = try string(key) else { return nil }
        guard let duration = parseDuration(text) else {
            throw OptionError(table: name, key: key, message: "\"\(text)\" is not a duration (write e.g. \"250ms\", \"10s\", \"5m\", \"1h\")")
        }
        return duration
    }

    public func stringArray(_ key: String) throws(OptionError) -> [String]? {
        try typed(key, expected: "an array of strings") { value in
            guard let elements = value.arrayValue else { return nil }
            let strings = elements.compactMap(\.stringValue)
            return strings.count == elements.count ? strings : nil
        }
    }

    /// The string at `key`, or an ``OptionError`` saying it is required.
    public func requiredString(_ key: String) throws(OptionError) -> String {
        guard let string = try string(key) else { throw missing(key) }
        return string
    }

    /// The error for a required key that is absent.
    public func missing(_ key: String) -> OptionError {
        OptionError(table: name, key: key, message: "is required")
    }

    /// An error about the value of `key`, for checks the typed accessors cannot make.
    public func invalid(_ key: String, _ message: String) -> OptionError {
        OptionError(table: name, key: key, message: message)
    }

    private func typed<T>(_ key: String, expected: String, _ convert: (JSONValue) -> T?) throws(OptionError) -> T? {
        guard let value = value(key) else { return nil }
        guard let converted = convert(value) else {
            throw OptionError(table: name, key: key, message: "expected \(expected), got \(value.typeDescription)")
        }
        return converted
    }
}

/// A problem with one option of one table. The daemon adds the file, line and column.
public struct OptionError: Error, Sendable, Hashable, CustomStringConvertible {
    /// The table's dotted name, such as `feeds.users`.
    public let table: String
    public let key: String
    public let message: String

    public init(table: String, key: String, message: String) {
        self.table = table
        self.key = key
        self.message = message
    }

    public var description: String { "\(table).\(key): \(message)" }
}

/// The options an adapter receives: its feed's config table.
public typealias AdapterOptions = ConfigTable
