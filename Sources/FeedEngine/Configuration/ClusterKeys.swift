import FeedKit

/// The keys of the `[cluster]` table, which ``ConfigurationLoader/readClusterSettings(_:problems:)``
/// reads. The loader reports any other key, with the closest of these, before that reading.
enum ClusterKeys {
    static let keys = [
        ConfigKey(
            "nats", .stringArray, .required(example: #"["nats://nats-1.internal:4222", "nats://nats-2.internal:4222"]"#),
            "URLs of any servers of the NATS JetStream cluster, nats:// or tls://"),
        ConfigKey("name", .string, .value("\"feedd\""), "instances with the same name share their shared feeds"),
        ConfigKey("replicas", .integer, .value("1"), "JetStream replicas of feedd's streams and buckets (3 on a real cluster)"),
        ConfigKey("lease", .duration, .value("\"10s\""), "how long a fetching instance holds a page before another may take it over"),
        ConfigKey("creds", .path(.file), .unset, "a NATS credentials file (JWT and nkey)"),
        ConfigKey("tls_ca", .path(.file), .unset, "the certificate authorities that sign the servers' TLS certificates"),
    ]
}
