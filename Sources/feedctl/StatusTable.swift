import FeedKit

/// `feedctl status` for people: one line for the daemon, one row per feed.
struct StatusTable {
    let status: JSONValue

    func print() {
        let uptime = status["uptime_s"]?.integerValue ?? 0
        let clients = Int(status["clients"]?.integerValue ?? 0)
        Swift.print("feedd \(status["version"]?.stringValue ?? "?"), up \(uptime)s, \(counted(clients, "client"))")
        var table = TextTable(header: ["FEED", "SOURCE", "STATE", "GEN", "FETCHED", "CACHED", "END", "REQUESTS", "SUBS", "CONSUMERS", "LAST ERROR"])
        for feed in status["feeds"]?.arrayValue ?? [] {
            func number(_ key: String) -> String { feed[key]?.integerValue.map(String.init) ?? "-" }
            table.append([
                feed["name"]?.stringValue ?? "?", feed["source"]?.stringValue ?? "?", feed["state"]?.stringValue ?? "?",
                number("generation"), number("fetched_pages"), number("cached_pages"),
                feed["reached_end"]?.boolValue == true ? "yes" : "no", number("upstream_requests"), number("subscribers"),
                String(feed["consumers"]?.arrayValue?.count ?? 0), feed["last_error"]?.stringValue ?? "-",
            ])
        }
        table.print()
    }
}
