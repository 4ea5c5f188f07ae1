import FeedKit

/// The `merge` adapter: one feed interleaving other feeds of the same config (SPEC §9).
///
/// Members are read through ``AdapterContext/feeds``, like any subscriber reads them, as far as
/// the merged feed's own readers have come; while the merged feed waits for new data, its members
/// are followed, so a live member's new items reach it as soon as the member has them. Items are the members' items gathered: id
/// `MEMBER:ID`, `feed` naming the member. Orders:
/// - `round_robin` (the default): one item of each member in turn, in `feeds` order;
/// - `concat`: all of one member, then the next;
/// - `newest`: a k-way merge of members each ordered newest first, by `field`, a dot path in the
///   item's data whose value is an RFC 3339 time (compared as seconds since the epoch) or a
///   number. An item without it (or with anything else there) is taken as soon as it comes up
///   in its member, ahead of dated items, so it never holds back its member's later items.
///
/// A member that has nothing yet (a live feed at its newest page) or is failing is left out of
/// the page being built, keeping its position, so its items come on a later page, none lost and
/// none twice: whatever order is chosen, one member's outage never stalls the others (a member
/// known to be failing answers at once, so it costs a page no wait). A failing
/// member is logged once per page; only when every member still going fails does the fetch fail.
/// A member's new generation fails the fetch too, and the engine then starts a new generation
/// of the merged feed. The merged feed ends when every member has ended.
///
/// Options: `feeds` (required: member feed names, not empty, no repeats, not this feed),
/// `order`, `field` (required for `newest`, only for it), `page_size` (default 20).
public struct MergeSource: SourceAdapter {
    public static let sourceName = "merge"
    public static let configKeys = [
        ConfigKey("feeds", .stringArray, .required(example: #"["users", "news"]"#), "the member feeds, in order: not empty, no repeats, not this feed"),
        ConfigKey("order", .oneOf(["round_robin", "concat", "newest"]), .value("\"round_robin\""), "how members' items are interleaved"),
        ConfigKey("field", .string, .unset, "for order = \"newest\" (and only for it, where it is required): dot path to an RFC 3339 time or a number"),
        ConfigKey("page_size", .integer, .value("20"), "items per page"),
    ]

    /// How members' items are interleaved.
    enum Order: Sendable, Hashable {
        case roundRobin
        case concat
        case newest(DotPath)
    }

    let feed: String
    let members: [String]
    let order: Order
    let pageSize: Int
    let reader: (any FeedReader)?
    let requestTimeout: Duration
    let logger: Logger

    public init(options: AdapterOptions, context: AdapterContext) throws {
        feed = context.feed
        members = try Self.members(options, feed: context.feed)
        order = try Self.order(options)
        pageSize = try options.integer("page_size", in: 1...100_000) ?? 20
        reader = context.feeds
        requestTimeout = context.requestTimeout
        logger = context.logger
    }

    public var memberFeeds: [String] { members }

    public func fetch(_ request: PageRequest) async throws -> FetchResult {
        guard let reader else { throw SourceError.rejected("feed \(feed): merge has no other feeds to read here") }
        let token = try MergeToken(request.token, feed: feed)
        // Half the timeout per read, and reads stop at three quarters of it, so the fetch answers
        // with what it has before the engine gives up on it.
        var reads = MemberReads(
            feed: feed, members: members, token: token, reader: reader, readTimeout: requestTimeout / 2,
            deadline: .now + requestTimeout * 3 / 4)
        var turn = token.turn % members.count
        if order != .concat { try await reads.readAllAtOnce() }
        var items: [Item] = []
        var keys = SortKeys()
        while items.count < pageSize, let (index, item) = try await next(from: &reads, turn: turn, keys: &keys) {
            items.append(item)
            reads.take(index)
            turn = (index + 1) % members.count
        }
        return try result(items, reads: reads, turn: turn)
    }

    /// Returns once a member the page after `request` would read may have news (its next page is
    /// ready, it ended, recovered or started a new generation), or after `pollInterval`: the
    /// members are followed meanwhile, so their own `poll` applies, and a new member item reaches
    /// the merged feed as soon as the member has it.
    public func waitForNewData(after request: PageRequest, pollInterval: Duration) async throws {
        guard let reader else { return try await Task.sleep(for: pollInterval) }
        let token = try MergeToken(request.token, feed: feed)
        var pages: [String: Int] = [:]
        for member in members {
            let position = token.position(of: member)
            if !position.ended { pages[member] = position.page }
        }
        await reader.waitForNews(of: pages, for: feed, timeout: pollInterval)
        try Task.checkCancellation()
    }

    /// The member whose item comes next, and that item; nil when no member has one for this page.
    private func next(from reads: inout MemberReads, turn: Int, keys: inout SortKeys) async throws(SourceError) -> (Int, Item)? {
        switch order {
        case .roundRobin:
            for step in members.indices {
                let index = (turn + step) % members.count
                if let item = try await reads.head(index) { return (index, item) }
            }
            return nil
        case .concat:
            for index in members.indices {
                if let item = try await reads.head(index) { return (index, item) }
            }
            return nil
        case .newest(let field):
            var best: (index: Int, item: Item, key: Double)?
            for index in members.indices {
                guard let item = try await reads.head(index) else { continue }
                guard let key = keys.key(of: item, at: field) else { return (index, item) }
                // Strictly newer only: on a tie the member listed first keeps its place.
                if let newest = best, key <= newest.key { continue }
                best = (index, item, key)
            }
            return best.map { ($0.index, $0.item) }
        }
    }

    /// The page built, and how the feed goes on after it.
    private func result(_ items: [Item], reads: MemberReads, turn: Int) throws(SourceError) -> FetchResult {
        let failures = reads.skipped.sorted { $0.key < $1.key }.compactMap { index, skip -> String? in
            guard case .failed(let error) = skip else { return nil }
            return "\(members[index]) (\(error.message))"
        }
        if reads.allEnded { return .page(items, next: .end) }
        let going = members.indices.filter { !reads.positions[$0].ended }
        if items.isEmpty, failures.count == going.count {
            throw SourceError.transient("feed \(feed): every member still going failed: \(failures.joined(separator: "; "))")
        }
        if !failures.isEmpty {
            logger.warning("members failing, left out of this page until they answer: \(failures.joined(separator: "; "))")
        }
        if items.isEmpty { return .notYet }
        let token = reads.token(turn: turn).text
        if items.count == pageSize || reads.skipped.values.contains(.outOfTime) { return .page(items, next: .more(token: token)) }
        // Short because members had nothing yet or failed: ask again once there may be more.
        return .page(items, next: .later(token: token))
    }

    private static func members(_ options: AdapterOptions, feed: String) throws(OptionError) -> [String] {
        guard let members = try options.stringArray("feeds") else { throw options.missing("feeds") }
        guard !members.isEmpty else { throw options.invalid("feeds", "must name at least one feed to merge") }
        if members.contains(feed) { throw options.invalid("feeds", "a merged feed cannot include itself (\"\(feed)\")") }
        var seen: Set<String> = []
        for member in members where !seen.insert(member).inserted {
            throw options.invalid("feeds", "\"\(member)\" is named twice")
        }
        return members
    }

    private static func order(_ options: AdapterOptions) throws(OptionError) -> Order {
        let name = try options.string("order") ?? "round_robin"
        let field = try options.string("field")
        switch name {
        case "round_robin", "concat":
            if field != nil { throw options.invalid("field", "is only read by order = \"newest\", not \"\(name)\"") }
            return name == "concat" ? .concat : .roundRobin
        case "newest":
            guard let field else { throw options.invalid("field", "is required with order = \"newest\": the dot path of the time or number to order by") }
            guard let path = DotPath(field) else {
                throw options.invalid("field", "\"\(field)\" is not a dot path (names and array indexes between dots, such as \"published\")")
            }
            return .newest(path)
        default:
            throw options.invalid("order", "must be \"round_robin\", \"concat\" or \"newest\", got \"\(name)\"")
        }
    }
}
