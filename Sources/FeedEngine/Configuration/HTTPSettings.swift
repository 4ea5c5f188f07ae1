import FeedKit
import Foundation

/// The `[http]` table (SPEC §11): the HTTP front. Absent, or without `listen` (and without a
/// listener passed by systemd), the daemon serves no HTTP.
public struct HTTPSettings: Sendable, Equatable {
    /// Where to listen: `host:port` (`[::1]:8080` for IPv6; port 0 takes any free port, which the
    /// log names) or an absolute Unix socket path.
    public var listen: [HTTPListenAddress] = []
    /// `tokens_dir`: where the `FEED.token` files are.
    public var tokensDirectory: String?
    /// The bearer tokens of `tokens_dir`, read when the configuration is loaded (at start and on
    /// every reload): `FEED.token` by feed name, and `_metrics.token` as ``metricsTokenName``.
    public var tokens: [String: SecretText] = [:]
    /// Origins whose pages may call the API from a browser; `"*"` is any origin.
    public var corsOrigins: [String] = []
    /// `tls_cert` and `tls_key`: PEM files, both or neither.
    public var tlsCertificateFile: String?
    public var tlsKeyFile: String?
    /// The PEM text of `tls_cert` and `tls_key`, read with the configuration.
    public var tlsCertificate: String?
    public var tlsKey: SecretText?
    /// HTTP connections at once; nil for `daemon.max_clients`.
    public var maxClients: Int?
    /// How long a client's reading of a feed over HTTP (where its next page is kept prefetched,
    /// and, for a consumer, what its last answer gave it) is kept between requests.
    public var readingLinger: Duration = .seconds(60)

    /// The token file name (without `.token`) that guards `GET /metrics`; no feed has this name.
    public static let metricsTokenName = "_metrics"

    /// No listener, no token, no origin: what an `[http]` table without keys says.
    public init() {}

    /// Whether TLS is configured (`tls_cert` and `tls_key` come together).
    public var usesTLS: Bool { tlsCertificate != nil }
}

/// Where the HTTP front listens.
public enum HTTPListenAddress: Sendable, Hashable, CustomStringConvertible {
    /// A TCP address: a host name or an IP address (IPv6 without its brackets), and a port.
    case tcp(host: String, port: UInt16)
    /// A Unix stream socket at this absolute path.
    case unix(path: String)

    /// `host:port`, `[v6-address]:port`, or an absolute path; nil for anything else.
    public init?(_ text: String) {
        if text.hasPrefix("/") {
            // sockaddr_un's sun_path holds the path and its terminating NUL.
            guard text.utf8.count < MemoryLayout.size(ofValue: sockaddr_un().sun_path) else { return nil }
            self = .unix(path: text)
            return
        }
        guard let colon = text.lastIndex(of: ":"), let port = UInt16(text[text.index(after: colon)...]) else { return nil }
        var host = String(text[..<colon])
        if host.hasPrefix("["), host.hasSuffix("]") {
            host = String(host.dropFirst().dropLast())
        } else if host.contains(":") {
            return nil
        }
        guard !host.isEmpty, !host.contains(where: { $0 == "/" || $0 == "[" || $0 == "]" || $0.isWhitespace }) else { return nil }
        self = .tcp(host: host, port: port)
    }

    public var description: String {
        switch self {
        case .tcp(let host, let port): host.contains(":") ? "[\(host)]:\(port)" : "\(host):\(port)"
        case .unix(let path): path
        }
    }
}

/// A secret read from a file (a bearer token, a TLS key): its bytes, which no description,
/// log line or error message ever shows.
public struct SecretText: Sendable, Equatable, CustomStringConvertible, CustomDebugStringConvertible {
    /// The secret itself; hand it only to what uses it (a digest, libmicrohttpd's TLS).
    public let bytes: [UInt8]

    public init(_ bytes: [UInt8]) {
        self.bytes = bytes
    }

    public var description: String { "<secret>" }
    public var debugDescription: String { "<secret>" }
}

