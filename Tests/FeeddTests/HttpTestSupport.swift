import FeedKit
import Foundation
import TestSupport

/// A daemon with its HTTP front on a free loopback port (SPEC §11), and the real clients the
/// HTTP tests talk to it with: curl and Python's standard library.
final class HTTPWorld: Sendable {
    let directory: TemporaryDirectory
    let daemon: DaemonProcess
    /// The port the daemon took for `127.0.0.1:0`, from its log.
    let port: Int
    var baseURL: String { "http://127.0.0.1:\(port)" }

    /// A daemon serving the feed `numbers`: a file of `lines` lines `{"n":N}`, `pageSize` a page;
    /// `http` goes into `[http]` after `listen`, `daemonOptions` into `[daemon]`.
    init(
        lines: Int = 95, pageSize: Int = 10, feedOptions: String = "", http: String = "", daemonOptions: String = "", moreTables: String = "",
        unixSocket: String? = nil, directory: TemporaryDirectory? = nil
    ) throws {
        let directory = try directory ?? TemporaryDirectory()
        self.directory = directory
        let listen = ["127.0.0.1:0"] + (unixSocket.map { [$0] } ?? [])
        let path = directory.path("numbers.ndjson")
        if !FileManager.default.fileExists(atPath: path) {
            try directory.write("numbers.ndjson", (1...max(lines, 1)).map { #"{"n":\#($0)}"# }.joined(separator: "\n") + "\n")
        }
        daemon = try DaemonProcess(config: """
            [daemon]
            state_dir = "\(directory.path("state"))"
            \(daemonOptions)

            [http]
            listen = [\(listen.map { "\"\($0)\"" }.joined(separator: ", "))]
            \(http)

            [feeds.numbers]
            source = "file"
            path = "\(path)"
            page_size = \(pageSize)
            \(feedOptions)

            \(moreTables)
            """, directory: directory)
        port = try Self.port(in: daemon.log)
    }

    /// The port of the log's `HTTP listening on 127.0.0.1:PORT`.
    static func port(in log: LogCollector, after skipping: Int = 0) throws -> Int {
        let marker = "listening on 127.0.0.1:"
        try log.waitForLine(containing: marker)
        let lines = log.lines.filter { $0.contains(marker) }
        guard lines.count > skipping, let port = lines[skipping].components(separatedBy: marker).last.flatMap({ Int($0) }) else {
            throw TestFailure("no port in the log:\n\(log.text)")
        }
        return port
    }

    /// `curl` for `path` (with its query) and `arguments` (`-X POST`, `-H …`, `-d …`).
    func curl(_ path: String, _ arguments: [String] = [], timeout: Int = 20) throws -> HTTPReply {
        try HTTPReply.curl(["\(baseURL)\(path)"] + arguments, timeout: timeout)
    }

    /// Runs `script` with Python's standard library only (Debian's python3, `base_url` as its
    /// first argument, then `arguments`); returns what it prints, which must be JSON.
    func python(_ script: String, _ arguments: [String] = [], timeout: Int = 60) throws -> JSONValue {
        let file = try directory.write("client-\(UUID().uuidString).py", script)
        let result = try ChildProcess.run("/usr/bin/timeout", [String(timeout), "/usr/bin/python3", file, baseURL] + arguments)
        guard result.status == 0 else {
            throw TestFailure("the Python client failed (\(result.status)): \(result.errors)\n\(result.output)\nfeedd's log:\n\(daemon.log.text)")
        }
        do {
            return try JSONValue(parsing: result.output)
        } catch {
            throw TestFailure("the Python client printed no JSON: \(result.output)")
        }
    }
}

/// What curl got: the status, the header fields (names in lower case) and the body.
struct HTTPReply {
    let status: Int
    let headers: [String: String]
    let body: String

    var json: JSONValue? { try? JSONValue(parsing: body) }

    /// Runs `curl -si` with `arguments`, within `timeout` seconds.
    static func curl(_ arguments: [String], timeout: Int = 20) throws -> HTTPReply {
        let result = try ChildProcess.run("/usr/bin/curl", ["-s", "-S", "-i", "--max-time", String(timeout)] + arguments)
        guard result.status == 0 else { throw TestFailure("curl \(arguments.joined(separator: " ")) failed: \(result.errors)") }
        return try parse(result.output)
    }

    static func parse(_ output: String) throws -> HTTPReply {
        guard let split = output.range(of: "\r\n\r\n") else { throw TestFailure("no HTTP header in curl's output: \(output.prefix(300))") }
        let head = output[..<split.lowerBound].components(separatedBy: "\r\n")
        guard let statusLine = head.first, let status = statusLine.split(separator: " ").dropFirst().first.flatMap({ Int($0) }) else {
            throw TestFailure("no status line in \(output.prefix(300))")
        }
        var headers: [String: String] = [:]
        for line in head.dropFirst() {
            guard let colon = line.firstIndex(of: ":") else { continue }
            headers[line[..<colon].lowercased()] = line[line.index(after: colon)...].trimmingCharacters(in: .whitespaces)
        }
        return HTTPReply(status: status, headers: headers, body: String(output[split.upperBound...]))
    }

    /// The page numbers of a `pages` answer.
    var pageNumbers: [Int64] {
        json?["pages"]?.arrayValue?.compactMap { $0["page"]?.integerValue } ?? []
    }
}
