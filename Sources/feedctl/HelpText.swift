import FeedKit

/// feedctl's help, printed from the command table: for people (`--help`, `help COMMAND`, a
/// usage error), for feedctl(1) (`help --scdoc`) and for tests and tools (`help --json`).
enum HelpText {
    static let synopsis = "feedctl [--socket PATH] [--json] COMMAND [ARGUMENTS]"

    /// Every command and option.
    static var full: String {
        let width = FeedctlCommand.all.map(\.synopsis.count).max()!
        var lines = ["Usage: \(synopsis)", "", "Commands:"]
        for command in FeedctlCommand.all {
            lines += wrapped(command.summary, after: "  " + command.synopsis.padding(toLength: width + 2, withPad: " ", startingAt: 0))
        }
        lines += ["", "Options of every command:"]
        let optionWidth = FeedctlCommand.commonOptions.map(\.synopsis.count).max()!
        for option in FeedctlCommand.commonOptions {
            lines += wrapped(option.summary, after: "  " + option.synopsis.padding(toLength: optionWidth + 2, withPad: " ", startingAt: 0))
        }
        lines.append("")
        lines += wrapped("Exit status: 0 done, 1 the daemon cannot be reached or answered with an error, 2 a bad command line.")
        lines.append("\"feedctl help COMMAND\" says more about one command.")
        return lines.joined(separator: "\n")
    }

    /// One command's synopsis, summary, details and options.
    static func help(for command: FeedctlCommand) -> String {
        var lines = ["Usage: feedctl [--socket PATH] [--json] \(command.synopsis)", ""]
        lines += wrapped("\(capitalized(command.summary)). \(command.details)")
        for option in command.options {
            lines += [""] + wrapped(option.summary, after: "  \(option.synopsis)  ")
        }
        return lines.joined(separator: "\n")
    }

    /// What a usage error shows after the problem: the command's synopsis, or the command names.
    static func usage(for command: FeedctlCommand?) -> String {
        guard let command else {
            let names = CommandName.allCases.map(\.rawValue).joined(separator: ", ")
            return "Usage: \(synopsis)\nCommands: \(names). \"feedctl --help\" says what each does."
        }
        return "Usage: feedctl [--socket PATH] [--json] \(command.synopsis)\n\"feedctl --help\" lists every command."
    }

    /// `text` in lines of at most 80 columns, the first after `lead` and the rest under it.
    private static func wrapped(_ text: String, after lead: String = "") -> [String] {
        let indent = String(repeating: " ", count: lead.count)
        var lines: [String] = []
        var line = lead
        for word in text.split(separator: " ") {
            if line.count > indent.count, line.count + 1 + word.count > 80 {
                lines.append(line)
                line = indent
            }
            line += (line.count > indent.count && !line.hasSuffix(" ") ? " " : "") + word
        }
        return lines + [line]
    }

    /// feedctl(1)'s COMMANDS and OPTIONS sections.
    static var scdoc: String {
        var lines = ["# COMMANDS", ""]
        for command in FeedctlCommand.all {
            let words = [bold(command.name.rawValue)] + command.operands.map { scdocOperand($0) } + command.options.map {
                "[\(bold($0.name))\($0.value.map { " _\($0)_" } ?? "")]"
            }
            lines += [words.joined(separator: " "), "\t\(Scdoc.escaped(capitalized(command.summary))). \(Scdoc.escaped(command.details))", ""]
            for option in command.options {
                lines += ["\t\(bold(option.name))\(option.value.map { " _\($0)_" } ?? ""): \(Scdoc.escaped(option.summary)).", ""]
            }
        }
        lines += ["# OPTIONS", "", "Every command takes these, anywhere on the command line.", ""]
        for option in FeedctlCommand.commonOptions {
            lines += ["\(bold(option.name))\(option.value.map { " _\($0)_" } ?? "")", "\t\(Scdoc.escaped(capitalized(option.summary))).", ""]
        }
        return lines.joined(separator: "\n")
    }

    /// The command table as one JSON line.
    static var json: String {
        func option(_ option: CommandOption) -> JSONValue {
            ["name": .string(option.name), "value": option.value.map(JSONValue.string) ?? .null, "summary": .string(option.summary)]
        }
        let commands = FeedctlCommand.all.map { command -> JSONValue in
            [
                "name": .string(command.name.rawValue), "summary": .string(command.summary),
                "operands": .array(command.operands.map { ["name": .string($0.name), "optional": .bool($0.isOptional)] }),
                "options": .array(command.options.map(option)),
            ]
        }
        let table: JSONValue = ["commands": .array(commands), "options": .array(FeedctlCommand.commonOptions.map(option))]
        return String(decoding: table.serialized, as: UTF8.self)
    }

    private static func scdocOperand(_ operand: Operand) -> String {
        operand.isOptional ? "[_\(operand.name)_]" : "_\(operand.name)_"
    }

    private static func bold(_ text: String) -> String { "*\(Scdoc.escaped(text))*" }

    private static func capitalized(_ text: String) -> String { text.prefix(1).uppercased() + text.dropFirst() }
}
