import FeedKit
import Foundation

/// The `exec` adapter: pages from a program in any language, over its stdin and stdout.
///
/// The daemon starts `command` once and keeps it running, writes one JSON request per line and
/// reads one JSON response per line (SPEC §4):
///
/// ```
/// -> {"op":"configure","feed":"custom","options":{...}}
/// <- {"ok":true}                                   or {"error":"why"}
/// <- {"ok":true,"reproduces_pages":false}          its pages cannot be fetched again alike
/// -> {"op":"fetch","page":1,"token":null,"page_size":20}
/// <- {"items":[{"id":"a","data":{...}}, ...],"next":"opaque-or-null"}
/// <- {"error":"upstream timed out","retryable":true}
/// ```
///
/// A program that exits, hangs past `timeout` or writes a line that is not a valid response is
/// ended with its whole process group and started again on the next try, with the feed's
/// backoff; the feed carries on at the page it was on. Its stderr goes to the daemon's log,
/// tagged with the feed.
///
/// A program whose pages are not the same when asked for again (it reads a queue, a live API, a
/// clock) answers `configure` with `"reproduces_pages": false`, and the daemon keeps its pages.
///
/// Options: `command` (required, an array: the program and its arguments), `page_size`
/// (default 20); every option is passed to the program in `configure`.
public struct ExecSource: SourceAdapter {
    public static let sourceName = "exec"
    public static let configKeys = [
        ConfigKey(
            "command", .stringArray, .required(example: #"["/usr/lib/feedd/plugins/json-dir"]"#),
            "the program and its arguments; a bare name is looked up in /usr/local/bin:/usr/bin:/bin"),
        ConfigKey("page_size", .integer, .value("20"), "items per page, sent with every fetch"),
        ConfigKey.otherKeys("passed to the program in configure, which judges them"),
    ]

    let pageSize: Int
    let host: PluginHost

    public init(options: AdapterOptions, context: AdapterContext) throws {
        guard let command = try options.stringArray("command") else { throw options.missing("command") }
        guard let program = command.first, !program.isEmpty else {
            throw options.invalid("command", "needs at least the program to run")
        }
        guard let executable = PluginHost.resolve(program) else {
            throw options.invalid("command", "\"\(program)\" is not an executable file\(program.contains("/") ? "" : " in \(PluginHost.searchPath)")")
        }
        pageSize = try options.integer("page_size", in: 1...100_000) ?? 20
        // Every other key is the program's to judge, in its answer to `configure`.
        options.values.keys.forEach { options.accept($0) }
        host = PluginHost(
            executable: executable, arguments: Array(command.dropFirst()), feed: context.feed, options: options.values,
            timeout: context.requestTimeout, logger: context.logger)
    }

    public func fetch(_ request: PageRequest) async throws -> FetchResult {
        let response = try await host.call([
            "op": "fetch", "page": .integer(Int64(request.page)), "token": request.token.map(JSONValue.string) ?? .null,
            "page_size": .integer(Int64(pageSize)),
        ])
        switch ExecResponse.decodeFetch(response) {
        case .page(let result): return result
        case .pluginError(let error): throw error
        case .invalid(let reason): throw await host.discard(because: reason)
        }
    }

    /// As the program declared when it was last configured (see ``SourceAdapter/reproducesPages``).
    public var reproducesPages: Bool {
        host.reproducesPages.withLock { $0 }
    }

    public func shutdown() async {
        await host.stop()
    }

    /// Starts the program and sends `configure`, so `check-config` reports what it refuses.
    public func verify() async throws {
        try await host.verifyConfiguration()
    }
}
