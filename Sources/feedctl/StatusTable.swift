import FeedKit

/// `feedctl status` for people: one line for the daemon, one for its fleet if it has one, one row per feed.
struct StatusTable {
    let status: JSONValue

    func print() {
        let uptime = status["uptime_s"]?.integerValue ?? 0
        let clients = status["clients"]?.integerValue ?? 0
        Swift.print("feedd \(status["version"]?.stringValue ?? "?"), up \(uptime)s, \(clients) client\(clients == 1 ? "" : "s")")
        if let cluster = status["cluster"] { Swift.print(Self.clusterLine(cluster)) }
        var rows = [["FEED", "SOURCE", "STATE", "GEN", "FETCHED", "CACHED", "END", "REQUESTS", "SUBS", "CONSUMERS", "LAST ERROR"]]
        for feed in status["feeds"]?.arrayValue ?? [] {
            func number(_ key: String) -> String { feed[key]?.integerValue.map(String.init) ?? "-" }
            rows.append([
                feed["name"]?.stringValue ?? "?", feed["source"]?.stringValue ?? "?", feed["state"]?.stringValue ?? "?",
                number("generation"), number("fetched_pages"), number("cached_pages"),
                feed["reached_end"]?.boolValue == true ? "yes" : "no", number("upstream_requests"), number("subscribers"),
                String(feed["consumers"]?.arrayValue?.count ?? 0), feed["last_error"]?.stringValue ?? "-",
            ])
        }
        printTable(rows)
    }

    /// `cluster prod: connected to nats://nats-1:4222, 0 reconnects, 0 rejected; joined: users; alone: notes`,
    /// then the problem an operator must act on, if there is one.
    static func clusterLine(_ cluster: JSONValue) -> String {
        var line = "cluster \(cluster["name"]?.stringValue ?? "?"): \(cluster["state"]?.stringValue ?? "?")"
        if let server = cluster["server"]?.stringValue { line += " to \(server)" }
        if let reconnects = cluster["reconnects"]?.integerValue, let rejected = cluster["rejected"]?.integerValue {
            line += ", \(reconnects) reconnect\(reconnects == 1 ? "" : "s"), \(rejected) rejected"
        }
        for membership in ["joined", "joining", "alone"] {
            let feeds = cluster[membership]?.arrayValue?.compactMap(\.stringValue) ?? []
            if !feeds.isEmpty { line += "; \(membership): \(feeds.joined(separator: ", "))" }
        }
        if let problem = cluster["problem"]?.stringValue { line += "; problem: \(problem)" }
        return line
    }

    private func printTable(_ rows: [[String]]) {
        let widths = rows[0].indices.map { column in rows.map { $0[column].count }.max() ?? 0 }
        for row in rows {
            let cells = row.enumerated().map { column, cell in
                column == row.count - 1 ? cell : cell.padding(toLength: widths[column], withPad: " ", startingAt: 0)
            }
            Swift.print(cells.joined(separator: "  "))
        }
    }
}
