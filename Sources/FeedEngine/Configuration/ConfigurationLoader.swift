import FeedKit
import Foundation

/// Reads the main config file and its drop-ins, validates everything, and builds each feed's
/// adapter. Problems are collected rather than stopping at the first, so `feedd check-config`
/// can list them all. The keys of each table, and what each does, are declared once
/// (``DaemonTable``, ``FeedTable``, ``ClusterKeys``, each adapter's ``SourceAdapter/configKeys``);
/// ``ConfigReference`` lists them for the docs.
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
        var findings = ConfigFindings()
        let (documents, files) = Self.documents(text: text, named: name, dropInDirectory: dropInDirectory, problems: &findings.problems)
        var merged = MergedTables()
        for document in documents {
            merged.add(document, problems: &findings.problems)
        }
        let daemon = Self.read(merged.section("daemon"), named: "daemon", keys: DaemonTable.keys, into: DaemonSettings(), findings: &findings)
        let http = merged.section("http").map { Self.read($0, named: "http", keys: HTTPTable.keys, into: HTTPSettings(), findings: &findings) }
        let cluster = readClusterSettings(Self.withoutUnknownClusterKeys(merged.section("cluster"), problems: &findings.problems), problems: &findings.problems)
        let builder = FeedBuilder(registry: registry, logger: logger, transport: transport, feedReader: feedReader)
        var feeds: [FeedDefinition] = []
        for name in merged.feeds.keys.sorted() {
            let (document, table) = merged.feeds[name]!
            if let feed = builder.build(
                name, table: table, in: document, defaultPrefetch: daemon.prefetch, stateRoot: adapterStateRoot?(daemon), findings: &findings)
            {
                feeds.append(feed)
            }
        }
        findings.problems += MemberGraph(feeds).problems(definedFeeds: Set(merged.feeds.keys)) { name, message in
            merged.feeds[name]?.document.problem(at: ["feeds", name, "feeds"], message)
        }
        let ordered = findings.inReadingOrder(files: files)
        guard ordered.problems.isEmpty else { throw ConfigError(ordered.problems, warnings: ordered.warnings, feeds: feeds) }
        return Configuration(daemon: daemon, cluster: cluster, http: http, feeds: feeds, files: files, warnings: ordered.warnings)
    }

    /// The parsed main text and drop-ins, and the names of every file read, in reading order.
    private static func documents(
        text: String, named name: String, dropInDirectory: String?, problems: inout [ConfigProblem]
    ) -> (documents: [TOMLDocument], files: [String]) {
        var documents: [TOMLDocument] = []
        var files = [name]
        do {
            documents.append(try TOMLDocument(file: name, text: text))
        } catch {
            problems += error.problems
        }
        guard let dropInDirectory else { return (documents, files) }
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
        return (documents, files)
    }

    /// A table read key by key from `keys` into `settings` (`[daemon]`, `[http]`), each key's
    /// problem placed in the file that set it last.
    private static func read<Settings>(
        _ section: MergedSection?, named name: String, keys: [SettingKey<Settings>], into settings: Settings, findings: inout ConfigFindings
    ) -> Settings {
        var settings = settings
        guard let section else { return settings }
        let values = section.keys.mapValues(\.value)
        let table = ConfigTable(name: name, values: values, declared: keys.declarations())
        func place(_ key: String, _ message: String) -> ConfigProblem {
            (section.keys[key]?.document ?? section.document).problem(at: [name, key], message)
        }
        let failed = keys.read(from: table, into: &settings) { findings.problems.append(place($0.key, $0.description)) }
        for (key, message) in table.unknownKeyMessages(known: keys.declarations()) {
            findings.problems.append(place(key, message))
        }
        findings.warnings += PathWarnings.check(values.filter { !failed.contains($0.key) }, declared: keys.declarations(), table: name, place: place)
        return settings
    }

    /// The `[cluster]` section without the keys ``ClusterKeys`` does not declare, each reported
    /// with the closest declared name.
    private static func withoutUnknownClusterKeys(_ section: MergedSection?, problems: inout [ConfigProblem]) -> MergedSection? {
        guard var section else { return nil }
        let table = ConfigTable(name: "cluster", values: section.keys.mapValues(\.value), declared: ClusterKeys.keys)
        for (key, message) in table.unknownKeyMessages(known: ClusterKeys.keys) {
            problems.append(section.keys[key]!.document.problem(at: ["cluster", key], message))
            section.keys[key] = nil
        }
        return section
    }
}

/// What loading found: problems reject the configuration, warnings do not.
struct ConfigFindings {
    var problems: [ConfigProblem] = []
    var warnings: [ConfigProblem] = []

    /// Both as a reader meets them: file by file in the order they are read, then by line and column.
    func inReadingOrder(files: [String]) -> ConfigFindings {
        let order = Dictionary(files.enumerated().map { ($1, $0) }, uniquingKeysWith: { first, _ in first })
        func sorted(_ problems: [ConfigProblem]) -> [ConfigProblem] {
            problems.enumerated().sorted { first, second in
                let a = (order[first.element.file] ?? files.count, first.element.line ?? 0, first.element.column ?? 0, first.offset)
                let b = (order[second.element.file] ?? files.count, second.element.line ?? 0, second.element.column ?? 0, second.offset)
                return a < b
            }.map(\.element)
        }
        return ConfigFindings(problems: sorted(problems), warnings: sorted(warnings))
    }
}
