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
        firstDirectory(in: "RUNTIME_DIRECTORY") ?? firstDirectory(in: "XDG_RUNTIME_DIR") ?? "/tmp/feedd-\(getuid())"
    }

    /// Durable state (SPEC §3): `state_dir`, else `$STATE_DIRECTORY` (systemd's StateDirectory=),
    /// else `/var/lib/feedd` for root, else `$XDG_STATE_HOME/feedd` or `~/.local/state/feedd`.
    /// Never a directory relative to wherever the daemon happened to be started: two daemons
    /// started from different places would each keep their own cursors. A relative `state_dir`
    /// is taken against the working directory.
    func stateDirectory(configured: String?) -> String {
        if let configured {
            return configured.hasPrefix("/") ? configured : FileManager.default.currentDirectoryPath + "/" + configured
        }
        if let systemd = firstDirectory(in: "STATE_DIRECTORY") { return systemd }
        if getuid() == 0 { return "/var/lib/feedd" }
        if let xdg = environment["XDG_STATE_HOME"], xdg.hasPrefix("/") { return "\(xdg)/feedd" }
        return "\(homeDirectory)/.local/state/feedd"
    }

    /// `$HOME`, else the home directory of the user in the password database.
    private var homeDirectory: String {
        if let home = environment["HOME"], home.hasPrefix("/") { return home }
        if let entry = getpwuid(getuid()), let directory = entry.pointee.pw_dir { return String(cString: directory) }
        return "/tmp/feedd-\(getuid())"
    }

    /// The first directory an environment variable names; systemd separates several with colons.
    private func firstDirectory(in variable: String) -> String? {
        guard let first = environment[variable]?.split(separator: ":").first, !first.isEmpty else { return nil }
        return String(first)
    }

    func socketPath(explicit: String?, configured: String?) -> String {
        explicit ?? configured ?? "\(runtimeDirectory)/feedd.sock"
    }
}
