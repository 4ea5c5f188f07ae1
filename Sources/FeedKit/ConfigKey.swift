/// One key of a config table, declared once: its name, what it holds, its default and what it
/// does. The loader knows a table's keys from these declarations (a key nobody declares is an
/// unknown key, with a "did you mean" among the declared ones), `feedd check-config` warns from
/// their types, and `feedd config-keys` prints them, which is what `feedd.toml(5)` is built from.
///
/// An adapter declares its own keys in ``SourceAdapter/configKeys``:
///
/// ```swift
/// public static let configKeys = [
///     ConfigKey("words", .stringArray, .value(#"["hello", "hola", "salut"]"#), "the greetings, in order"),
/// ]
/// ```
public struct ConfigKey: Sendable, Hashable {
    /// The key as the config writes it: `page_size`.
    public let name: String
    /// What the value is, as the docs say it.
    public let type: ConfigValueType
    /// What leaving the key out means.
    public let defaultValue: ConfigDefault
    /// What the key does, in one line for people (no final period).
    public let summary: String

    /// Declares key `name`.
    public init(_ name: String, _ type: ConfigValueType, _ defaultValue: ConfigDefault, _ summary: String) {
        self.name = name
        self.type = type
        self.defaultValue = defaultValue
        self.summary = summary
    }

    /// Declares that every key not declared otherwise is accepted and handed on, as `summary`
    /// says (the `exec` adapter passes them to its program, which judges them).
    public static func otherKeys(_ summary: String) -> ConfigKey {
        ConfigKey(otherKeysName, .described("any"), .unset, summary)
    }

    /// Whether this is the ``otherKeys(_:)`` declaration rather than a key of its own.
    public var isOtherKeys: Bool { name == Self.otherKeysName }

    private static let otherKeysName = "*"
}

/// What a config key holds, as its accessor on ``ConfigTable`` reads it.
public enum ConfigValueType: Sendable, Hashable, CustomStringConvertible {
    /// Any string (``ConfigTable/string(_:)``).
    case string
    /// A TOML integer (``ConfigTable/integer(_:in:)``).
    case integer
    /// `true` or `false` (``ConfigTable/bool(_:)``).
    case boolean
    /// A string such as `"250ms"`, `"10s"`, `"5m"` (``ConfigTable/duration(_:)``).
    case duration
    /// A size such as `"512KiB"`, `"64MiB"`, `"1GiB"`, or a whole number of bytes.
    case size
    /// An array whose elements are strings (``ConfigTable/stringArray(_:)``).
    case stringArray
    /// A table whose values are strings (HTTP header fields).
    case stringTable
    /// One of these strings.
    case oneOf([String])
    /// A string naming a path, used as ``PathUse`` says.
    case path(PathUse)
    /// Anything else, in words: "array of user names or uids".
    case described(String)

    /// The type in words, as `feedd config-keys` prints it.
    public var description: String {
        switch self {
        case .string: "string"
        case .integer: "integer"
        case .boolean: "boolean"
        case .duration: "duration"
        case .size: "size"
        case .stringArray: "array of strings"
        case .stringTable: "table of strings"
        case .oneOf(let choices): choices.map { "\"\($0)\"" }.joined(separator: " | ")
        case .path(.file): "path of a file"
        case .path(.fileToWrite): "path of a file to write"
        case .path(.directory): "path of a directory"
        case .described(let words): words
        }
    }
}

/// How a path key is used, so `check-config` can warn about a path that cannot work yet.
public enum PathUse: Sendable, Hashable {
    /// A file read when the feed runs: `check-config` warns if there is none yet.
    case file
    /// A file the daemon writes: `check-config` warns if its directory does not exist.
    case fileToWrite
    /// A directory the daemon creates if it is missing.
    case directory
}

/// What a config key means when the config leaves it out.
public enum ConfigDefault: Sendable, Hashable {
    /// The key must be given. `example` is a value as the config would write it
    /// (`"/var/lib/feedd/notes.ndjson"`), shown in the docs.
    case required(example: String)
    /// Nothing by default; the summary says what leaving it out means.
    case unset
    /// The value assumed, as the config would write it: `20`, `"10s"`, `false`.
    case value(String)
    /// A default that is not one value, in words: "daemon.prefetch".
    case described(String)
}
