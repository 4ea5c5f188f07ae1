/// What `feedd` was asked to do (SPEC §2).
enum DaemonCommand: Equatable {
    case run(configPath: String?, socketPath: String?)
    case checkConfig(configPath: String?)
    /// `feedd state check`: the integrity and contents of the state database.
    case checkState(configPath: String?)
    /// `feedd state repair`: salvages a damaged state database.
    case repairState(configPath: String?)
    case version
    case help
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
               feedd --version | --help

        Runs the feed daemon in the foreground. The config is read from --config, else
        $FEEDD_CONFIG, else /etc/feedd/feedd.toml, else the embedded default config.

          --config PATH   the TOML config file (drop-ins: feedd.d/*.toml beside it)
          --socket PATH   the Unix socket to listen on (ignored under socket activation)
          check-config    validate the config and every feed's options, print each problem
                          as FILE:LINE:COL: message, exit 0 if valid and 2 if not
          state check     check the state database (state_dir/state.db) and count what it
                          holds; exit 0 if the daemon can use it, 1 if it is damaged
          state repair    salvage what is readable of a damaged state database into a new
                          one, keeping the damaged file beside it; refused while feedd runs
        """

    static func parse(_ arguments: [String]) throws(UsageError) -> DaemonCommand {
        var arguments = arguments[...]
        var checkConfig = false
        var stateCommand: String?
        var configPath: String?
        var socketPath: String?
        func value(for option: String) throws(UsageError) -> String {
            guard let value = arguments.popFirst(), !value.isEmpty else { throw UsageError(description: "\(option) needs a value") }
            return value
        }
        if arguments.first == "check-config" {
            checkConfig = true
            arguments.removeFirst()
        } else if arguments.first == "state" {
            arguments.removeFirst()
            guard let verb = arguments.popFirst(), verb == "check" || verb == "repair" else {
                throw UsageError(description: "\"feedd state\" needs \"check\" or \"repair\"")
            }
            stateCommand = verb
        }
        while let argument = arguments.popFirst() {
            switch argument {
            case "--version", "-V": return .version
            case "--help", "-h": return .help
            case "--config": configPath = try value(for: argument)
            case "--socket" where !checkConfig && stateCommand == nil: socketPath = try value(for: argument)
            default:
                if let equals = argument.firstIndex(of: "="), argument.hasPrefix("--") {
                    arguments.insert(contentsOf: [String(argument[..<equals]), String(argument[argument.index(after: equals)...])], at: arguments.startIndex)
                    continue
                }
                throw UsageError(description: "unknown argument \"\(argument)\"")
            }
        }
        switch stateCommand {
        case "check"?: return .checkState(configPath: configPath)
        case "repair"?: return .repairState(configPath: configPath)
        default: return checkConfig ? .checkConfig(configPath: configPath) : .run(configPath: configPath, socketPath: socketPath)
        }
    }
}
