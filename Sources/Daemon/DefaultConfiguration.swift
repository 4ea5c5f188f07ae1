/// The configuration feedd runs when no config file exists (SPEC §2): it must work on a fresh
/// machine with no network, so the `sample` feed reads data shipped inside the binary; the
/// network feeds of the original apps beside it simply retry while the network is unreachable
/// (and fetch nothing while nobody reads them).
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

        # The original app's RandomUser section: twenty users a page, forever.
        [feeds.users]
        source = "randomuser"
        url = "https://randomuser.me/api/"
        results = 20

        # The original app's paged feed on S3, checked for new pages every minute.
        [feeds.donny]
        source = "s3"
        url = "https://s3.eu-west-2.amazonaws.com/com.donnywals.misc/feed-{page}.json"
        poll = "60s"

        # Everything above as one feed, a page's items taken from each member in turn. Offline, a
        # member that cannot be reached is left out of a page after 1 s (half of `timeout`) and
        # its items come later: the elements still come.
        [feeds.everything]
        source = "merge"
        feeds = ["sample", "users", "donny"]
        order = "round_robin"
        timeout = "2s"

        """
    }
}
