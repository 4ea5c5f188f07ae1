import FeedKit
import Foundation

/// The commands on durable consumers: consumers, lag, ack and forget, over the `consumers`,
/// `subscribe`, `ack` and `forget` ops (SPEC §5).
struct ConsumerCommands {
    let session: DaemonSession
    let invocation: Invocation

    /// How many consumers one `consumers` request asks for.
    static let pageLimit = 1_000

    func list() {
        let feed = invocation["FEED"]!
        let consumers = self.consumers(of: feed)
        if invocation.json { return consumers.forEach { print($0.jsonLine) } }
        var table = TextTable(header: ["CONSUMER", "AFTER", "BEHIND", "CONNECTED", "LAST ACK"])
        let now = FeedTime.now
        for consumer in consumers { table.append([consumer.name] + consumer.figures(now: now)) }
        table.print()
    }

    /// Every consumer of one feed or of all, furthest behind first.
    func lag() {
        let feeds = invocation["FEED"].map { [$0] } ?? session.feedNames
        let consumers = feeds.flatMap { self.consumers(of: $0) }.sorted { a, b in
            (a.behind ?? -1, b.feed, b.name) > (b.behind ?? -1, a.feed, a.name)
        }
        if invocation.json { return consumers.forEach { print($0.jsonLine) } }
        var table = TextTable(header: ["FEED", "CONSUMER", "BEHIND", "AFTER", "CONNECTED", "LAST ACK"])
        let now = FeedTime.now
        for consumer in consumers {
            let figures = consumer.figures(now: now)
            table.append([consumer.feed, consumer.name, figures[1], figures[0]] + figures[2...])
        }
        table.print()
    }

    /// Moves a consumer's cursor forward, as its client would: subscribing as the consumer
    /// tells where its cursor is; a subscribe `after` the page stores the new one, and the
    /// `ack` answers once it is durable.
    func acknowledge() {
        let feed = invocation["FEED"]!
        let name = invocation["CONSUMER"]!
        let page = Int(invocation["PAGE"]!)!
        let consumers = self.consumers(of: feed)
        guard let consumer = consumers.first(where: { $0.name == name }) else {
            let suggestion = SpellingSuggestion.didYouMean(name, among: consumers.map(\.name))
            fail("feed \(feed) has no consumer \"\(name)\"\(suggestion) (feedctl consumers \(feed) lists them)")
        }
        if !invocation.force {
            if consumer.connected == true {
                fail("consumer \(name) of \(feed) is connected, and its client acknowledges its own pages (--force moves its cursor anyway)")
            }
            if let after = consumer.after, let behind = consumer.behind, page > after + behind {
                fail("page \(page) is past the newest page of \(feed) (\(after + behind)); --force acknowledges it anyway")
            }
        }
        let subscription: [String: JSONValue] = ["op": "subscribe", "feed": .string(feed), "consumer": .string(name)]
        let before = Int(session.request(.object(subscription), expecting: "subscribed")["after"]?.integerValue ?? 0)
        if page > before {
            _ = session.request(.object(subscription.merging(["after": .integer(Int64(page))]) { $1 }), expecting: "subscribed")
        }
        let ack = session.request(["op": "ack", "feed": .string(feed), "page": .integer(Int64(page))], expecting: "ack")
        if invocation.json { return ack.printLine() }
        print(page > before ? "\(feed) \(name): acknowledged through page \(page) (was \(before))" : "\(feed) \(name): already acknowledged through page \(before)")
    }

    func forget() {
        let feed = invocation["FEED"]!
        let name = invocation["CONSUMER"]!
        let reply = session.request(["op": "forget", "feed": .string(feed), "consumer": .string(name)], expecting: "forgotten")
        if invocation.json { reply.printLine() } else { print("\(feed) \(name): forgotten") }
    }

    /// Every consumer of `feed`, by name, page after page of the `consumers` op.
    private func consumers(of feed: String) -> [ConsumerEntry] {
        var entries: [ConsumerEntry] = []
        var after: String?
        while true {
            var request: [String: JSONValue] = ["op": "consumers", "feed": .string(feed), "limit": .integer(Int64(Self.pageLimit))]
            if let after { request["after"] = .string(after) }
            let reply = session.request(.object(request), expecting: "consumers")
            entries += (reply["consumers"]?.arrayValue ?? []).map { ConsumerEntry(feed: feed, object: $0) }
            guard let next = reply["next"]?.stringValue else { return entries }
            // Names come in order; a `next` that does not move on would page forever.
            guard after.map({ next > $0 }) ?? true else { fail("feedd's list of consumers of \(feed) did not move past \"\(next)\"") }
            after = next
        }
    }
}

/// One consumer, as the `consumers` op describes it: `{"name","after","behind","connected","last_ack"}`.
struct ConsumerEntry {
    let feed: String
    let object: JSONValue

    var name: String { object["name"]?.stringValue ?? "?" }
    var after: Int? { object["after"]?.integerValue.map { Int($0) } }
    /// Pages between its cursor and the newest page the feed knows.
    var behind: Int? { object["behind"]?.integerValue.map { Int($0) } }
    var connected: Bool? { object["connected"]?.boolValue }

    /// The object with its feed, as one JSON line.
    var jsonLine: String {
        JSONValue.object((object.objectValue ?? [:]).merging(["feed": .string(feed)]) { $1 }).jsonText
    }

    /// AFTER, BEHIND, CONNECTED and LAST ACK, as a table shows them.
    func figures(now: FeedTime) -> [String] {
        [
            after.map(String.init) ?? "-", behind.map(String.init) ?? "-", connected.map { $0 ? "yes" : "no" } ?? "-",
            Self.age(of: object["last_ack"], now: now),
        ]
    }

    /// An RFC 3339 time as how long ago it was (`42s ago`, `3h ago`); `-` for none.
    static func age(of value: JSONValue?, now: FeedTime) -> String {
        guard let value, value != .null else { return "-" }
        guard let text = value.stringValue, let time = FeedTime(text) else { return value.stringValue ?? value.jsonText }
        let seconds = max(0, (now.millisecondsSinceEpoch - time.millisecondsSinceEpoch) / 1_000)
        let (amount, unit): (Int64, String) =
            switch seconds {
            case ..<120: (seconds, "s")
            case ..<7_200: (seconds / 60, "m")
            case ..<172_800: (seconds / 3_600, "h")
            default: (seconds / 86_400, "d")
            }
        return "\(amount)\(unit) ago"
    }
}

extension FeedTime {
    static var now: FeedTime { FeedTime(millisecondsSinceEpoch: Int64(Date().timeIntervalSince1970 * 1_000)) }
}
