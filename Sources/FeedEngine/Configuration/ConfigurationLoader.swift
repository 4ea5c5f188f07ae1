import FeedKit
import Foundation
import Glibc

/// Reads the main config file and its drop-ins, validates everything, and builds each feed's
/// adapter. Problems are collected rather than stopping at the first, so `feedd check-config`
/// can list them all.
public struct ConfigurationLoader: Sendable {
    private let registry: AdapterRegistry
    private let logger: Logger
    private let transport: any HTTPTransport
    /// Where each feed's adapter gets a directory of its own (`<root>/<feed>`) for state that must
    /// survive a restart, given the `[daemon]` table just read (the root lies under `state_dir`);
    /// nil (check-config, tests) keeps that state in memory.
    private let adapterStateRoot: (@Sendable (DaemonSettings) -> String)?
    /// How adapters that gather other feeds (`merge`) read them; nil where nothing is read.
    private let feedReader: (any FeedReader)?

    public init(
        registry: AdapterRegistry, logger: Logger, transport: any HTTPTransport,
        adapterStateRoot: (@Sendable (DaemonSettings) -> String)? = nil,
        feedReader: (any FeedReader)? = nil
    ) {
        self.feedReader = feedReader
        self.registry = registry
        self.logger = logger
        self.transport = transport
        self.adapterStateRoot = adapterStateRoot
    }

