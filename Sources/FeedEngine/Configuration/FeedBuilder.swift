import FeedKit

/// Builds one `[feeds.NAME]` table into a feed ready to run: its common keys into
/// ``FeedSettings`` (``FeedTable``), every other key into the adapter its source names.
///
/// Every problem of the table is found at once: a wrong common key does not keep the adapter's
/// keys from being checked, and an adapter that refuses one key (an `init` throws at its first
/// ``OptionError``) is built again without it, or with its documented example where it is
/// required, to hear about the next, until it accepts the rest or refuses a key twice.
struct FeedBuilder {
    let registry: AdapterRegistry
    let logger: Logger
    let transport: any HTTPTransport
    let feedReader: (any FeedReader)?

    /// The feed, or nil after adding to `findings` why it cannot be built.
    func build(
        _ name: String, table values: [String: JSONValue], in document: TOMLDocument, defaultPrefetch: Int, stateRoot: String?,
        findings: inout ConfigFindings
    ) -> FeedDefinition? {
        let problemCount = findings.problems.count
        func report(_ key: String?, _ message: String) {
            findings.problems.append(document.problem(at: ["feeds", name] + (key.map { [$0] } ?? []), message))
        }
        let common = ConfigTable(feed: name, values: values.filter { FeedTable.names.contains($0.key) }, declared: FeedTable.keys.declarations())
        var settings = FeedSettings(name: name, source: "", prefetch: defaultPrefetch)
        FeedTable.keys.read(from: common, into: &settings) { report($0.key, $0.description) }
        settings.options = values.filter { !FeedTable.names.contains($0.key) }
        guard !settings.source.isEmpty else { return nil }
        guard let adapterType = registry[settings.source] else {
            let suggestion = SpellingSuggestion.didYouMean(settings.source, among: registry.sourceNames)
            let known = registry.sourceNames.joined(separator: ", ")
            report("source", "feeds.\(name).source: unknown source \"\(settings.source)\"\(suggestion) (known: \(known))")
            return nil
        }
        let declared = adapterType.configKeys.isEmpty ? nil : adapterType.configKeys
        let context = AdapterContext(
            feed: name, requestTimeout: settings.timeout, pollInterval: settings.poll, logger: logger.forFeed(name),
            transport: transport, stateDirectory: stateRoot.map { "\($0)/\(name)" }, feeds: feedReader)
        let built = buildAdapter(adapterType, values: settings.options, declared: declared, context: context, report: report)
        // Declared keys are known without building the adapter; undeclared ones by what it read.
        let options = declared.map { AdapterOptions(feed: name, values: settings.options, declared: $0) } ?? built?.options
        for (key, message) in options?.unknownKeyMessages(known: FeedTable.keys.declarations() + (declared ?? []), saying: "unknown key for source \"\(settings.source)\"") ?? [] {
            report(key, message)
        }
        guard findings.problems.count == problemCount, let built else { return nil }
        findings.warnings += PathWarnings.check(values, declared: FeedTable.keys.declarations() + (declared ?? []), table: "feeds.\(name)") {
            document.problem(at: ["feeds", name, $0], $1)
        }
        let values = settings.options
        let written = document.problem(at: ["feeds", name], "")
        return FeedDefinition(
            settings: settings, adapter: built.adapter,
            makeAdapter: { try adapterType.init(options: AdapterOptions(feed: name, values: values, declared: declared), context: context) },
            location: ConfigLocation(file: written.file, line: written.line, column: written.column))
    }

    /// The adapter and the options it was built from, or nil once it refused a key twice or
    /// failed other than over a key.
    private func buildAdapter(
        _ type: any SourceAdapter.Type, values: [String: JSONValue], declared: [ConfigKey]?, context: AdapterContext,
        report: (String?, String) -> Void
    ) -> (adapter: any SourceAdapter, options: AdapterOptions)? {
        var values = values
        var refused: Set<String> = []
        while true {
            let options = AdapterOptions(feed: context.feed, values: values, declared: declared)
            do {
                return (try type.init(options: options, context: context), options)
            } catch let error as OptionError {
                guard refused.insert(error.key).inserted else { return nil }
                report(error.key, error.description)
                values[error.key] = Self.standIn(for: error.key, declared: declared)
            } catch {
                report(nil, "feeds.\(context.feed): \(error)")
                return nil
            }
        }
    }

    /// What replaces a refused value to go on checking: a required key's documented example, else nothing.
    private static func standIn(for key: String, declared: [ConfigKey]?) -> JSONValue? {
        guard case .required(let example)? = declared?.first(where: { $0.name == key })?.defaultValue else { return nil }
        return TOMLDocument.value(parsing: example)
    }
}
