import FeedKit

/// Which feeds gather which (a `merge` feed's members): every member must be a feed of the
/// configuration, and no feed may gather itself, directly or through others.
struct MemberGraph {
    private let members: [String: [String]]

    init(_ feeds: [FeedDefinition]) {
        members = Dictionary(uniqueKeysWithValues: feeds.map { ($0.settings.name, $0.adapter.memberFeeds) })
    }

    /// A problem at the `feeds` key of each gathering feed whose members are missing or lead back to it.
    func problems(definedFeeds: Set<String>, place: (String, String) -> ConfigProblem?) -> [ConfigProblem] {
        members.keys.sorted().compactMap { name -> ConfigProblem? in
            let gathered = members[name] ?? []
            guard !gathered.isEmpty else { return nil }
            let unknown = gathered.filter { !definedFeeds.contains($0) }
            if !unknown.isEmpty {
                let list = unknown.map { "\"\($0)\"" }.joined(separator: ", ")
                return place(name, "feeds.\(name).feeds: no feed \(list) in this configuration")
            }
            guard let cycle = cycle(from: name) else { return nil }
            return place(name, "feeds.\(name).feeds: the feed gathers itself (\(cycle.joined(separator: " → ")))")
        }
    }

    /// A path of members from `start` back to `start`, if there is one.
    private func cycle(from start: String) -> [String]? {
        var visited: Set<String> = []
        func search(_ path: [String]) -> [String]? {
            for member in members[path.last!] ?? [] {
                if member == start { return path + [member] }
                guard visited.insert(member).inserted else { continue }
                if let found = search(path + [member]) { return found }
            }
            return nil
        }
        return search([start])
    }
}
