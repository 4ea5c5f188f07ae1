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
        root = converted["value"]?.objectValue ?? [:]
        var positions: [[String]: (line: Int, column: Int)] = [:]
        for entry in converted["positions"]?.arrayValue ?? [] {
            guard let fields = entry.arrayValue, fields.count >= 2,
                let line = fields[0].integerValue, let column = fields[1].integerValue
            else { continue }
            positions[fields.dropFirst(2).compactMap(\.stringValue)] = (Int(line), Int(column))
        }
        self.positions = positions
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
