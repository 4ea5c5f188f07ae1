import FeedEngine
import FeedKit

/// `feedd config-keys`: every key of the configuration as the code declares it, for people
/// (a table), scripts (JSON lines) and `feedd.toml(5)` (scdoc, which doc/man/build puts in the page).
struct ConfigKeysCommand {
    let reference: ConfigReference

    /// The text to print, or a usage error for a TABLE that is neither a table nor a source.
    func render(_ format: ConfigKeysFormat, section name: String?) throws(UsageError) -> String {
        var sections = reference.sections
        if let name {
            sections = sections.filter { $0.name == name }
            guard !sections.isEmpty else {
                let names = reference.sections.map(\.name)
                let suggestion = SpellingSuggestion.didYouMean(name, among: names)
                throw UsageError(description: "no table or source \"\(name)\"\(suggestion) (there are \(names.joined(separator: ", ")))")
            }
        }
        switch format {
        case .text: return sections.map(text).joined(separator: "\n")
        case .json: return sections.flatMap(json).joined()
        case .scdoc: return sections.map(scdoc).joined(separator: "\n")
        }
    }

    private func text(_ section: ConfigReference.Section) -> String {
        let width = section.keys.map { name(of: $0).count }.max() ?? 0
        let typeWidth = section.keys.map { $0.type.description.count }.max() ?? 0
        var lines = [section.heading]
        for key in section.keys {
            let columns = [name(of: key).padded(to: width), key.type.description.padded(to: typeWidth), defaultText(key.defaultValue)]
            lines.append("  " + columns.joined(separator: "  ").trailingSpacesRemoved)
            lines.append("      \(key.summary)")
        }
        return lines.joined(separator: "\n") + "\n"
    }

    private func json(_ section: ConfigReference.Section) -> [String] {
        section.keys.map { key in
            var object: [String: JSONValue] = [
                "table": .string(section.name), "heading": .string(section.heading), "name": .string(name(of: key)),
                "type": .string(key.type.description), "summary": .string(key.summary),
            ]
            switch key.defaultValue {
            case .required(let example): object["required"] = true; object["example"] = .string(example)
            case .unset: object["default"] = .null
            case .value(let text), .described(let text): object["default"] = .string(text)
            }
            return String(decoding: JSONValue.object(object).serialized, as: UTF8.self) + "\n"
        }
    }

    private func scdoc(_ section: ConfigReference.Section) -> String {
        let title =
            switch section.name {
            case "daemon", "cluster": section.heading
            case "feeds": "\(section.heading), every feed"
            // roff takes quotes in a heading as its own: "the exec source", not source = "exec".
            default: "[feeds.NAME] of the \(section.name) source"
            }
        var lines = ["## \(Scdoc.escaped(title))", ""]
        for key in section.keys {
            let name = key.isOtherKeys ? "any other key" : "*\(Scdoc.escaped(key.name))*"
            var facts = [Scdoc.escaped(key.type.description)]
            let defaultText = defaultText(key.defaultValue)
            if !defaultText.isEmpty { facts.append(Scdoc.escaped(defaultText)) }
            lines.append("\(name) (\(facts.joined(separator: "; ")))")
            let sentence = key.summary.prefix(1).uppercased() + key.summary.dropFirst()
            lines.append("\t\(Scdoc.escaped(sentence))\(sentence.hasSuffix("…") ? "" : ".")")
            lines.append("")
        }
        return lines.joined(separator: "\n")
    }

    private func name(of key: ConfigKey) -> String { key.isOtherKeys ? "(any other key)" : key.name }

    private func defaultText(_ value: ConfigDefault) -> String {
        switch value {
        case .required(let example): "required, e.g. \(example)"
        case .unset: ""
        case .value(let text): "default \(text)"
        case .described(let words): "default: \(words)"
        }
    }

}

extension String {
    fileprivate func padded(to width: Int) -> String {
        count >= width ? self : self + String(repeating: " ", count: width - count)
    }

    fileprivate var trailingSpacesRemoved: String {
        String(self[..<(lastIndex { $0 != " " }.map { index(after: $0) } ?? startIndex)])
    }
}
