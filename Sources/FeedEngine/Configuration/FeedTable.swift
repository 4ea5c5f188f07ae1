import FeedKit

/// The keys every `[feeds.NAME]` table has, whatever its source; the rest are the adapter's.
enum FeedTable {
    static let keys: [SettingKey<FeedSettings>] = [
        SettingKey("source", .string, .required(example: "\"file\""), "the adapter that fetches the pages: one of the sources below") {
            table, settings throws(OptionError) in
            settings.source = try table.requiredString("source")
        },
        SettingKey("prefetch", .integer, .described("daemon.prefetch"), "pages kept fetched past each subscriber's position") {
            table, settings throws(OptionError) in
            settings.prefetch = try table.integer("prefetch", in: 0...1_000) ?? settings.prefetch
        },
        SettingKey("wrap", .boolean, .value("false"), "a finite feed starts over at its first page; page numbers keep counting") {
            table, settings throws(OptionError) in
            settings.wrap = try table.bool("wrap") ?? settings.wrap
        },
        SettingKey("poll", .duration, .unset, "look for new data past the end this often (a followed file: 1s)") {
            table, settings throws(OptionError) in
            settings.poll = try table.positiveDuration("poll")
        },
        SettingKey("timeout", .duration, .value("\"10s\""), "how long one upstream request may take") { table, settings throws(OptionError) in
            settings.timeout = try table.positiveDuration("timeout") ?? settings.timeout
        },
        SettingKey("retry_max_delay", .duration, .value("\"60s\""), "the longest backoff between retries (Retry-After may ask for more)") {
            table, settings throws(OptionError) in
            settings.retryMaxDelay = try table.positiveDuration("retry_max_delay") ?? settings.retryMaxDelay
        },
        SettingKey("cache_pages", .integer, .value("256"), "pages kept in memory") { table, settings throws(OptionError) in
            settings.cachePages = try table.integer("cache_pages", in: 1...1_000_000) ?? settings.cachePages
        },
        SettingKey("cache_bytes", .size, .value("\"64MiB\""), "the memory those pages may take, counted as feedd holds them") {
            table, settings throws(OptionError) in
            settings.cacheBytes = try table.byteSize("cache_bytes", in: 64 << 10...(1 << 40)) ?? settings.cacheBytes
        },
        SettingKey("max_consumers", .integer, .value("10000"), "durable consumers the feed keeps; one more is told too_many_consumers") {
            table, settings throws(OptionError) in
            settings.maxConsumers = try table.integer("max_consumers", in: 1...10_000_000) ?? settings.maxConsumers
        },
        SettingKey(
            "shared", .boolean, .described("true, except for a file feed"), "share the feed with the fleet of [cluster]"
        ) { table, settings throws(OptionError) in
            // A file is on one host's disk, so it is not shared unless asked for (SPEC §8).
            settings.shared = try table.bool("shared") ?? (settings.source != "file")
        },
    ]

    /// The names of the common keys, which the adapter never sees.
    static let names = Set(keys.map(\.declaration.name))
}
