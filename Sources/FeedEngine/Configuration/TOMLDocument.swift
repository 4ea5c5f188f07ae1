import CTOMLShim
import FeedKit

/// A parsed TOML file: its value as JSON and the position of every key, for error messages.
struct TOMLDocument {
    let file: String
    let root: [String: JSONValue]
    private let positions: [[String]: (line: Int, column: Int)]

    /// Parses `text`; a syntax error is reported with the parser's line and column.
    init(file: String, text: String) throws(ConfigError) {
        self.file = file
        var text = text
        let result = text.withUTF8 { feedd_toml_parse($0.baseAddress, $0.count) }
        defer { feedd_toml_free(result) }
        if let error = result.error {
            throw ConfigError([
                ConfigProblem(
                    file: file, line: result.error_line > 0 ? Int(result.error_line) : nil,
                    column: result.error_column > 0 ? Int(result.error_column) : nil,
                    message: String(cString: error))
            ])
        }
        let converted: JSONValue
        do {
            converted = try JSONValue(parsing: String(cString: result.json!))
        } catch {
            throw ConfigError([ConfigProblem(file: file, message: "internal error converting TOML: \(error)")])
        }
        var root = converted["value"] ?? [:]
        for path in converted["floats"]?.arrayValue ?? [] {
            Self.markFloat(at: (path.arrayValue ?? []).compactMap(\.stringValue)[...], in: &root)
        }
        self.root = root.objectValue ?? [:]
        var positions: [[String]: (line: Int, column: Int)] = [:]
        for entry in converted["positions"]?.arrayValue ?? [] {
            guard let fields = entry.arrayValue, fields.count >= 2,
                let line = fields[0].integerValue, let column = fields[1].integerValue
            else { continue }
            positions[fields.dropFirst(2).compactMap(\.stringValue)] = (Int(line), Int(column))
        }
        self.positions = positions
    }

    /// The value that `text` writes in TOML (`20`, `"10s"`, `["a", "b"]`), or nil if it is not one.
    static func value(parsing text: String) -> JSONValue? {
        try? TOMLDocument(file: "value", text: "value = \(text)\n").root["value"]
    }

    /// Makes the number at `path` a `.double`, as the TOML file wrote it (`2.0`, `1e3`), however
    /// the JSON reader gave it back. Components are keys, or indices into arrays.
    private static func markFloat(at path: ArraySlice<String>, in value: inout JSONValue) {
        guard let first = path.first else {
            if case .integer(let integer) = value { value = .double(Double(integer)) }
            return
        }
        switch value {
        case .object(var members):
            guard var member = members[first] else { return }
            value = .null
            markFloat(at: path.dropFirst(), in: &member)
            members[first] = member
            value = .object(members)
        case .array(var elements):
            guard let index = Int(first), elements.indices.contains(index) else { return }
            value = .null
            markFloat(at: path.dropFirst(), in: &elements[index])
            value = .array(elements)
        default:
            return
        }
    }

    /// A problem at the key `path` (or, where that key is absent, at the nearest table that holds it).
    func problem(at path: [String], _ message: String) -> ConfigProblem {
        var path = path
        while !path.isEmpty {
            if let position = positions[path] {
                return ConfigProblem(file: file, line: position.line, column: position.column, message: message)
            }
            path.removeLast()
        }
        return ConfigProblem(file: file, message: message)
    }

    /// Where `path` is written, as `FILE:LINE:COL`, for messages that name two places.
    func location(of path: [String]) -> String {
        guard let position = positions[path] else { return file }
        return "\(file):\(position.line):\(position.column)"
    }
}

extension JSONValue {
    /// The value `text` writes in TOML (`30`, `true`, `"x"`, `["a", "b"]`), or nil if it is not
    /// one: for values given on a command line (`feedd plugin check --option limit=30`).
    public init?(tomlValue text: String) {
        guard let value = TOMLDocument.value(parsing: text) else { return nil }
        self = value
    }
}
