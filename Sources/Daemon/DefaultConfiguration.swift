/// The configuration feedd runs when no config file exists (SPEC §2): it must work on a fresh
/// machine with no network, so the `sample` feed reads data shipped inside the binary. The
/// network feeds of the original apps join it as their adapters land.
enum DefaultConfiguration {
    static let name = "<embedded default config>"

    /// The config text, with the sample feed pointed at `samplePath`.
    static func text(samplePath: String) -> String {
        let quotedPath = samplePath.replacingOccurrences(of: "\\", with: "\\\\").replacingOccurrences(of: "\"", with: "\\\"")
        return """
        # feedd's embedded default configuration. Copy it to /etc/feedd/feedd.toml to change it.

        [daemon]
        prefetch = 2

        # The 118 chemical elements, ten to a page: a finite feed that works offline.
        [feeds.sample]
        source = "file"
        path = "\(quotedPath)"
        page_size = 10

        """
    }
}
