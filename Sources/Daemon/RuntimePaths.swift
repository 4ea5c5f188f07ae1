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

    /// Consumer state: `state_dir`, else `$STATE_DIRECTORY` (systemd's StateDirectory=), else
    /// `./.feedd-state`, made absolute against the working directory.
    func stateDirectory(configured: String?) -> String {
        let directory = configured ?? firstDirectory(in: "STATE_DIRECTORY") ?? ".feedd-state"
        return directory.hasPrefix("/") ? directory : FileManager.default.currentDirectoryPath + "/" + directory
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
