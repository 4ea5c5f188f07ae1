import FeedKit

/// What `feedd` was asked to do (SPEC §2).
enum DaemonCommand: Equatable {
    case run(configPath: String?, socketPath: String?)
    case checkConfig(configPath: String?)
    /// `feedd state check`: the integrity and contents of the state database.
    case checkState(configPath: String?)
    /// `feedd state repair`: salvages a damaged state database.
    case repairState(configPath: String?)
    /// `feedd config-keys`: every config key, or those of one table or source.
    case configKeys(format: ConfigKeysFormat, section: String?)
    /// `feedd plugin check`: the adapter conformance checks against an exec plugin.
    case checkPlugin(PluginCheckRequest)
    case version
    case help
}

/// How `feedd config-keys` prints the keys.
enum ConfigKeysFormat: Equatable {
    /// A table for people.
    case text
    /// One JSON object per key, one a line.
    case json
    /// The scdoc text of feedd.toml(5)'s key sections.
    case scdoc
}

/// `feedd plugin check`'s command line.
struct PluginCheckRequest: Equatable {
    var program: String
    var arguments: [String] = []
    /// `--option KEY=VALUE`, in order, the value as written.
    var options: [String] = []
    /// How many pages to walk at most.
    var pages = 5
    var timeout: Duration = .seconds(10)
}

/// A command line that makes no sense; the daemon prints it with the usage and exits 2.
struct UsageError: Error, CustomStringConvertible {
    let description: String
}

extension DaemonCommand {
    static let usage = """
        Usage: feedd [--config PATH] [--socket PATH]
               feedd check-config [--config PATH]
               feedd state check|repair [--config PATH]
               feedd config-keys [--json | --scdoc] [TABLE]
               feedd plugin check PROGRAM [ARGUMENT...] [--option KEY=VALUE]... [--pages N] [--timeout DURATION]
               feedd --version | --help

        Runs the feed daemon in the foreground. The config is read from --config, else
        $FEEDD_CONFIG, else /etc/feedd/feedd.toml, else the embedded default config.

          --config PATH   the TOML config file (drop-ins: feedd.d/*.toml beside it)
          --socket PATH   the Unix socket to listen on (ignored under socket activation)
          check-config    validate the config and every feed's options, print each problem
                          as FILE:LINE:COL: message, exit 0 if valid and 2 if not; paths that
                          cannot work yet are warned about on stderr
          state check     check the state database (state_dir/state.db) and count what it
                          holds; exit 0 if the daemon can use it, 1 if it is damaged
          state repair    salvage what is readable of a damaged state database into a new
                          one, keeping the damaged file beside it; refused while feedd runs
          config-keys     every config key with its type, default and meaning; TABLE is
                          daemon, feeds, cluster or a source name (file, http …)
          plugin check    run the adapter conformance checks against an exec plugin: start
                          PROGRAM, configure it with the options (VALUE as TOML, else a
                          string), walk up to N pages (default 5), each within DURATION
                          (default 10s); exit 0 if it conforms, 1 if not. Arguments for
                          PROGRAM that start with - go after --
        """

    static func parse(_ arguments: [String]) throws(UsageError) -> DaemonCommand {
        // Past `--` every word is the plugin's, taken as it is.
        let options = arguments.prefix { $0 != "--" }.flatMap(splittingEquals)
        if options.contains(where: { $0 == "--version" || $0 == "-V" }) { return .version }
        if options.contains(where: { $0 == "--help" || $0 == "-h" }) { return .help }
        var words = ArraySlice(options + arguments.drop { $0 != "--" })
        switch words.first {
        case "check-config":
            words.removeFirst()
            return .checkConfig(configPath: try configOption(in: &words, for: "check-config"))
        case "state":
            words.removeFirst()
            guard let verb = words.popFirst(), verb == "check" || verb == "repair" else {
                throw UsageError(description: "\"feedd state\" needs \"check\" or \"repair\"")
            }
            let configPath = try configOption(in: &words, for: "state \(verb)")
            return verb == "check" ? .checkState(configPath: configPath) : .repairState(configPath: configPath)
        case "config-keys":
            words.removeFirst()
            return try parseConfigKeys(&words)
        case "plugin":
            words.removeFirst()
            guard words.popFirst() == "check" else { throw UsageError(description: "\"feedd plugin\" needs \"check\"") }
            return .checkPlugin(try parsePluginCheck(&words))
        default:
            return try parseRun(&words)
        }
    }

