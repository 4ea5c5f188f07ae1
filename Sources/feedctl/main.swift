import FeedClient
import FeedKit
import Foundation

/// feedctl: a small client for feedd's socket. Exit 0 on success, 1 when the daemon cannot be
/// reached or answers with an error, 2 for a bad command line.
let usage = """
    Usage: feedctl [--socket PATH] COMMAND
      status [--json]     the daemon's and every feed's state
      next FEED [N] [--wait DURATION]
                          print the next N pages (default 1) as JSON lines; stops at the
                          feed's end. If the feed's source is failing, exits 1 with the
                          reason at the first `upstream` error, or with --wait (e.g. 30s)
                          keeps waiting that long for the pages
      follow FEED         print pages as they come, until the end of a finite feed
                          (exit 0) or until interrupted
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
/// `next --wait DURATION`: how long to keep waiting for pages while the feed's source fails.
var wait: Duration?
while let argument = arguments.popFirst() {
    switch argument {
    case "--socket":
        guard let path = arguments.popFirst() else { fail("--socket needs a path", status: 2) }
        socketPath = path
    case "--wait":
        guard let text = arguments.popFirst(), let duration = parseDuration(text) else {
            fail("--wait needs a duration such as 30s, 500ms or 2m", status: 2)
        }
        wait = duration
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

/// Sends `request` and hands each reply to `handle` until it returns false; gives up with
/// `timeoutMessage` once `timeout` has passed since the request (nil waits for good).
@MainActor
func exchange(_ request: JSONValue, timeout: Duration? = .seconds(30), timeoutMessage: (() -> String)? = nil, handle: (Reply) -> Bool) {
    let deadline = timeout.map { ContinuousClock.now + $0 }
    do {
        try connection.send(request)
        while true {
            let remaining = deadline.map { max($0 - .now, .zero) }
            if let remaining, remaining == .zero { fail(timeoutMessage?() ?? "no reply from feedd within \(timeout!)") }
            guard let line = try connection.readLine(timeout: remaining) else { break }
            guard let message = try? JSONValue(parsing: line) else { fail("feedd sent a line that is not JSON") }
            if message["type"] == "error", message["code"] != "upstream" {
                fail("\(message["code"]?.stringValue ?? "error"): \(message["message"]?.stringValue ?? "")")
            }
            if message["type"] == "bye" { fail("feedd closed the connection: \(message["reason"]?.stringValue ?? "")") }
            if !handle(Reply(line: line, message: message)) { return }
        }
        fail("feedd closed the connection")
    } catch {
        if let deadline, ContinuousClock.now >= deadline, let timeoutMessage { fail(timeoutMessage()) }
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
    var lastProblem: String?
    exchange(
        ["op": "next", "feed": .string(feed), "count": .integer(Int64(count))], timeout: wait ?? .seconds(30),
        timeoutMessage: { "\(feed): no page within \(wait.map { "\($0.wholeMilliseconds) ms" } ?? "30 s")\(lastProblem.map { "; \($0)" } ?? "")" }
    ) { message in
        switch message["type"]?.stringValue {
        case "page":
            message.printLine()
            received += 1
            return received < count
        case "end":
            return false
        case "error":
            // Only `upstream` errors get here: the feed's source is failing and being retried.
            let problem = "upstream: \(message["message"]?.stringValue ?? "the source is failing")"
            guard wait != nil else { fail("\(feed): \(problem)") }
            lastProblem = problem
            FileHandle.standardError.write(Data("feedctl: \(feed): \(problem); still waiting\n".utf8))
            return true
        default:
            return true
        }
    }
case "follow":
    let feed = feedArgument("follow")
    exchange(["op": "subscribe", "feed": .string(feed), "follow": true], timeout: nil) { message in
        if message["type"] == "page" || message["type"] == "refreshed" { message.printLine() }
        // A finite feed is told `end` once its last page is out: nothing more will come.
        if message["type"] == "end" { exit(0) }
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
