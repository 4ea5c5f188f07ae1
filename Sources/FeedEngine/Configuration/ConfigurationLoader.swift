import FeedKit
import Foundation

/// Reads the main config file and its drop-ins, validates everything, and builds each feed's
/// adapter. Problems are collected rather than stopping at the first, so `feedd check-config`
/// can list them all.
public struct ConfigurationLoader: Sendable {
    private let registry: AdapterRegistry
    private let logger: Logger

    public init(registry: AdapterRegistry, logger: Logger) {
        self.registry = registry
        self.logger = logger
    }

    /// Loads `path` and every `*.toml` in `feedd.d/` beside it, in name order.
    public func load(file path: String) throws(ConfigError) -> Configuration {
        let text: String
        do {
            text = try String(contentsOfFile: path, encoding: .utf8)
        } catch {
            throw ConfigError([ConfigProblem(file: path, message: "cannot read the config file: \(Self.reason(error))")])
        }
        let directory = (path as NSString).deletingLastPathComponent
        return try load(text: text, named: path, dropInDirectory: (directory.isEmpty ? "." : directory) + "/feedd.d")
    }

    /// Loads config `text` that has no file of its own (the embedded default), plus drop-ins if any.
    public func load(text: String, named name: String, dropInDirectory: String?) throws(ConfigError) -> Configuration {
        var problems: [ConfigProblem] = []
        var documents: [TOMLDocument] = []
        var files = [name]
        do {
            documents.append(try TOMLDocument(file: name, text: text))
        } catch {
            problems += error.problems
        }
        if let dropInDirectory {
            for path in Self.dropIns(in: dropInDirectory) {
                files.append(path)
                do {
                    let text = try String(contentsOfFile: path, encoding: .utf8)
                    documents.append(try TOMLDocument(file: path, text: text))
                } catch let error as ConfigError {
                    problems += error.problems
                } catch {
                    problems.append(ConfigProblem(file: path, message: "cannot read: \(Self.reason(error))"))
                }
            }
        }
        var merged = MergedTables()
        for document in documents {
            merged.add(document, problems: &problems)
        }
        let daemon = readDaemonSettings(merged, problems: &problems)
        var feeds: [FeedDefinition] = []
        for name in merged.feeds.keys.sorted() {
            let (document, table) = merged.feeds[name]!
            if let feed = readFeed(name: name, table: table, in: document, defaultPrefetch: daemon.prefetch, problems: &problems) {
                feeds.append(feed)
            }
        }
        guard problems.isEmpty else { throw ConfigError(problems) }
        return Configuration(daemon: daemon, feeds: feeds, files: files)
    }

    private static func dropIns(in directory: String) -> [String] {
        let names = (try? FileManager.default.contentsOfDirectory(atPath: directory)) ?? []
        return names.filter { $0.hasSuffix(".toml") && !$0.hasPrefix(".") }.sorted().map { "\(directory)/\($0)" }
    }

    private static func reason(_ error: any Error) -> String {
        let nsError = error as NSError
        if let underlying = nsError.userInfo[NSUnderlyingErrorKey] as? NSError, underlying.domain == NSPOSIXErrorDomain {
            return String(cString: strerror(Int32(underlying.code)))
        }
        return nsError.localizedDescription
    }

    // MARK: The [daemon] table

    private func readDaemonSettings(_ merged: MergedTables, problems: inout [ConfigProblem]) -> DaemonSettings {
        var settings = DaemonSettings()
        let table = ConfigTable(name: "daemon", values: merged.daemon.mapValues(\.value))
        func read(_ body: () throws -> Void) {
            do {
                try body()
            } catch {
                guard let error = error as? OptionError else { return }
                let document = merged.daemon[error.key]?.document
                problems.append(document?.problem(at: ["daemon", error.key], error.description)
                    ?? ConfigProblem(file: "daemon", message: error.description))
            }
        }
        read { settings.socketPath = try table.string("socket") }
        read { settings.stateDirectory = try table.string("state_dir") }
        read { settings.prefetch = try table.integer("prefetch", in: 0...1_000) ?? settings.prefetch }
        read { settings.maxClients = try table.integer("max_clients", in: 1...1_000_000) ?? settings.maxClients }
        read { settings.maxLineBytes = try table.integer("max_line_bytes", in: 64...16_777_216) ?? settings.maxLineBytes }
        read { settings.maxSubscriptions = try table.integer("max_subscriptions", in: 1...100_000) ?? settings.maxSubscriptions }
        read { settings.stallTimeout = try positive(table, "stall_timeout") ?? settings.stallTimeout }
        read { settings.socketGroup = try table.string("socket_group") }
        read { settings.metricsFile = try table.string("metrics_file") }
        read { settings.allowGroups = try table.stringArray("allow_groups") ?? [] }
        read {
            guard let mode = try table.string("socket_mode") else { return }
            guard let parsed = mode_t(mode, radix: 8), parsed <= 0o777 else {
                throw table.invalid("socket_mode", "expected an octal mode such as \"0660\", got \"\(mode)\"")
            }
            settings.socketMode = parsed
        }
        read {
            guard let value = table.value("allow_uids") else { return }
            let uids = value.arrayValue?.compactMap { $0.integerValue.flatMap(UInt32.init(exactly:)) }
            guard let uids, uids.count == value.arrayValue?.count else {
                throw table.invalid("allow_uids", "expected an array of user ids (integers)")
            }
            settings.allowUIDs = uids
        }
        read {
            guard let name = try table.string("log_level") else { return }
            guard let level = LogLevel(name: name) else {
                let names = LogLevel.allCases.sorted(by: >).map(\.name).joined(separator: ", ")
                throw table.invalid("log_level", "\"\(name)\" is not a log level (\(names))")
            }
            settings.logLevel = level
        }
        for key in table.unreadKeys {
            problems.append(merged.daemon[key]!.document.problem(at: ["daemon", key], "daemon.\(key): unknown key"))
        }
        return settings
    }

