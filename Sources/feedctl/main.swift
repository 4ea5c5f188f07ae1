import FeedClient
import FeedKit
import Foundation

/// feedctl: a small client for feedd's socket. Exit 0 on success, 1 when the daemon cannot be
/// reached or answers with an error, 2 for a bad command line.
let usage = """
    Usage: feedctl [--socket PATH] COMMAND
      status [--json]     the daemon's and every feed's state
      next FEED [N]       print the next N pages (default 1) as JSON lines
      follow FEED         print pages as they come, until interrupted
      refresh FEED        start a new generation of FEED
      metrics             the daemon's metrics, as OpenMetrics text
      feeds               the names of the feeds, one a line
      ping                check that the daemon answers

    The socket is --socket, else $FEEDD_SOCKET, else the first that exists of
    $XDG_RUNTIME_DIR/feedd.sock, /run/feedd/feedd.sock and /tmp/feedd-$UID/feedd.sock.
    """

func fail(_ message: String, status: Int32 = 1) -> Never {
    FileHandle.standardError.write(Data("feedctl: \(message)\n".utf8))
    exit(status)
}

var arguments = Array(CommandLine.arguments.dropFirst())[...]
var socketPath = ProcessInfo.processInfo.environment["FEEDD_SOCKET"].flatMap { $0.isEmpty ? nil : $0 }
var words: [String] = []
while let argument = arguments.popFirst() {
    switch argument {
    case "--socket":
        guard let path = arguments.popFirst() else { fail("--socket needs a path", status: 2) }
        socketPath = path
    case "--help", "-h":
        print(usage)
        exit(0)
    default:
        words.append(argument)
    }
}

func defaultSocketPath() -> String {
    let environment = ProcessInfo.processInfo.environment
    var candidates: [String] = []
    if let runtime = environment["XDG_RUNTIME_DIR"], !runtime.isEmpty { candidates.append("\(runtime)/feedd.sock") }
    candidates += ["/run/feedd/feedd.sock", "/tmp/feedd-\(getuid())/feedd.sock"]
    if let existing = candidates.first(where: { FileManager.default.fileExists(atPath: $0) }) { return existing }
    fail("cannot reach feedd: no socket at \(candidates.joined(separator: ", ")) (is it running? use --socket)")
}

let connection: FeedConnection
let hello: JSONValue
do {
    connection = try FeedConnection(path: socketPath ?? defaultSocketPath())
    guard let greeting = try connection.readMessage(), greeting["type"] == "hello" else { fail("cannot reach feedd: no hello from the socket") }
    hello = greeting
} catch {
    fail("cannot reach feedd: \(error)")
}

/// Sends `request` and hands each reply to `handle` until it returns false.
@MainActor
func exchange(_ request: JSONValue, timeout: Duration? = .seconds(30), handle: (Reply) -> Bool) {
    do {
        try connection.send(request)
        while let line = try connection.readLine(timeout: timeout) {
            guard let message = try? JSONValue(parsing: line) else { fail("feedd sent a line that is not JSON") }
            if message["type"] == "error", message["code"] != "upstream" {
                fail("\(message["code"]?.stringValue ?? "error"): \(message["message"]?.stringValue ?? "")")
            }
            if message["type"] == "bye" { fail("feedd closed the connection: \(message["reason"]?.stringValue ?? "")") }
            if !handle(Reply(line: line, message: message)) { return }
        }
        fail("feedd closed the connection")
    } catch {
        fail("\(error)")
    }
}

/// One line from the daemon: as sent, for printing, and parsed.
struct Reply {
    let line: [UInt8]
    let message: JSONValue

    subscript(key: String) -> JSONValue? { message[key] }

    func printLine() {
        print(String(decoding: line, as: UTF8.self))
        fflush(nil)
    }
}

@MainActor
func feedArgument(_ command: String) -> String {
    guard words.count >= 2 else { fail("\(command) needs a feed name", status: 2) }
    return words[1]
}

switch words.first {
case "status":
    exchange(["op": "status"]) { message in
        guard message["type"] == "status" else { return true }
        if words.contains("--json") { message.printLine() } else { StatusTable(status: message.message).print() }
        return false
    }
case "next":
    let feed = feedArgument("next")
    let count = words.count > 2 ? Int(words[2]) : 1
    guard let count, count >= 1 else { fail("N must be a positive whole number", status: 2) }
    var received = 0
    exchange(["op": "next", "feed": .string(feed), "count": .integer(Int64(count))]) { message in
        switch message["type"]?.stringValue {
        case "page":
            message.printLine()
            received += 1
            return received < count
        case "end":
            return false
        case "error":
            FileHandle.standardError.write(Data("feedctl: upstream: \(message["message"]?.stringValue ?? "")\n".utf8))
            return true
        default:
            return true
        }
    }
case "follow":
    let feed = feedArgument("follow")
    exchange(["op": "subscribe", "feed": .string(feed), "follow": true], timeout: nil) { message in
        if message["type"] == "page" || message["type"] == "refreshed" { message.printLine() }
        if message["type"] == "error" {
            FileHandle.standardError.write(Data("feedctl: upstream: \(message["message"]?.stringValue ?? "")\n".utf8))
        }
        return true
    }
case "refresh":
    let feed = feedArgument("refresh")
    exchange(["op": "refresh", "feed": .string(feed)]) { message in
        guard message["type"] == "refreshed" else { return true }
        print("\(feed): generation \(message["generation"]?.integerValue ?? 0)")
        return false
    }
case "metrics":
    exchange(["op": "metrics"]) { message in
        guard message["type"] == "metrics" else { return true }
        print(message["text"]?.stringValue ?? "", terminator: "")
        return false
    }
case "feeds":
    // The hello lists them; bash completion runs this.
    for feed in hello["feeds"]?.arrayValue ?? [] { print(feed.stringValue ?? "") }
case "ping":
    exchange(["op": "ping"]) { message in
        guard message["type"] == "pong" else { return true }
        print("pong")
        return false
    }
case nil:
    fail("no command given\n\(usage)", status: 2)
case let other?:
    fail("unknown command \"\(other)\"\n\(usage)", status: 2)
}