    /// Loads `path` and every `*.toml` in `feedd.d/` beside it, in name order.
    public func load(file path: String) throws(ConfigError) -> Configuration {
        let text = try ConfigFileReader.read(path)
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
            do {
                for path in try ConfigFileReader.dropIns(in: dropInDirectory) {
                    files.append(path)
                    do {
                        documents.append(try TOMLDocument(file: path, text: try ConfigFileReader.read(path)))
                    } catch {
                        problems += error.problems
                    }
                }
            } catch {
                files.append(dropInDirectory)
                problems += error.problems
            }
        }
        var merged = MergedTables()
        for document in documents {
            merged.add(document, problems: &problems)
        }
        let daemon = readDaemonSettings(merged, problems: &problems)
        let cluster = readClusterSettings(merged.cluster, problems: &problems)
        let http = readHTTPSettings(merged.http, problems: &problems)
        var feeds: [FeedDefinition] = []
        for name in merged.feeds.keys.sorted() {
            let (document, table) = merged.feeds[name]!
            if let feed = readFeed(
                name: name, table: table, in: document, defaultPrefetch: daemon.prefetch, stateRoot: adapterStateRoot?(daemon),
                problems: &problems)
            {
                feeds.append(feed)
            }
        }
        checkMembers(of: feeds, in: merged, problems: &problems)
        guard problems.isEmpty else { throw ConfigError(Self.inReadingOrder(problems, files: files)) }
        return Configuration(daemon: daemon, cluster: cluster, http: http, feeds: feeds, files: files)
    }

    /// Problems as a reader meets them: file by file in the order they are read, then by line and column.
    private static func inReadingOrder(_ problems: [ConfigProblem], files: [String]) -> [ConfigProblem] {
        let order = Dictionary(files.enumerated().map { ($1, $0) }, uniquingKeysWith: { first, _ in first })
        return problems.enumerated().sorted { first, second in
            let a = (order[first.element.file] ?? files.count, first.element.line ?? 0, first.element.column ?? 0, first.offset)
            let b = (order[second.element.file] ?? files.count, second.element.line ?? 0, second.element.column ?? 0, second.offset)
            return a < b
        }.map(\.element)
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
        read {
            guard let path = try table.string("socket") else { return }
            // sockaddr_un's sun_path holds the path and its terminating NUL.
            let limit = MemoryLayout.size(ofValue: sockaddr_un().sun_path) - 1
            guard (1...limit).contains(path.utf8.count) else {
                throw table.invalid("socket", "a Unix socket path must be 1 to \(limit) bytes long, this one is \(path.utf8.count)")
            }
            settings.socketPath = path
        }
        read { settings.stateDirectory = try table.string("state_dir") }
        read { settings.statePageBytes = try byteSize(table, "state_page_bytes", in: 0...(1 << 40)) ?? settings.statePageBytes }
        read { settings.prefetch = try table.integer("prefetch", in: 0...1_000) ?? settings.prefetch }
        read { settings.maxClients = try table.integer("max_clients", in: 1...1_000_000) ?? settings.maxClients }
        read { settings.maxLineBytes = try table.integer("max_line_bytes", in: 64...16_777_216) ?? settings.maxLineBytes }
        read { settings.maxSubscriptions = try table.integer("max_subscriptions", in: 1...100_000) ?? settings.maxSubscriptions }
        read { settings.stallTimeout = try positive(table, "stall_timeout") ?? settings.stallTimeout }
        read {
            guard let name = try table.string("socket_group") else { return }
            guard UserDatabase.groupEntry(named: name) != nil else { throw table.invalid("socket_group", "no group named \"\(name)\" on this host") }
            settings.socketGroup = name
        }
        read {
            let groups = try Self.resolvedGroups(table)
            settings.allowGIDs = groups.gids
            settings.allowGroupMemberUIDs = groups.memberUIDs
        }
        read { settings.metricsFile = try table.string("metrics_file") }
        read {
            guard let mode = try table.string("socket_mode") else { return }
            guard let parsed = mode_t(mode, radix: 8), parsed <= 0o777 else {
                throw table.invalid("socket_mode", "expected an octal mode such as \"0660\", got \"\(mode)\"")
            }
            settings.socketMode = parsed
        }
        read { settings.allowUIDs = try Self.resolvedUsers(table) }
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

    /// `allow_uids`: uids and user names, every name resolved now. A name that does not resolve is
    /// an error: skipping it could leave the list empty, and an empty list lets everyone in.
    private static func resolvedUsers(_ table: ConfigTable) throws(OptionError) -> [UInt32] {
        var uids: [UInt32] = []
        for entry in try idList(table, "allow_uids", what: "user") {
            switch entry {
            case .id(let uid): uids.append(uid)
            case .name(let name):
                guard let uid = UserDatabase.uid(ofUser: name) else { throw table.invalid("allow_uids", "no user named \"\(name)\" on this host") }
                uids.append(uid)
            }
        }
        return uids
    }

    /// `allow_groups`: gids and group names, resolved now with the uids of the groups' listed members.
    private static func resolvedGroups(_ table: ConfigTable) throws(OptionError) -> (gids: [UInt32], memberUIDs: [UInt32]) {
        var gids: [UInt32] = []
        var memberNames: [String] = []
        for entry in try idList(table, "allow_groups", what: "group") {
            switch entry {
            case .id(let gid):
                gids.append(gid)
                memberNames += UserDatabase.members(ofGroup: gid) ?? []
            case .name(let name):
                guard let group = UserDatabase.groupEntry(named: name) else {
                    throw table.invalid("allow_groups", "no group named \"\(name)\" on this host")
                }
                gids.append(group.gid)
                memberNames += group.members
            }
        }
        return (gids, memberNames.compactMap(UserDatabase.uid(ofUser:)))
    }

    private enum IDOrName {
        case id(UInt32)
        case name(String)
    }

    private static func idList(_ table: ConfigTable, _ key: String, what: String) throws(OptionError) -> [IDOrName] {
        guard let value = table.value(key) else { return [] }
        let expected = "expected an array of \(what) ids (whole numbers) or \(what) names (strings)"
        guard let elements = value.arrayValue else { throw table.invalid(key, "\(expected), got \(value.typeDescription)") }
        var entries: [IDOrName] = []
        for element in elements {
            switch element {
            case .integer(let id):
                guard let id = UInt32(exactly: id), id != UInt32.max else { throw table.invalid(key, "\(id) is not a \(what) id") }
                entries.append(.id(id))
            case .string(let name) where !name.isEmpty:
                entries.append(.name(name))
            default:
                throw table.invalid(key, "\(expected), got \(element.typeDescription)")
            }
        }
        return entries
    }

    // MARK: [feeds.NAME] tables

    private func readFeed(
        name: String, table values: [String: JSONValue], in document: TOMLDocument, defaultPrefetch: Int, stateRoot: String?,
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
        read { settings.cacheBytes = try byteSize(table, "cache_bytes", in: 64 << 10...(1 << 40)) ?? settings.cacheBytes }
        // A file is on one host's disk, so it is not shared unless asked for (SPEC §8).
        read { settings.shared = try table.bool("shared") ?? (source != "file") }
        guard problems.count == problemCount else { return nil }

        guard let adapterType = registry[source] else {
            let known = registry.sourceNames.joined(separator: ", ")
            problems.append(document.problem(at: ["feeds", name, "source"], "feeds.\(name).source: unknown source \"\(source)\" (known: \(known))"))
            return nil
        }
        let daemonKeys: Set = ["source", "prefetch", "wrap", "poll", "timeout", "retry_max_delay", "cache_pages", "cache_bytes", "shared"]
        settings.options = values.filter { !daemonKeys.contains($0.key) }
        let options = AdapterOptions(feed: name, values: settings.options)
        let context = AdapterContext(
            feed: name, requestTimeout: settings.timeout, pollInterval: settings.poll, logger: logger.forFeed(name),
            transport: transport, stateDirectory: stateRoot.map { "\($0)/\(name)" }, feeds: feedReader)
        let adapter: any SourceAdapter
        let values = settings.options
        let makeAdapter: @Sendable () throws -> any SourceAdapter = {
            try adapterType.init(options: AdapterOptions(feed: name, values: values), context: context)
        }
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
        let written = document.problem(at: ["feeds", name], "")
        let location = ConfigLocation(file: written.file, line: written.line, column: written.column)
        return problems.count == problemCount
            ? FeedDefinition(settings: settings, adapter: adapter, makeAdapter: makeAdapter, location: location) : nil
    }

    /// Feeds that gather others (`merge`) must name feeds of this configuration, and no feed may
    /// gather itself, directly or through others.
    private func checkMembers(of feeds: [FeedDefinition], in merged: MergedTables, problems: inout [ConfigProblem]) {
        let members = Dictionary(uniqueKeysWithValues: feeds.map { ($0.settings.name, $0.adapter.memberFeeds) })
        for feed in feeds where !feed.adapter.memberFeeds.isEmpty {
            let name = feed.settings.name
            guard let document = merged.feeds[name]?.document else { continue }
            let unknown = feed.adapter.memberFeeds.filter { merged.feeds[$0] == nil }
            if !unknown.isEmpty {
                let list = unknown.map { "\"\($0)\"" }.joined(separator: ", ")
                problems.append(document.problem(at: ["feeds", name, "feeds"], "feeds.\(name).feeds: no feed \(list) in this configuration"))
            } else if let cycle = Self.cycle(from: name, members: members) {
                problems.append(document.problem(at: ["feeds", name, "feeds"], "feeds.\(name).feeds: the feed gathers itself (\(cycle.joined(separator: " → ")))"))
            }
        }
    }

    /// A path of members from `start` back to `start`, if there is one.
    private static func cycle(from start: String, members: [String: [String]]) -> [String]? {
        var visited: Set<String> = []
        func search(_ path: [String]) -> [String]? {
            for member in members[path.last!] ?? [] {
                if member == start { return path + [member] }
                guard visited.insert(member).inserted else { continue }
                if let found = search(path + [member]) { return found }
            }
            return nil
        }
        return search([start])
    }

    /// A size such as `"512KiB"`, `"64MiB"` or `"1GiB"` (or a plain number of bytes) within `range`.
    private func byteSize(_ table: ConfigTable, _ key: String, in range: ClosedRange<Int>) throws(OptionError) -> Int? {
        guard let value = table.value(key) else { return nil }
        let bytes: Int?
        if let integer = value.integerValue, case .integer = value {
            bytes = Int(exactly: integer)
        } else if let text = value.stringValue {
            bytes = ByteSize.parse(text)
        } else {
            bytes = nil
        }
        guard let bytes else {
            throw table.invalid(key, "expected a size such as \"512KiB\", \"64MiB\" or \"1GiB\"")
        }
        guard range.contains(bytes) else {
            throw table.invalid(key, "must be from \(ByteSize.format(range.lowerBound)) to \(ByteSize.format(range.upperBound))")
        }
        table.accept(key)
        return bytes
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
    /// The first file's `[cluster]` table, and its keys from every file.
    var cluster: KeyedTable?
    /// The same for `[http]`.
    var http: KeyedTable?

    typealias KeyedTable = (document: TOMLDocument, keys: [String: (document: TOMLDocument, value: JSONValue)])
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
            case "cluster":
                Self.add(value, named: key, from: document, to: &cluster, problems: &problems)
            case "http":
                Self.add(value, named: key, from: document, to: &http, problems: &problems)
            case "feeds":
                guard let table = value.objectValue else {
                    problems.append(document.problem(at: [key], "feeds: expected a table of feeds"))
                    continue
                }
                for (name, feed) in table {
                    addFeed(name, feed, from: document, problems: &problems)
                }
            default:
                problems.append(document.problem(at: [key], "\(key): unknown table (expected [daemon], [cluster], [http] or [feeds.NAME])"))
            }
        }
    }

    /// Merges a table whose keys from later files win, remembering the first file that has it.
    private static func add(
        _ value: JSONValue, named key: String, from document: TOMLDocument, to merged: inout KeyedTable?, problems: inout [ConfigProblem]
    ) {
        guard let table = value.objectValue else {
            problems.append(document.problem(at: [key], "\(key): expected a table"))
            return
        }
        if merged == nil { merged = (document, [:]) }
        for (name, setting) in table { merged!.keys[name] = (document, setting) }
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

/// Sizes as the config writes them: a whole number and a binary unit, `B`, `KiB`, `MiB`, `GiB`, `TiB`.
enum ByteSize {
    private static let units: [(suffix: String, shift: Int)] = [("TiB", 40), ("GiB", 30), ("MiB", 20), ("KiB", 10), ("B", 0)]

    static func parse(_ text: String) -> Int? {
        for unit in units where text.hasSuffix(unit.suffix) {
            let number = text.dropLast(unit.suffix.count).trimmingCharacters(in: .whitespaces)
            guard let value = Int(number), value >= 0, value <= (Int.max >> unit.shift) else { return nil }
            return value << unit.shift
        }
        return nil
    }

    static func format(_ bytes: Int) -> String {
        for unit in units where bytes >= (1 << unit.shift) && bytes % (1 << unit.shift) == 0 {
            return "\(bytes >> unit.shift)\(unit.suffix)"
        }
        return "\(bytes)B"
    }
}
