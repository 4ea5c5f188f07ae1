import FeedKit
import Foundation

/// The `[cluster]` table (SPEC §8): the NATS JetStream cluster a fleet of instances shares
/// its shared feeds through. Absent, the daemon runs alone.
public struct ClusterSettings: Sendable, Equatable {
    /// `nats://` or `tls://` URLs of any servers of the cluster; never empty.
    public var servers: [String]
    /// Instances with the same name share their shared feeds; it names NATS subjects and buckets.
    public var name = "feedd"
    /// JetStream replicas of feedd's streams and buckets.
    public var replicas = 1
    /// How long a fetching instance holds a page before another may take it over.
    public var lease: Duration = .seconds(10)
    /// A NATS credentials file.
    public var credentialsFile: String?
    /// A PEM file of the certificate authorities that sign the servers' TLS certificates.
    public var trustedCertificatesFile: String?

    public init(servers: [String]) {
        self.servers = servers
    }
}

extension ConfigurationLoader {
    /// Reads the merged `[cluster]` keys; nil when there is no `[cluster]` table.
    func readClusterSettings(
        _ merged: (document: TOMLDocument, keys: [String: (document: TOMLDocument, value: JSONValue)])?, problems: inout [ConfigProblem]
    ) -> ClusterSettings? {
        guard let (tableDocument, keys) = merged else { return nil }
        let table = ConfigTable(name: "cluster", values: keys.mapValues(\.value))
        var settings = ClusterSettings(servers: [])
        func read(_ body: () throws -> Void) {
            do {
                try body()
            } catch {
                guard let error = error as? OptionError else { return }
                let document = keys[error.key]?.document ?? tableDocument
                problems.append(document.problem(at: ["cluster", error.key], error.description))
            }
        }
        read {
            guard let servers = try table.stringArray("nats") else { throw table.missing("nats") }
            guard !servers.isEmpty else { throw table.invalid("nats", "needs at least one server URL") }
            if let bad = servers.first(where: { !Self.isNATSURL($0) }) {
                throw table.invalid("nats", "\"\(bad)\" is not a nats:// or tls:// URL with a host (such as \"nats://nats-1.internal:4222\")")
            }
            settings.servers = servers
        }
        read {
            guard let name = try table.string("name") else { return }
            // The name becomes a NATS subject token and part of stream and bucket names.
            guard FeedName.isValid(name) else { throw table.invalid("name", "\"\(name)\" must match [a-z0-9][a-z0-9_-]{0,63}") }
            settings.name = name
        }
        read { settings.replicas = try table.integer("replicas", in: 1...5) ?? settings.replicas }
        read {
            guard let lease = try table.duration("lease") else { return }
            guard lease > .zero else { throw table.invalid("lease", "must be longer than zero") }
            settings.lease = lease
        }
        read { settings.credentialsFile = try table.string("creds") }
        read { settings.trustedCertificatesFile = try table.string("tls_ca") }
        for key in table.unreadKeys {
            problems.append(keys[key]!.document.problem(at: ["cluster", key], "cluster.\(key): unknown key"))
        }
        return settings
    }

    /// `nats://host[:port]` or `tls://host[:port]`, optionally with `user:password@`.
    static func isNATSURL(_ text: String) -> Bool {
        guard let url = URLComponents(string: text), let scheme = url.scheme?.lowercased(), scheme == "nats" || scheme == "tls",
            let host = url.host, !host.isEmpty, url.path.isEmpty || url.path == "/", url.query == nil
        else { return false }
        return url.port.map { (1...65_535).contains($0) } ?? true
    }
}
