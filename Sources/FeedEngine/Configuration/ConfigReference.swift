import FeedKit

/// Every key of the configuration, table by table, as declared where it is read: what
/// `feedd config-keys` prints and `feedd.toml(5)` is built from.
public struct ConfigReference: Sendable {
    /// One table, or one source's keys of a feed table.
    public struct Section: Sendable {
        /// `daemon`, `feeds`, `cluster`, or a source name.
        public let name: String
        /// How the config writes it: `[daemon]`, `[feeds.NAME]`, `source = "file"`.
        public let heading: String
        public let keys: [ConfigKey]
    }

    public let sections: [Section]

    /// The reference for a daemon with these adapters.
    public init(registry: AdapterRegistry) {
        var sections = [
            Section(name: "daemon", heading: "[daemon]", keys: DaemonTable.keys.declarations()),
            Section(name: "feeds", heading: "[feeds.NAME]", keys: FeedTable.keys.declarations()),
        ]
        for (source, type) in registry.adapterTypes {
            sections.append(Section(name: source, heading: "source = \"\(source)\"", keys: type.configKeys))
        }
        sections.append(Section(name: "cluster", heading: "[cluster]", keys: ClusterKeys.keys))
        sections.append(Section(name: "http", heading: "[http]", keys: HTTPTable.keys.declarations()))
        self.sections = sections
    }
}
