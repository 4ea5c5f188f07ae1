import FeedKit

/// A key of a merged table and the file it was read from.
typealias MergedValue = (document: TOMLDocument, value: JSONValue)
/// A table whose keys merge across files: the first file that has it, and each key as the last
/// file that sets it wrote it.
typealias MergedSection = (document: TOMLDocument, keys: [String: MergedValue])

/// The top-level tables of every file, merged: keys of `[daemon]` (and the other sections) from
/// later files win, and a feed may be defined in one file only.
struct MergedTables {
    /// The top-level tables besides `[feeds.NAME]`.
    static let sectionNames = ["daemon", "cluster", "http"]

    private(set) var sections: [String: MergedSection] = [:]
    private(set) var feeds: [String: (document: TOMLDocument, table: [String: JSONValue])] = [:]

    /// The merged table `name`, or nil where no file has it.
    func section(_ name: String) -> MergedSection? { sections[name] }

    mutating func add(_ document: TOMLDocument, problems: inout [ConfigProblem]) {
        for (key, value) in document.root {
            if key == "feeds" {
                guard let table = value.objectValue else {
                    problems.append(document.problem(at: [key], "feeds: expected a table of feeds"))
                    continue
                }
                for (name, feed) in table {
                    addFeed(name, feed, from: document, problems: &problems)
                }
            } else if Self.sectionNames.contains(key) {
                guard let table = value.objectValue else {
                    problems.append(document.problem(at: [key], "\(key): expected a table"))
                    continue
                }
                if sections[key] == nil { sections[key] = (document, [:]) }
                for (name, setting) in table { sections[key]!.keys[name] = (document, setting) }
            } else {
                let expected = Self.sectionNames.map { "[\($0)]" }.joined(separator: ", ") + " or [feeds.NAME]"
                let suggestion = SpellingSuggestion.didYouMean(key, among: Self.sectionNames + ["feeds"])
                problems.append(document.problem(at: [key], "\(key): unknown table (expected \(expected))\(suggestion)"))
            }
        }
    }

    private mutating func addFeed(_ name: String, _ value: JSONValue, from document: TOMLDocument, problems: inout [ConfigProblem]) {
        guard FeedName.isValid(name) else {
            problems.append(document.problem(at: ["feeds", name], "feeds.\(name): a feed name must match [a-z0-9][a-z0-9_-]{0,63}"))
            return
        }
        guard let table = value.objectValue else {
            problems.append(document.problem(at: ["feeds", name], "feeds.\(name): expected a table"))
            return
        }
        if let earlier = feeds[name] {
            let first = earlier.document.location(of: ["feeds", name])
            problems.append(document.problem(at: ["feeds", name], "feeds.\(name): feed \"\(name)\" is defined twice, in \(first) and here"))
            return
        }
        feeds[name] = (document, table)
    }
}
