import FeedClient
import FeedKit
import Foundation

/// Ends feedctl with `message` on stderr: 1 for a daemon that cannot be reached or says no.
func fail(_ message: String, status: Int32 = 1) -> Never {
    FileHandle.standardError.write(Data("feedctl: \(message)\n".utf8))
    exit(status)
}

/// One line from the daemon: as sent, for printing, and parsed.
struct Reply {
    let line: [UInt8]
    let message: JSONValue

    subscript(key: String) -> JSONValue? { message[key] }

    var type: String? { message["type"]?.stringValue }

    func printLine() {
        print(String(decoding: line, as: UTF8.self))
        fflush(nil)
    }
}

/// A connection to the daemon past its `hello`, and the request-and-replies exchange every
/// command makes. Any failure ends feedctl with a one-line reason (exit 1).
final class DaemonSession {
    private let connection: FeedConnection
    /// The daemon's `hello` line.
    let hello: Reply

    /// Connects to `socketPath`, else to the first socket that exists where feedd puts one.
    init(socketPath: String?) {
        do {
            connection = try FeedConnection(path: socketPath ?? Self.defaultSocketPath())
            guard let line = try connection.readLine(), let greeting = try? JSONValue(parsing: line), greeting["type"] == "hello" else {
                fail("cannot reach feedd: no hello from the socket")
            }
            hello = Reply(line: line, message: greeting)
        } catch {
            fail("cannot reach feedd: \(error)")
        }
    }

    /// The feed names the daemon's hello lists.
    var feedNames: [String] { hello["feeds"]?.arrayValue?.compactMap(\.stringValue) ?? [] }

    /// Sends `request` and hands each reply to `handle` until it returns false; gives up with
    /// `timeoutMessage` once `timeout` has passed since the request (nil waits for good). An
    /// `error` reply ends feedctl, except `upstream` notices, which `handle` gets.
    func exchange(
        _ request: JSONValue, timeout: Duration? = .seconds(30), timeoutMessage: (() -> String)? = nil, handle: (Reply) -> Bool
    ) {
        let deadline = timeout.map { ContinuousClock.now + $0 }
        do {
            try connection.send(request)
            while true {
                let remaining = deadline.map { max($0 - .now, .zero) }
                if let remaining, remaining == .zero { fail(timeoutMessage?() ?? "no reply from feedd within \(timeout!)") }
                guard let line = try connection.readLine(timeout: remaining) else { break }
                guard let message = try? JSONValue(parsing: line) else { fail("feedd sent a line that is not JSON") }
                let reply = Reply(line: line, message: message)
                if reply.type == "error", reply["code"] != "upstream" { fail(describeError(reply, answering: request)) }
                if reply.type == "bye" { fail("feedd closed the connection: \(reply["reason"]?.stringValue ?? "")") }
                if !handle(reply) { return }
            }
            fail("feedd closed the connection")
        } catch {
            if let deadline, ContinuousClock.now >= deadline, let timeoutMessage { fail(timeoutMessage()) }
            fail("\(error)")
        }
    }

    /// Sends `request` and returns the first reply of type `type`.
    func request(_ request: JSONValue, expecting type: String) -> Reply {
        var answer: Reply?
        exchange(request) { reply in
            guard reply.type == type else { return true }
            answer = reply
            return false
        }
        return answer!
    }

    private func describeError(_ reply: Reply, answering request: JSONValue) -> String {
        let code = reply["code"]?.stringValue ?? "error"
        if code == "unknown_op", let op = request["op"]?.stringValue {
            let version = hello["version"]?.stringValue ?? "?"
            return "feedd \(version) does not know \"\(op)\"; it is older than this feedctl (\(feeddVersion))"
        }
        return "\(code): \(reply["message"]?.stringValue ?? "")"
    }

    private static func defaultSocketPath() -> String {
        let environment = ProcessInfo.processInfo.environment
        if let path = environment["FEEDD_SOCKET"], !path.isEmpty { return path }
        var candidates: [String] = []
        if let runtime = environment["XDG_RUNTIME_DIR"], !runtime.isEmpty { candidates.append("\(runtime)/feedd.sock") }
        candidates += ["/run/feedd/feedd.sock", "/tmp/feedd-\(getuid())/feedd.sock"]
        if let existing = candidates.first(where: { FileManager.default.fileExists(atPath: $0) }) { return existing }
        fail("cannot reach feedd: no socket at \(candidates.joined(separator: ", ")) (is it running? use --socket)")
    }
}
