import FeedKit

/// One entry of an RSS or Atom document, as the `rss` adapter publishes it.
public struct FeedEntry: Sendable, Hashable {
    public var title: String?
    public var link: String?
    public var published: FeedTime?
    public var updated: FeedTime?
    public var summary: String?
    public var author: String?
    public var categories: [String] = []
    /// RSS `guid`.
    public var guid: String?
    /// Atom `id` (also `atom:id` inside an RSS item).
    public var atomID: String?

    public init() {}

    /// The item's id: `guid`, else `atom:id`, else `link`, else a hash of the entry.
    public var item: Item {
        let data = json
        guard let id = [guid, atomID, link].lazy.compactMap({ $0 }).first(where: { !$0.isEmpty }) else { return Item(hashing: data) }
        return Item(id: id, data: data)
    }

    /// `{"title","link","published","updated","summary","author","categories"}`, times in RFC 3339,
    /// a missing field null.
    public var json: JSONValue {
        func text(_ value: String?) -> JSONValue { value.map(JSONValue.string) ?? .null }
        return [
            "title": text(title), "link": text(link), "published": text(published?.rfc3339), "updated": text(updated?.rfc3339),
            "summary": text(summary), "author": text(author),
            "categories": categories.isEmpty ? .null : .array(categories.map(JSONValue.string)),
        ]
    }

    /// When it was published, else last updated: what "newest" means.
    var time: FeedTime? { published ?? updated }
}