    // MARK: [feeds.NAME] tables

    private func readFeed(
        name: String, table values: [String: JSONValue], in document: TOMLDocument, defaultPrefetch: Int,
        problems: inout [ConfigProblem]
    ) -> FeedDefinition? {
        let table = ConfigTable(feed: name, values: values)
        let problemCount = problems.count
        func read(_ body: () throws -> Void) {
            do {
                try body()
            } catch {
                guard let error = error as? OptionError else { return }
                problems.append(document.problem(at: ["feeds", name, error.key], error.description))
            }
        }
        var source = ""
        read { source = try table.requiredString("source") }
        var settings = FeedSettings(name: name, source: source, prefetch: defaultPrefetch)
        read { settings.prefetch = try table.integer("prefetch", in: 0...1_000) ?? defaultPrefetch }
        read { settings.wrap = try table.bool("wrap") ?? false }
        read { settings.poll = try positive(table, "poll") }
        read { settings.timeout = try positive(table, "timeout") ?? settings.timeout }
        read { settings.retryMaxDelay = try positive(table, "retry_max_delay") ?? settings.retryMaxDelay }
        read { settings.cachePages = try table.integer("cache_pages", in: 1...1_000_000) ?? settings.cachePages }
        guard problems.count == problemCount else { return nil }

        guard let adapterType = registry[source] else {
            let known = registry.sourceNames.joined(separator: ", ")
            problems.append(document.problem(at: ["feeds", name, "source"], "feeds.\(name).source: unknown source \"\(source)\" (known: \(known))"))
            return nil
        }
        let daemonKeys: Set = ["source", "prefetch", "wrap", "poll", "timeout", "retry_max_delay", "cache_pages"]
        settings.options = values.filter { !daemonKeys.contains($0.key) }
        let options = AdapterOptions(feed: name, values: settings.options)
        let context = AdapterContext(
            feed: name, requestTimeout: settings.timeout, pollInterval: settings.poll, logger: logger.forFeed(name))
        let adapter: any SourceAdapter
        do {
            adapter = try adapterType.init(options: options, context: context)
        } catch let error as OptionError {
            problems.append(document.problem(at: ["feeds", name, error.key], error.description))
            return nil
        } catch {
            problems.append(document.problem(at: ["feeds", name], "feeds.\(name): \(error)"))
            return nil
        }
        for key in options.unreadKeys {
            problems.append(document.problem(at: ["feeds", name, key], "feeds.\(name).\(key): unknown key for source \"\(source)\""))
        }
        return problems.count == problemCount ? FeedDefinition(settings: settings, adapter: adapter) : nil
    }

    private func positive(_ table: ConfigTable, _ key: String) throws(OptionError) -> Duration? {
        guard let duration = try table.duration(key) else { return nil }
        guard duration > .zero else { throw table.invalid(key, "must be longer than zero") }
        return duration
    }
}

/// The top-level tables of every file, merged: `[daemon]` keys from later files win, and a feed
/// may be defined in one file only.
private struct MergedTables {
    var daemon: [String: (document: TOMLDocument, value: JSONValue)] = [:]
    var feeds: [String: (document: TOMLDocument, table: [String: JSONValue])] = [:]

    mutating func add(_ document: TOMLDocument, problems: inout [ConfigProblem]) {
        for (key, value) in document.root {
            switch key {
            case "daemon":
                guard let table = value.objectValue else {
                    problems.append(document.problem(at: [key], "daemon: expected a table"))
                    continue
                }
                for (name, setting) in table { daemon[name] = (document, setting) }
            case "feeds":
                guard let table = value.objectValue else {
                    problems.append(document.problem(at: [key], "feeds: expected a table of feeds"))
                    continue
                }
                for (name, feed) in table {
                    addFeed(name, feed, from: document, problems: &problems)
                }
            default:
                problems.append(document.problem(at: [key], "\(key): unknown table (expected [daemon] or [feeds.NAME])"))
            }
        }
    }

    private mutating func addFeed(_ name: String, _ value: JSONValue, from document: TOMLDocument, problems: inout [ConfigProblem]) {
        guard FeedName.isValid(name) else {
            problems.append(document.problem(at: ["feeds", name], "feeds.\(name): a feed name must match [a-z0-9][a-z0-9_-]{0,63}"))
            return
        }
        guard let table = value.objectValue else {
            problems.append(document.problem(at: ["feeds", name], "feeds.\(name): expected a table"))
            return
        }
        if let earlier = feeds[name] {
            let first = earlier.document.location(of: ["feeds", name])
            problems.append(document.problem(at: ["feeds", name], "feeds.\(name): feed \"\(name)\" is defined twice, in \(first) and here"))
            return
        }
        feeds[name] = (document, table)
    }
}

/// The rule for feed names: `[a-z0-9][a-z0-9_-]{0,63}`.
public enum FeedName {
    public static func isValid(_ name: String) -> Bool {
        let bytes = Array(name.utf8)
        guard (1...64).contains(bytes.count) else { return false }
        func isLowerAlphanumeric(_ byte: UInt8) -> Bool {
            (UInt8(ascii: "a")...UInt8(ascii: "z")).contains(byte) || (UInt8(ascii: "0")...UInt8(ascii: "9")).contains(byte)
        }
        return isLowerAlphanumeric(bytes[0])
            && bytes.dropFirst().allSatisfy { isLowerAlphanumeric($0) || $0 == UInt8(ascii: "_") || $0 == UInt8(ascii: "-") }
    }
}
