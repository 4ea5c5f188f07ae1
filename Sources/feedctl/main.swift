import FeedKit
import Foundation

/// feedctl: a small client for feedd's socket. The command line is checked against the command
/// table before anything connects: exit 2 with the usage for a bad one, 1 when the daemon
/// cannot be reached or answers with an error, 0 otherwise.
let invocation: Invocation
do {
    invocation = try Invocation.parse(Array(CommandLine.arguments.dropFirst()))
} catch {
    let usage = error.message == Invocation.UsageError.noCommand ? HelpText.full : HelpText.usage(for: error.command)
    fail("\(error.message)\n\(usage)", status: 2)
}

if invocation.version {
    print("feedctl \(feeddVersion)")
    exit(0)
}

switch invocation.command.name {
case .help:
    if invocation.scdoc {
        print(HelpText.scdoc)
    } else if invocation.json {
        print(HelpText.json)
    } else {
        print(invocation["COMMAND"].flatMap(CommandName.init(rawValue:)).map { HelpText.help(for: FeedctlCommand[$0]) } ?? HelpText.full)
    }
case .status, .next, .follow, .refresh, .metrics, .feeds, .ping:
    let commands = ReadingCommands(session: DaemonSession(socketPath: invocation.socketPath), invocation: invocation)
    switch invocation.command.name {
    case .status: commands.status()
    case .next: commands.next()
    case .follow: commands.follow()
    case .refresh: commands.refresh()
    case .metrics: commands.metrics()
    case .feeds: commands.feeds()
    default: commands.ping()
    }
case .consumers, .lag, .ack, .forget:
    let commands = ConsumerCommands(session: DaemonSession(socketPath: invocation.socketPath), invocation: invocation)
    switch invocation.command.name {
    case .consumers: commands.list()
    case .lag: commands.lag()
    case .ack: commands.acknowledge()
    default: commands.forget()
    }
}
