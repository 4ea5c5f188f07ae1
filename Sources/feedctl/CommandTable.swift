/// Every feedctl command, declared once: the parser checks a command line against it before
/// anything connects, and `--help`, `feedctl help --scdoc` (feedctl(1)'s COMMANDS) and
/// `feedctl help --json` (what the bash completion is tested against) are printed from it.
enum CommandName: String, CaseIterable, Sendable {
    case status, next, follow, refresh, consumers, lag, ack, forget, metrics, feeds, ping, help
}

/// A word a command takes after its name.
struct Operand: Sendable {
    enum Kind: Sendable {
        case feed, consumer
        /// A whole number of pages, from 1 to 10,000 (the protocol's bound on `count`).
        case count
        /// A page number, from 0 to 1,000,000,000 (the protocol's bound on `page`).
        case page
        /// A command name (`help next`).
        case command
    }

    let name: String
    let kind: Kind
    var isOptional = false

    var synopsis: String { isOptional ? "[\(name)]" : name }
}

/// An option of one command, beside those every command takes.
struct CommandOption: Sendable {
    let name: String
    /// What follows it (`DURATION`), or nil for a switch.
    let value: String?
    let summary: String

    var synopsis: String { value.map { "\(name) \($0)" } ?? name }
}

struct FeedctlCommand: Sendable {
    let name: CommandName
    let operands: [Operand]
    let options: [CommandOption]
    /// One line for the command list.
    let summary: String
    /// The rest of its help, for `feedctl help COMMAND` and feedctl(1).
    let details: String

    var synopsis: String {
        ([name.rawValue] + operands.map(\.synopsis) + options.map { "[\($0.synopsis)]" }).joined(separator: " ")
    }

    static subscript(name: CommandName) -> FeedctlCommand { all.first { $0.name == name }! }

    /// The options every command takes.
    static let commonOptions = [
        CommandOption(name: "--socket", value: "PATH", summary: "the daemon's socket; without it, $FEEDD_SOCKET, else the first that exists of $XDG_RUNTIME_DIR/feedd.sock, /run/feedd/feedd.sock and /tmp/feedd-$UID/feedd.sock"),
        CommandOption(name: "--json", value: nil, summary: "print the daemon's JSON instead of text for people"),
        CommandOption(name: "--help", value: nil, summary: "print the commands, or one command's help, and exit"),
        CommandOption(name: "--version", value: nil, summary: "print feedctl's version and exit"),
    ]

    static let feed = Operand(name: "FEED", kind: .feed)
    static let consumer = Operand(name: "CONSUMER", kind: .consumer)

    static let all = [
        FeedctlCommand(
            name: .status, operands: [], options: [], summary: "the daemon's and every feed's state",
            details: "A table: one line for the daemon, one row per feed. With --json, the daemon's status line, which has more."),
        FeedctlCommand(
            name: .next, operands: [feed, Operand(name: "N", kind: .count, isOptional: true)],
            options: [CommandOption(name: "--wait", value: "DURATION", summary: "while the source fails, keep waiting this long (30s, 2m) for the pages")],
            summary: "print the next N pages of FEED (default 1) as JSON lines",
            details: "Stops at the feed's end. If the feed's source is failing, exits 1 with the reason at the first upstream error, or with --wait keeps waiting that long first."),
        FeedctlCommand(
            name: .follow, operands: [feed], options: [], summary: "print pages of FEED as they come",
            details: "Until the end of a finite feed (exit 0) or until interrupted."),
        FeedctlCommand(
            name: .refresh, operands: [feed], options: [], summary: "start a new generation of FEED",
            details: "Every subscriber of FEED starts over at page 1, and every consumer's cursor goes back to 0."),
        FeedctlCommand(
            name: .consumers, operands: [feed], options: [], summary: "the durable consumers of FEED",
            details: "A table by name: each consumer's cursor (AFTER), how many pages it is behind the newest the feed knows, whether it is connected and when it last acknowledged. With --json, one object a line."),
        FeedctlCommand(
            name: .lag, operands: [Operand(name: "FEED", kind: .feed, isOptional: true)], options: [],
            summary: "the consumers of FEED, or of every feed, furthest behind first",
            details: "A table sorted by how many pages each consumer is behind. With --json, one object a line, each with its feed."),
        FeedctlCommand(
            name: .ack, operands: [feed, consumer, Operand(name: "PAGE", kind: .page)],
            options: [CommandOption(name: "--force", value: nil, summary: "also for a consumer that is connected, or a page past the newest")],
            summary: "acknowledge pages up to PAGE for CONSUMER of FEED",
            details: "Moves the consumer's stored cursor forward to PAGE, as its client would by acknowledging (never back: a PAGE it has passed changes nothing). Refused for a consumer that does not exist, one that is connected (its client acknowledges its own pages) and a PAGE past the newest page the feed knows, unless --force."),
        FeedctlCommand(
            name: .forget, operands: [feed, consumer], options: [], summary: "delete CONSUMER's stored cursor on FEED",
            details: "The consumer starts from the beginning if it subscribes again. Works for a feed no longer configured too."),
        FeedctlCommand(
            name: .metrics, operands: [], options: [], summary: "the daemon's metrics, as OpenMetrics text",
            details: "The text ends with # EOF; promtool check metrics accepts it. With --json, the daemon's metrics line."),
        FeedctlCommand(
            name: .feeds, operands: [], options: [], summary: "the names of the feeds, one a line",
            details: "From the daemon's hello line (which --json prints); bash completion runs it."),
        FeedctlCommand(
            name: .ping, operands: [], options: [], summary: "check that the daemon answers",
            details: "Prints pong. With --json, the daemon's pong line."),
        FeedctlCommand(
            name: .help, operands: [Operand(name: "COMMAND", kind: .command, isOptional: true)],
            options: [CommandOption(name: "--scdoc", value: nil, summary: "print the commands as feedctl(1)'s COMMANDS section, in scdoc")],
            summary: "the commands, or one command's help",
            details: "With --json, every command as JSON (what the bash completion is checked against)."),
    ]
}
