import ConformanceKit
import ExecAdapter
import FeedEngine
import FeedKit
import Foundation

/// `feedd plugin check`: runs an exec plugin as the daemon would (the `exec` adapter itself)
/// and holds it to the adapter conformance checks, printing each check as it passes or fails,
/// with what a plugin author needs to fix it.
struct PluginCheckCommand {
    let request: PluginCheckRequest

    /// 0 when the plugin conforms, 1 when it does not (or cannot be started).
    func run() -> Int32 {
        let sink = PluginLogSink()
        let adapter: ExecSource
        do {
            let options = try optionValues()
            adapter = try ExecSource(
                options: AdapterOptions(feed: "plugin-check", values: options, declared: ExecSource.configKeys),
                context: AdapterConformance.context(feed: "plugin-check", timeout: request.timeout, sink: sink))
        } catch let error as OptionError {
            return fail("cannot check \(request.program): \(error.key): \(error.message)")
        } catch {
            return fail("cannot check \(request.program): \(error)")
        }
        let conforms = Locked(false)
        let done = DispatchSemaphore(value: 0)
        Task.detached { [request] in
            let passed = await Self.check(adapter, pages: request.pages)
            await adapter.shutdown()
            conforms.withLock { $0 = passed }
            done.signal()
        }
        done.wait()
        let passed = conforms.withLock { $0 }
        print(passed ? "\(request.program) follows the exec protocol" : "\(request.program) does not follow the exec protocol (above)")
        return passed ? 0 : 1
    }

    /// `configure`, then the conformance checks, each printed as it passes or fails.
    private static func check(_ adapter: ExecSource, pages: Int) async -> Bool {
        do {
            try await adapter.verify()
            let reproduces = adapter.reproducesPages ? "" : "; its pages do not come back the same (reproduces_pages: false)"
            report(Finding.Printable(passed: true, "configure", "answered ok\(reproduces)"))
        } catch {
            report(Finding.Printable(passed: false, "configure", "\(error)"))
            return false
        }
        return await AdapterConformance.run(adapter, pages: .upTo(pages)) { report(Finding.Printable($0)) }
    }

    /// The feed table the plugin is configured with: its command and the `--option`s.
    private func optionValues() throws(OptionError) -> [String: JSONValue] {
        var values: [String: JSONValue] = ["command": .array(([request.program] + request.arguments).map(JSONValue.string))]
        for option in request.options {
            let equals = option.firstIndex(of: "=")!
            let key = String(option[..<equals])
            let text = String(option[option.index(after: equals)...])
            guard key != "command" else {
                throw OptionError(table: "plugin check", key: key, message: "give the program and its arguments on the command line, not as an option")
            }
            values[key] = JSONValue(tomlValue: text) ?? .string(text)
        }
        return values
    }

    private func fail(_ message: String) -> Int32 {
        FileHandle.standardError.write(Data("feedd: \(message)\n".utf8))
        return 1
    }

    private static func report(_ line: Finding.Printable) {
        print(line.text)
        fflush(nil)
    }
}

extension Finding {
    /// A check as `feedd plugin check` prints it, with a hint in plugin terms where one helps.
    fileprivate struct Printable {
        let text: String

        init(passed: Bool, _ subject: String, _ message: String) {
            text = "\(passed ? "ok  " : "FAIL") \(subject): \(message)"
        }

        init(_ finding: Finding) {
            // The daemon restarts a plugin that misbehaves; the check stops at it instead.
            var message = finding.message
            if message.hasSuffix(Self.restartNote) { message.removeLast(Self.restartNote.count) }
            self.init(passed: finding.passed, finding.subject, message + (finding.brokenRule.flatMap(Self.hint) ?? ""))
        }

        private static let restartNote = "; restarting it"

        private static func hint(_ rule: Finding.Rule) -> String? {
            switch rule {
            case .changedWhenAskedAgain:
                "\n     feedd may ask for a page again with the token it came with, and serves what comes back; a "
                    + "plugin whose pages cannot come back the same answers configure with {\"ok\":true,\"reproduces_pages\":false}"
            case .repeatedID, .emptyID:
                "\n     give each item its own \"id\" (a string), or leave \"id\" out and feedd uses a hash of its data"
            case .fetchFailed:
                "\n     (feedd takes one line for each fetch: {\"items\":[{\"id\":…,\"data\":…},…],\"next\":\"token\" or null}, "
                    + "or {\"error\":\"why\",\"retryable\":true|false} when the source fails)"
            default:
                nil
            }
        }
    }
}

/// The plugin's stderr, as the exec adapter logs it, shown between the checks; the adapter's
/// own records (started, killed) are not: the check that failed says why.
private struct PluginLogSink: LogSink {
    func write(_ level: LogLevel, _ message: String) {
        let stderrPrefix = "plugin stderr: "
        guard message.hasPrefix(stderrPrefix) else { return }
        print("     stderr: \(message.dropFirst(stderrPrefix.count))")
        fflush(nil)
    }
}