    private static let commands = ["check-config", "state", "config-keys", "plugin"]

    private static func parseRun(_ words: inout ArraySlice<String>) throws(UsageError) -> DaemonCommand {
        var configPath: String?
        var socketPath: String?
        while let word = words.popFirst() {
            switch word {
            case "--config": configPath = try value(of: word, in: &words)
            case "--socket": socketPath = try value(of: word, in: &words)
            default:
                let known = word.hasPrefix("-") ? ["--config", "--socket", "--version", "--help"] : commands
                throw UsageError(description: "unknown argument \"\(word)\"\(SpellingSuggestion.didYouMean(word, among: known))")
            }
        }
        return .run(configPath: configPath, socketPath: socketPath)
    }

    /// `--config PATH`, the only option of check-config and the state commands.
    private static func configOption(in words: inout ArraySlice<String>, for command: String) throws(UsageError) -> String? {
        var configPath: String?
        while let word = words.popFirst() {
            guard word == "--config" else {
                throw UsageError(description: "\(command) takes only --config PATH, not \"\(word)\"")
            }
            configPath = try value(of: word, in: &words)
        }
        return configPath
    }

    private static func parseConfigKeys(_ words: inout ArraySlice<String>) throws(UsageError) -> DaemonCommand {
        var format = ConfigKeysFormat.text
        var section: String?
        while let word = words.popFirst() {
            switch word {
            case "--json": format = .json
            case "--scdoc": format = .scdoc
            case _ where word.hasPrefix("-"):
                throw UsageError(description: "unknown option \"\(word)\"\(SpellingSuggestion.didYouMean(word, among: ["--json", "--scdoc"]))")
            case _ where section == nil: section = word
            default: throw UsageError(description: "config-keys takes one TABLE, not also \"\(word)\"")
            }
        }
        return .configKeys(format: format, section: section)
    }

    private static func parsePluginCheck(_ words: inout ArraySlice<String>) throws(UsageError) -> PluginCheckRequest {
        var request = PluginCheckRequest(program: "")
        var verbatim = false
        while let word = words.popFirst() {
            switch word {
            case _ where verbatim: request.arguments.append(word)
            case "--": verbatim = true
            case "--option":
                let option = try value(of: word, in: &words)
                guard let equals = option.firstIndex(of: "="), equals != option.startIndex else {
                    throw UsageError(description: "--option needs KEY=VALUE, got \"\(option)\"")
                }
                request.options.append(option)
            case "--pages":
                guard let pages = Int(try value(of: word, in: &words)), (1...1_000).contains(pages) else {
                    throw UsageError(description: "--pages needs a whole number from 1 to 1000")
                }
                request.pages = pages
            case "--timeout":
                guard let timeout = parseDuration(try value(of: word, in: &words)), timeout > .zero else {
                    throw UsageError(description: "--timeout needs a duration such as 10s or 500ms")
                }
                request.timeout = timeout
            case _ where word.hasPrefix("-"):
                let suggestion = SpellingSuggestion.didYouMean(word, among: ["--option", "--pages", "--timeout"])
                throw UsageError(description: "unknown option \"\(word)\"\(suggestion) (put the program's own options after --)")
            case _ where request.program.isEmpty: request.program = word
            default: request.arguments.append(word)
            }
        }
        guard !request.program.isEmpty else { throw UsageError(description: "plugin check needs the PROGRAM to check") }
        return request
    }

    private static func value(of option: String, in words: inout ArraySlice<String>) throws(UsageError) -> String {
        guard let value = words.popFirst(), !value.isEmpty else { throw UsageError(description: "\(option) needs a value") }
        return value
    }

    /// `--name=value` as `--name`, `value`; `--option key=value` is left alone.
    private static func splittingEquals(_ word: String) -> [String] {
        guard word.hasPrefix("--"), let equals = word.firstIndex(of: "=") else { return [word] }
        return [String(word[..<equals]), String(word[word.index(after: equals)...])]
    }
}
