import Foundation

/// Where feedd looks for its config and puts its socket when nothing says otherwise (SPEC §2).
struct RuntimePaths {
    let environment: [String: String]

    static let systemConfigFile = "/etc/feedd/feedd.toml"

    /// The config file to read: `--config`, `$FEEDD_CONFIG`, `/etc/feedd/feedd.toml`; nil means
    /// the embedded default config.
    func configFile(explicit: String?) -> String? {
        if let explicit { return explicit }
        if let fromEnvironment = environment["FEEDD_CONFIG"], !fromEnvironment.isEmpty { return fromEnvironment }
        return FileManager.default.fileExists(atPath: Self.systemConfigFile) ? Self.systemConfigFile : nil
    }

    /// `$RUNTIME_DIRECTORY` (systemd's RuntimeDirectory=), `$XDG_RUNTIME_DIR`, or `/tmp/feedd-$UID`:
    /// the home of the default socket and of the embedded sample data.
    var runtimeDirectory: String {
        for name in ["RUNTIME_DIRECTORY", "XDG_RUNTIME_DIR"] {
            // systemd lists several directories separated by colons when a unit asks for several.
            if let value = environment[name]?.split(separator: ":").first, !value.isEmpty { return String(value) }
        }
        return "/tmp/feedd-\(getuid())"
    }

    func socketPath(explicit: String?, configured: String?) -> String {
        explicit ?? configured ?? "\(runtimeDirectory)/feedd.sock"
    }
}
