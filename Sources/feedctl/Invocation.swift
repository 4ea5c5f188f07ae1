import FeedKit

/// A command line checked against the ``FeedctlCommand`` table, before anything connects.
struct Invocation: Sendable {
    var command: FeedctlCommand
    /// The operands, by name (`FEED`, `N`), as given.
    var operands: [String: String] = [:]
    var socketPath: String?
    var json = false
    /// `next --wait DURATION`.
    var wait: Duration?
    /// `ack --force`.
    var force = false
    /// `help --scdoc`.
    var scdoc = false
    /// `--version`, anywhere: print the version and nothing else.
    var version = false

    subscript(operand: String) -> String? { operands[operand] }

    /// A command line that makes no sense: feedctl prints it with the command's usage and exits 2.
    struct UsageError: Error {
        let message: String
        /// The command whose usage to show; nil shows every command.
        let command: FeedctlCommand?

        /// A bare `feedctl`, answered with the whole help.
        static let noCommand = "no command given"
    }

    /// Parses the words after `feedctl`. `--help` anywhere asks for help with the command given.
    static func parse(_ arguments: [String]) throws(UsageError) -> Invocation {
        var words: [String] = []
        var options: [(name: String, value: String?)] = []
        var remaining = arguments[...]
        var onlyOperands = false
        while let word = remaining.popFirst() {
            if onlyOperands || !word.hasPrefix("-") || word == "-" {
                words.append(word)
            } else if word == "--" {
                onlyOperands = true
            } else {
                options.append(try option(word, from: &remaining, command: words.first))
            }
        }
        if options.contains(where: { $0.name == "--version" }) {
            var invocation = Invocation(command: FeedctlCommand[.help])
            invocation.version = true
            return invocation
        }
        let asksForHelp = options.contains { $0.name == "--help" }
        var invocation = try invocation(of: words, asksForHelp: asksForHelp)
        let helpOptions = ["--json", "--scdoc"]
        for (name, value) in options where !asksForHelp || helpOptions.contains(name) {
            try invocation.apply(name, value)
        }
        return invocation
    }

    /// The command and its operands, checked for number and form.
    private static func invocation(of words: [String], asksForHelp: Bool) throws(UsageError) -> Invocation {
        guard let first = words.first else {
            if asksForHelp { return Invocation(command: FeedctlCommand[.help]) }
            throw UsageError(message: UsageError.noCommand, command: nil)
        }
        guard let name = CommandName(rawValue: first) else {
            let suggestion = SpellingSuggestion.didYouMean(first, among: CommandName.allCases.map(\.rawValue))
            throw UsageError(message: "unknown command \"\(first)\"\(suggestion)", command: nil)
        }
        let command = FeedctlCommand[name]
        if asksForHelp { return Invocation(command: FeedctlCommand[.help], operands: ["COMMAND": first]) }
        var invocation = Invocation(command: command)
        let given = words.dropFirst()
        let required = command.operands.filter { !$0.isOptional }
        guard given.count >= required.count else {
            let missing = required[given.count...].map(\.name).joined(separator: " ")
            throw UsageError(message: "\(name.rawValue) needs \(missing)", command: command)
        }
        guard given.count <= command.operands.count else {
            let extra = given.dropFirst(command.operands.count).map { "\"\($0)\"" }.joined(separator: " ")
            let takes = command.operands.isEmpty ? "no arguments" : command.operands.map(\.synopsis).joined(separator: " ")
            throw UsageError(message: "\(name.rawValue) takes \(takes), not also \(extra)", command: command)
        }
        for (operand, word) in zip(command.operands, given) {
            try check(word, as: operand, of: command)
            invocation.operands[operand.name] = word
        }
        return invocation
    }

    private static func check(_ word: String, as operand: Operand, of command: FeedctlCommand) throws(UsageError) {
        switch operand.kind {
        case .count:
            guard let count = Int(word), (1...10_000).contains(count) else {
                throw UsageError(message: "\(operand.name) must be a whole number from 1 to 10000, not \"\(word)\"", command: command)
            }
        case .page:
            guard let page = Int(word), (0...1_000_000_000).contains(page) else {
                throw UsageError(message: "\(operand.name) must be a page number from 0 to 1000000000, not \"\(word)\"", command: command)
            }
        case .command:
            guard CommandName(rawValue: word) != nil else {
                let suggestion = SpellingSuggestion.didYouMean(word, among: CommandName.allCases.map(\.rawValue))
                throw UsageError(message: "no command \"\(word)\"\(suggestion)", command: command)
            }
        case .feed, .consumer:
            // Names are the daemon's to judge: it answers unknown_feed, or bad_request for a malformed consumer.
            break
        }
    }

    /// One option and its value; `--name=value` is taken as `--name value`.
    private static func option(
        _ word: String, from remaining: inout ArraySlice<String>, command: String?
    ) throws(UsageError) -> (name: String, value: String?) {
        var name = word
        var value: String?
        if let equals = word.firstIndex(of: "="), word.hasPrefix("--") {
            name = String(word[..<equals])
            value = String(word[word.index(after: equals)...])
        }
        if name == "-h" { name = "--help" }
        if name == "-V" { name = "--version" }
        let known = FeedctlCommand.commonOptions + FeedctlCommand.all.flatMap(\.options)
        guard let declared = known.first(where: { $0.name == name }) else {
            let commandOptions = command.flatMap(CommandName.init(rawValue:)).map { FeedctlCommand[$0].options } ?? []
            let suggestion = SpellingSuggestion.didYouMean(name, among: (FeedctlCommand.commonOptions + commandOptions).map(\.name))
            throw UsageError(message: "unknown option \"\(name)\"\(suggestion)", command: command.flatMap(CommandName.init(rawValue:)).map { FeedctlCommand[$0] })
        }
        if let valueName = declared.value, value == nil {
            guard let next = remaining.popFirst() else { throw UsageError(message: "\(name) needs \(valueName)", command: nil) }
            value = next
        } else if declared.value == nil, value != nil {
            throw UsageError(message: "\(name) takes no value", command: nil)
        }
        return (name, value)
    }

    /// Applies an option the table knows, refusing one that belongs to another command.
    private mutating func apply(_ name: String, _ value: String?) throws(UsageError) {
        let isCommon = FeedctlCommand.commonOptions.contains { $0.name == name }
        guard isCommon || command.options.contains(where: { $0.name == name }) else {
            throw UsageError(message: "\(command.name.rawValue) does not take \(name)", command: command)
        }
        switch name {
        case "--socket": socketPath = value
        case "--json": json = true
        case "--version": version = true
        case "--force": force = true
        case "--scdoc": scdoc = true
        case "--wait":
            guard let duration = value.flatMap(parseDuration), duration > .zero else {
                throw UsageError(message: "--wait needs a duration such as 30s, 500ms or 2m", command: command)
            }
            wait = duration
        default: break
        }
    }
}
