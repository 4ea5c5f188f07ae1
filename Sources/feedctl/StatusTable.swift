import FeedKit

/// `feedctl status` for people: one line for the daemon, one for its fleet if it has one, one row per feed.
struct StatusTable {
    let status: JSONValue

    func print() {
        let uptime = status["uptime_s"]?.integerValue ?? 0
        let clients = Int(status["clients"]?.integerValue ?? 0)
        Swift.print("feedd \(status["version"]?.stringValue ?? "?"), up \(uptime)s, \(counted(clients, "client"))")
        if let cluster = status["cluster"] { Swift.print(Self.clusterLine(cluster)) }
        var table = TextTable(header: ["FEED", "SOURCE", "STATE", "GEN", "FETCHED", "CACHED", "END", "REQUESTS", "SUBS", "CONSUMERS", "LAST ERROR"])
        for feed in status["feeds"]?.arrayValue ?? [] {
            func number(_ key: String) -> String { feed[key]?.integerValue.map(String.init) ?? "-" }
            table.append([
                feed["name"]?.stringValue ?? "?", feed["source"]?.stringValue ?? "?", feed["state"]?.stringValue ?? "?",
                number("generation"), number("fetched_pages"), number("cached_pages"),
                feed["reached_end"]?.boolValue == true ? "yes" : "no", number("upstream_requests"), number("subscribers"),
                // `consumers` lists only the first 100; an older daemon gives no consumer_count.
                feed["consumer_count"].flatMap(\.integerValue).map(String.init) ?? String(feed["consumers"]?.arrayValue?.count ?? 0),
                feed["last_error"]?.stringValue ?? "-",
            ])
        }
        table.print()
    }

    /// `cluster prod: connected to nats://nats-1:4222, 0 reconnects, 0 rejected; joined: users; alone: notes`,
    /// then the problem an operator must act on, if there is one.
    static func clusterLine(_ cluster: JSONValue) -> String {
        var line = "cluster \(cluster["name"]?.stringValue ?? "?"): \(cluster["state"]?.stringValue ?? "?")"
        if let server = cluster["server"]?.stringValue { line += " to \(server)" }
        if let reconnects = cluster["reconnects"]?.integerValue, let rejected = cluster["rejected"]?.integerValue {
            line += ", \(counted(Int(reconnects), "reconnect")), \(rejected) rejected"
        }
        for membership in ["joined", "joining", "alone"] {
            let feeds = cluster[membership]?.arrayValue?.compactMap(\.stringValue) ?? []
            if !feeds.isEmpty { line += "; \(membership): \(feeds.joined(separator: ", "))" }
        }
        if let problem = cluster["problem"]?.stringValue { line += "; problem: \(problem)" }
        return line
    }
}
