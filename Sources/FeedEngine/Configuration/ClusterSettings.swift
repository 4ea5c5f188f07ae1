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
    /// Who the instance is to the NATS servers: one way at most (`user` + `password_file`,
    /// `token_file`, `nkey_seed_file` or `creds_file`); each secret is read from its file.
    public var authentication = Authentication.none
    /// `tls_ca`: a PEM file of the certificate authorities that sign the servers' TLS certificates.
    public var trustedCertificatesFile: String?
    /// `tls_cert`: a PEM file of this instance's client certificate, for servers that verify clients.
    public var certificateFile: String?
    /// `tls_key`: the PEM file of that certificate's private key.
    public var privateKeyFile: String?
    /// `key_file`: the fleet key every record an instance writes is sealed with (see FeedCluster's FleetKey).
    public var keyFile: String?

    /// How an instance proves who it is to the NATS servers.
    public enum Authentication: Sendable, Equatable {
        case none
        /// `user` and `password_file`.
        case password(user: String, passwordFile: String)
        /// `token_file`.
        case token(file: String)
        /// `nkey_seed_file`: a user NKey seed (`SU…`).
        case nkeySeed(file: String)
        /// `creds_file` (or its old name `creds`): a user JWT and its seed (operator mode).
        case credentials(file: String)
    }

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
                // Whatever is wrong with it, a password in it is not for the log.
                var shown = URLComponents(string: bad)
                shown?.user = nil
                shown?.password = nil
                throw table.invalid("nats", "\"\(shown?.string ?? bad)\" is not a nats:// or tls:// URL with a host (such as \"nats://nats-1.internal:4222\")")
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
        read { settings.authentication = try readAuthentication(table) }
        read {
            settings.trustedCertificatesFile = try table.string("tls_ca")
            settings.certificateFile = try table.string("tls_cert")
            settings.privateKeyFile = try table.string("tls_key")
            if (settings.certificateFile == nil) != (settings.privateKeyFile == nil) {
                throw table.invalid(settings.certificateFile == nil ? "tls_key" : "tls_cert", "tls_cert and tls_key go together (a client certificate and its key)")
            }
        }
        read { settings.keyFile = try table.string("key_file") }
        for key in table.unreadKeys {
            problems.append(keys[key]!.document.problem(at: ["cluster", key], "cluster.\(key): unknown key"))
        }
        return settings
    }

    /// The one way of authenticating the table names, if any.
    private func readAuthentication(_ table: ConfigTable) throws -> ClusterSettings.Authentication {
        let user = try table.string("user")
        let passwordFile = try table.string("password_file")
        let tokenFile = try table.string("token_file")
        let seedFile = try table.string("nkey_seed_file")
        let credentials = try table.string("creds_file") ?? table.string("creds")
        if user != nil, passwordFile == nil { throw table.invalid("user", "needs password_file (the file holding its password)") }
        if passwordFile != nil, user == nil { throw table.invalid("password_file", "needs user (whose password it holds)") }
        var ways: [(key: String, way: ClusterSettings.Authentication)] = []
        if let user, let passwordFile { ways.append(("user", .password(user: user, passwordFile: passwordFile))) }
        if let tokenFile { ways.append(("token_file", .token(file: tokenFile))) }
        if let seedFile { ways.append(("nkey_seed_file", .nkeySeed(file: seedFile))) }
        let credentialsKey = try table.string("creds_file") == nil ? "creds" : "creds_file"
        if let credentials { ways.append((credentialsKey, .credentials(file: credentials))) }
        guard ways.count <= 1 else {
            throw table.invalid(ways[1].key, "only one way of authenticating may be given: \(ways.map(\.key).joined(separator: ", ")) are")
        }
        return ways.first?.way ?? .none
    }

    /// `nats://host[:port]` or `tls://host[:port]`, optionally with `user:password@`.
    static func isNATSURL(_ text: String) -> Bool {
        guard let url = URLComponents(string: text), let scheme = url.scheme?.lowercased(), scheme == "nats" || scheme == "tls",
            let host = url.host, !host.isEmpty, url.path.isEmpty || url.path == "/", url.query == nil
        else { return false }
        return url.port.map { (1...65_535).contains($0) } ?? true
    }
}
