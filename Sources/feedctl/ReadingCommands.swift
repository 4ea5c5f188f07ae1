import FeedKit
import Foundation

/// The commands that read the daemon's state and feeds: status, next, follow, refresh,
/// metrics, feeds, ping.
struct ReadingCommands {
    let session: DaemonSession
    let invocation: Invocation

    private var feed: String { invocation["FEED"]! }

    func status() {
        let reply = session.request(["op": "status"], expecting: "status")
        if invocation.json { reply.printLine() } else { StatusTable(status: reply.message).print() }
    }

    /// Page lines, which are JSON with or without --json.
    func next() {
        let count = invocation["N"].flatMap { Int($0) } ?? 1
        let wait = invocation.wait
        var received = 0
        var lastProblem: String?
        session.exchange(
            ["op": "next", "feed": .string(feed), "count": .integer(Int64(count))], timeout: wait ?? .seconds(30),
            timeoutMessage: { "\(feed): no page within \(wait.map { "\($0.wholeMilliseconds) ms" } ?? "30 s")\(lastProblem.map { "; \($0)" } ?? "")" }
        ) { reply in
            switch reply.type {
            case "page":
                reply.printLine()
                received += 1
                return received < count
            case "end":
                return false
            case "error":
                // Only `upstream` errors get here: the feed's source is failing and being retried.
                let problem = "upstream: \(reply["message"]?.stringValue ?? "the source is failing")"
                guard wait != nil else { fail("\(feed): \(problem)") }
                lastProblem = problem
                FileHandle.standardError.write(Data("feedctl: \(feed): \(problem); still waiting\n".utf8))
                return true
            default:
                return true
            }
        }
    }

    func follow() -> Never {
        session.exchange(["op": "subscribe", "feed": .string(feed), "follow": true], timeout: nil) { reply in
            if reply.type == "page" || reply.type == "refreshed" { reply.printLine() }
            // A finite feed is told `end` once its last page is out: nothing more will come.
            if reply.type == "end" { exit(0) }
            if reply.type == "error" {
                FileHandle.standardError.write(Data("feedctl: upstream: \(reply["message"]?.stringValue ?? "")\n".utf8))
            }
            return true
        }
        fail("feedd stopped answering")
    }

    func refresh() {
        let reply = session.request(["op": "refresh", "feed": .string(feed)], expecting: "refreshed")
        if invocation.json { reply.printLine() } else { print("\(feed): generation \(reply["generation"]?.integerValue ?? 0)") }
    }

    func metrics() {
        let reply = session.request(["op": "metrics"], expecting: "metrics")
        if invocation.json { reply.printLine() } else { print(reply["text"]?.stringValue ?? "", terminator: "") }
    }

    /// From the hello line, which --json prints.
    func feeds() {
        if invocation.json { session.hello.printLine() } else { session.feedNames.forEach { print($0) } }
    }

    func ping() {
        let reply = session.request(["op": "ping"], expecting: "pong")
        if invocation.json { reply.printLine() } else { print("pong") }
    }
}
