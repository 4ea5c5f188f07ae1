import FeedKit
import Foundation
import Glibc

/// Owns one plugin program: starts and configures it when needed, exchanges request and
/// response lines, and ends it when it exits, hangs or misbehaves, so the next call starts a
/// fresh one. Ending it ends its whole process group (``Subprocess/terminate(grace:)``), before
/// anything else happens: a restarted plugin never runs beside what is left of the one before.
/// A plugin's failure is always a ``SourceError``, never the daemon's.
actor PluginHost {
    private let executable: String
    private let arguments: [String]
    private let feed: String
    private let options: [String: JSONValue]
    private let timeout: Duration
    private let logger: Logger
    private var process: Subprocess?
    private var starts = 0
    /// Set by ``stop()``: a start still under way when it came ends what it started.
    private var stopped = false
    /// What the program declared in its answer to `configure` (`"reproduces_pages"`); true until
    /// it has answered, and for a program that does not say.
    let reproducesPages = Locked(true)

    /// The PATH plugins get, and the one a bare program name is looked up in.
    static let searchPath = "/usr/local/bin:/usr/bin:/bin"

    init(executable: String, arguments: [String], feed: String, options: [String: JSONValue], timeout: Duration, logger: Logger) {
        self.executable = executable
        self.arguments = arguments
        self.feed = feed
        self.options = options
        self.timeout = timeout
        self.logger = logger
    }

    /// The absolute path of `program`: itself if it has a slash, else found in ``searchPath``.
    static func resolve(_ program: String) -> String? {
        let candidates = program.contains("/") ? [program] : searchPath.split(separator: ":").map { "\($0)/\(program)" }
        return candidates.first { access($0, X_OK) == 0 && !FileManager.default.directoryExists(atPath: $0) }
    }

    /// Sends `request` and returns the response, a JSON object; any failure kills the program.
    func call(_ request: JSONValue) async throws(SourceError) -> JSONDocument {
        let process = try await running()
        return try await exchange(request, with: process)
    }

    /// Starts the program and configures it, then stops it: for `check-config`.
    func verifyConfiguration() async throws(SourceError) {
        _ = try await running()
        await endProcess()
    }

    /// Kills the program after a response that was JSON but not a valid answer; returns the error to throw.
    func discard(because reason: String) async -> SourceError {
        await kill(reason: reason)
        return SourceError.transient("plugin \(executable) \(reason); restarting it")
    }

    /// Ends the program and its group: stdin closed, SIGTERM, and SIGKILL if it lingers.
    /// No program is started again after this (a start under way is ended as it finishes).
    func stop() async {
        stopped = true
        await endProcess()
    }

    /// Ends the running program, if any; the next request starts it again.
    private func endProcess() async {
        guard let process else { return }
        self.process = nil
        _ = await process.terminate()
    }

    private func running() async throws(SourceError) -> Subprocess {
        if let process { return process }
        starts += 1
        let feed = feed
        let logger = logger
        let process = try await Subprocess.start(
            executable: executable, arguments: arguments,
            environment: ["PATH": Self.searchPath, "LANG": "C.UTF-8", "FEEDD_FEED": feed],
            onErrorLine: { line in logger.info("plugin stderr: \(line)") })
        guard !stopped else {
            _ = await process.terminate()
            throw SourceError.transient("plugin \(executable) was stopped while it started")
        }
        logger.info("started plugin \(executable) (pid \(process.pid))\(starts > 1 ? ", start \(starts)" : "")")
        self.process = process
        let answer = try await exchange(["op": "configure", "feed": .string(feed), "options": .object(options)], with: process).root.value
        if let error = answer["error"] {
            await kill(reason: "refused its configuration")
            throw SourceError.rejected("plugin \(executable) refused its configuration: \(error.stringValue ?? error.jsonText)")
        }
        guard answer["ok"] == true else {
            throw await discard(because: "answered configure with \(answer.jsonText.prefix(200))")
        }
        switch answer["reproduces_pages"] {
        case nil, .null?:
            reproducesPages.withLock { $0 = true }
        case .bool(let declared)?:
            reproducesPages.withLock { $0 = declared }
        case let other?:
            throw await discard(because: "answered configure with \"reproduces_pages\": \(other.jsonText.prefix(50)), which is not true or false")
        }
        return process
    }

    private func exchange(_ request: JSONValue, with process: Subprocess) async throws(SourceError) -> JSONDocument {
        do {
            try process.send(request.serialized)
        } catch {
            await kill(reason: "stopped reading its input")
            throw SourceError.transient("plugin \(executable) stopped reading its input; restarting it")
        }
        switch await process.nextLine(timeout: timeout) {
        case .line(let bytes):
            if let response = try? JSONDocument(parsing: bytes), response.root.kind == .object { return response }
            throw await discard(because: "wrote a line that is not a JSON object: \(String(decoding: bytes.prefix(200), as: UTF8.self))")
        case .tooLong:
            throw await discard(because: "wrote a line longer than \(Subprocess.maxLineBytes) bytes")
        case .closed:
            self.process = nil
            let status = await process.terminate()
            throw SourceError.transient("plugin \(executable) \(Subprocess.describe(status)); restarting it")
        case .timedOut:
            throw await discard(because: "did not answer within \(timeout.wholeMilliseconds) ms")
        }
    }

    private func kill(reason: String) async {
        guard let process else { return }
        self.process = nil
        logger.warning("stopping plugin \(executable) (pid \(process.pid)): it \(reason)")
        _ = await process.terminate()
    }
}

extension FileManager {
    fileprivate func directoryExists(atPath path: String) -> Bool {
        var isDirectory: ObjCBool = false
        return fileExists(atPath: path, isDirectory: &isDirectory) && isDirectory.boolValue
    }
}
