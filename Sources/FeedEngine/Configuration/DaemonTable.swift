import FeedKit
import Glibc

/// The `[daemon]` table: each key, documented where it is read.
enum DaemonTable {
    static let keys: [SettingKey<DaemonSettings>] = [
        SettingKey(
            "socket", .path(.fileToWrite), .described("$RUNTIME_DIRECTORY/feedd.sock, see feedd(8)"),
            "the socket feedd binds when systemd passes none; its directory must exist"
        ) { table, settings throws(OptionError) in
            guard let path = try table.string("socket") else { return }
            // sockaddr_un's sun_path holds the path and its terminating NUL.
            let limit = MemoryLayout.size(ofValue: sockaddr_un().sun_path) - 1
            guard (1...limit).contains(path.utf8.count) else {
                throw table.invalid("socket", "a Unix socket path must be 1 to \(limit) bytes long, this one is \(path.utf8.count)")
            }
            settings.socketPath = path
        },
        SettingKey(
            "state_dir", .path(.directory), .described("$STATE_DIRECTORY, else /var/lib/feedd for root, else $XDG_STATE_HOME/feedd"),
            "where consumer cursors, generations and stored pages are kept; locked by one daemon"
        ) { table, settings throws(OptionError) in
            settings.stateDirectory = try table.string("state_dir")
        },
        SettingKey(
            "state_page_bytes", .size, .value("\"16MiB\""),
            "per feed, the pages kept on disk for a source that cannot fetch a page again; 0 keeps none"
        ) { table, settings throws(OptionError) in
            settings.statePageBytes = try table.byteSize("state_page_bytes", in: 0...(1 << 40)) ?? settings.statePageBytes
        },
        SettingKey("prefetch", .integer, .value("2"), "pages kept fetched past each subscriber's position, for feeds that do not say") {
            table, settings throws(OptionError) in
            settings.prefetch = try table.integer("prefetch", in: 0...1_000) ?? settings.prefetch
        },
        SettingKey("max_clients", .integer, .value("10000"), "connections at once; one more is told too_many_clients") {
            table, settings throws(OptionError) in
            settings.maxClients = try table.integer("max_clients", in: 1...1_000_000) ?? settings.maxClients
        },
        SettingKey("max_line_bytes", .integer, .value("65536"), "the longest request line") { table, settings throws(OptionError) in
            settings.maxLineBytes = try table.integer("max_line_bytes", in: 64...16_777_216) ?? settings.maxLineBytes
        },
        SettingKey("max_subscriptions", .integer, .value("256"), "subscriptions one connection may hold") { table, settings throws(OptionError) in
            settings.maxSubscriptions = try table.integer("max_subscriptions", in: 1...100_000) ?? settings.maxSubscriptions
        },
        SettingKey("stall_timeout", .duration, .value("\"60s\""), "a client that reads nothing this long is disconnected") {
            table, settings throws(OptionError) in
            settings.stallTimeout = try table.positiveDuration("stall_timeout") ?? settings.stallTimeout
        },
        SettingKey("socket_mode", .string, .value("\"0660\""), "permissions of a socket feedd binds itself, in octal") {
            table, settings throws(OptionError) in
            guard let mode = try table.string("socket_mode") else { return }
            guard let parsed = mode_t(mode, radix: 8), parsed <= 0o777 else {
                throw table.invalid("socket_mode", "expected an octal mode such as \"0660\", got \"\(mode)\"")
            }
            settings.socketMode = parsed
        },
        SettingKey("socket_group", .string, .unset, "the group of a socket feedd binds itself") { table, settings throws(OptionError) in
            guard let name = try table.string("socket_group") else { return }
            guard UserDatabase.groupEntry(named: name) != nil else { throw table.invalid("socket_group", "no group named \"\(name)\" on this host") }
            settings.socketGroup = name
        },
        SettingKey(
            "allow_uids", .described("array of uids or user names"), .value("[]"),
            "only these peers may connect (or members of allow_groups); both empty: anyone who can open the socket"
        ) { table, settings throws(OptionError) in
            settings.allowUIDs = try PeerAccessLists.users(table)
        },
        SettingKey("allow_groups", .described("array of gids or group names"), .value("[]"), "or members of these groups (see allow_uids)") {
            table, settings throws(OptionError) in
            let groups = try PeerAccessLists.groups(table)
            settings.allowGIDs = groups.gids
            settings.allowGroupMemberUIDs = groups.memberUIDs
        },
        SettingKey("log_level", .oneOf(LogLevel.allCases.sorted(by: >).map(\.name)), .value("\"info\""), "records this important and more are logged") {
            table, settings throws(OptionError) in
            guard let name = try table.string("log_level") else { return }
            guard let level = LogLevel(name: name) else {
                let names = LogLevel.allCases.sorted(by: >).map(\.name)
                throw table.invalid(
                    "log_level", "\"\(name)\" is not a log level (\(names.joined(separator: ", ")))\(SpellingSuggestion.didYouMean(name, among: names))")
            }
            settings.logLevel = level
        },
        SettingKey(
            "metrics_file", .path(.fileToWrite), .unset, "a file the OpenMetrics text is written to every 15 s, for node_exporter"
        ) { table, settings throws(OptionError) in
            settings.metricsFile = try table.string("metrics_file")
        },
        SettingKey(
            "metrics_consumers", .boolean, .value("false"),
            "the metrics give feedd_consumer_lag_pages for every consumer (one series each); per-feed lag figures come always"
        ) { table, settings throws(OptionError) in
            settings.metricsConsumers = try table.bool("metrics_consumers") ?? settings.metricsConsumers
        },
    ]
}
