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
        ConfigKey("user", .string, .unset, "NATS user name; needs password_file (at most one way of authenticating)"),
        ConfigKey("password_file", .path(.file), .unset, "a file holding that user's password; needs user"),
        ConfigKey("token_file", .path(.file), .unset, "a file holding a NATS token"),
        ConfigKey("nkey_seed_file", .path(.file), .unset, "a file holding a user NKey seed (SU…); the public key is derived from it"),
        ConfigKey("creds_file", .path(.file), .unset, "a NATS credentials file, JWT and seed (operator mode)"),
        ConfigKey("creds", .path(.file), .unset, "the old name of creds_file"),
        ConfigKey("tls_ca", .path(.file), .unset, "the certificate authorities that sign the servers' TLS certificates"),
        ConfigKey("tls_cert", .path(.file), .unset, "a PEM client certificate for mutual TLS; needs tls_key"),
        ConfigKey("tls_key", .path(.file), .unset, "the PEM private key of tls_cert; needs tls_cert"),
        ConfigKey("key_file", .path(.file), .unset, "the fleet key: one or two lines of 64 hex digits; the first seals every record, both verify"),
    ]
}