/// The `[http]` table: each key, documented where it is read.
enum HTTPTable {
    static let keys: [SettingKey<HTTPSettings>] = [
        SettingKey(
            "listen", .stringArray, .value("[]"),
            "host:port ([v6]:port; port 0 takes any free port) or an absolute Unix socket path; empty: no HTTP front"
        ) { table, settings throws(OptionError) in
            let addresses = try table.stringArray("listen") ?? []
            settings.listen = try addresses.map { text throws(OptionError) in
                guard let address = HTTPListenAddress(text) else {
                    throw table.invalid(
                        "listen", "\"\(text)\" is neither host:port (such as \"127.0.0.1:8080\" or \"[::1]:8080\") nor an absolute socket path")
                }
                return address
            }
        },
        SettingKey(
            "tokens_dir", .path(.directory), .unset,
            "FEED.token files (and _metrics.token): such a feed needs Authorization: Bearer; read at start and on reload"
        ) { table, settings throws(OptionError) in
            guard let directory = try table.string("tokens_dir") else { return }
            settings.tokensDirectory = directory
            settings.tokens = try HTTPTable.readTokens(in: directory, table: table)
        },
        SettingKey("cors_origins", .stringArray, .value("[]"), "origins allowed to call the API from a browser; \"*\" is any") {
            table, settings throws(OptionError) in
            let origins = try table.stringArray("cors_origins") ?? []
            if let bad = origins.first(where: { !HTTPTable.isOrigin($0) }) {
                throw table.invalid(
                    "cors_origins", "\"\(bad)\" is not an origin such as \"https://app.example.com\" (scheme, host and port only) or \"*\"")
            }
            settings.corsOrigins = origins
        },
        SettingKey("max_clients", .integer, .described("daemon.max_clients"), "HTTP connections at once; one more is answered 429") {
            table, settings throws(OptionError) in
            settings.maxClients = try table.integer("max_clients", in: 1...1_000_000)
        },
        SettingKey("reading_linger", .duration, .value("\"60s\""), "how long a client's reading of a feed is kept between its requests") {
            table, settings throws(OptionError) in
            settings.readingLinger = try table.positiveDuration("reading_linger") ?? settings.readingLinger
        },
        SettingKey("tls_cert", .path(.file), .unset, "a PEM certificate (with tls_key): HTTPS on every listener") {
            table, settings throws(OptionError) in
            settings.tlsCertificateFile = try table.string("tls_cert")
        },
        // Read after tls_cert: the pair is checked here, and both files read.
        SettingKey("tls_key", .path(.file), .unset, "the PEM private key of tls_cert") { table, settings throws(OptionError) in
            settings.tlsKeyFile = try table.string("tls_key")
            try HTTPTable.readTLSFiles(into: &settings, table: table)
        },
    ]

    /// `NAME.token` for every feed name (and `_metrics`) in `directory`; other files are left alone.
    fileprivate static func readTokens(in directory: String, table: ConfigTable) throws(OptionError) -> [String: SecretText] {
        let names: [String]
        do {
            names = try FileManager.default.contentsOfDirectory(atPath: directory)
        } catch {
            throw table.invalid("tokens_dir", "cannot list \(directory): \((error as NSError).localizedFailureReason ?? error.localizedDescription)")
        }
        var tokens: [String: SecretText] = [:]
        for name in names where name.hasSuffix(".token") {
            let feed = String(name.dropLast(".token".count))
            guard FeedName.isValid(feed) || feed == HTTPSettings.metricsTokenName else { continue }
            let path = "\(directory)/\(name)"
            let text: String
            do {
                text = try ConfigFileReader.read(path)
            } catch {
                throw table.invalid("tokens_dir", error.problems.map(\.description).joined(separator: "; "))
            }
            // What `echo TOKEN > FILE` writes: the token and a newline.
            let token = text.trimmingCharacters(in: .whitespacesAndNewlines)
            guard !token.isEmpty else { throw table.invalid("tokens_dir", "\(path) is empty") }
            guard token.utf8.allSatisfy(isTokenByte) else {
                throw table.invalid("tokens_dir", "\(path): a bearer token may hold only letters, digits and -._~+/= (RFC 6750)")
            }
            tokens[feed] = SecretText(Array(token.utf8))
        }
        return tokens
    }

    /// The characters of RFC 6750's `b64token`.
    private static func isTokenByte(_ byte: UInt8) -> Bool {
        switch byte {
        case UInt8(ascii: "a")...UInt8(ascii: "z"), UInt8(ascii: "A")...UInt8(ascii: "Z"), UInt8(ascii: "0")...UInt8(ascii: "9"): true
        case UInt8(ascii: "-"), UInt8(ascii: "."), UInt8(ascii: "_"), UInt8(ascii: "~"), UInt8(ascii: "+"), UInt8(ascii: "/"), UInt8(ascii: "="): true
        default: false
        }
    }

    /// `tls_cert` and `tls_key` come together; both are read now, so a missing or unreadable one
    /// is a configuration problem rather than a failure at start.
    fileprivate static func readTLSFiles(into settings: inout HTTPSettings, table: ConfigTable) throws(OptionError) {
        switch (settings.tlsCertificateFile, settings.tlsKeyFile) {
        case (nil, nil):
            return
        case (nil, _):
            throw table.invalid("tls_key", "needs tls_cert too")
        case (_, nil):
            throw table.invalid("tls_cert", "needs tls_key too")
        case (let certificateFile?, let keyFile?):
            func pem(_ key: String, _ path: String, marker: String) throws(OptionError) -> String {
                let text: String
                do {
                    text = try ConfigFileReader.read(path)
                } catch {
                    throw table.invalid(key, error.problems.map(\.description).joined(separator: "; "))
                }
                guard text.contains("-----BEGIN "), text.contains(marker) else { throw table.invalid(key, "\(path) is not a PEM file (no \(marker))") }
                return text
            }
            settings.tlsCertificate = try pem("tls_cert", certificateFile, marker: "CERTIFICATE-----")
            settings.tlsKey = SecretText(Array(try pem("tls_key", keyFile, marker: "PRIVATE KEY-----").utf8))
        }
    }

    /// `"*"`, or `scheme://host[:port]` as a browser sends it in `Origin`.
    static func isOrigin(_ text: String) -> Bool {
        if text == "*" { return true }
        guard let url = URLComponents(string: text), let scheme = url.scheme, ["http", "https"].contains(scheme),
            let host = url.host, !host.isEmpty, url.path.isEmpty, url.query == nil, url.fragment == nil, url.user == nil
        else { return false }
        return url.port.map { (1...65_535).contains($0) } ?? true
    }
}
