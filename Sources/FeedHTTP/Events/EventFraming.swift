import Foundation
import FeedKit
import FeedServer

/// The Server-Sent Events of a feed (SPEC §11). Every event that moves the reading has an `id`
/// of `GENERATION:PAGE`, the point a reconnecting `EventSource` resumes after (it sends the last
/// one as `Last-Event-ID`): a page's own number, `G:0` for a new generation, the last page for
/// `end`. Each `data:` is the JSON object of the socket protocol's line, on one line.
enum EventFraming {
    /// `event: page`, its id and `data: ` up to the page object, which follows without its
    /// closing brace (the feed's encoded bytes, shared with every client), then ``pageTail``.
    static func pageHead(generation: Int, page: Int) -> [UInt8] {
        Array("event: page\nid: \(generation):\(page)\ndata: ".utf8)
    }

    static let pageTail = PageBytes(Array("}\n\n".utf8))

    static func refreshed(feed: String, generation: Int) -> [UInt8] {
        event("refreshed", type: "refreshed", id: "\(generation):0") { object in
            object.field("feed", feed)
            object.field("generation", generation)
        }
    }

    static func end(feed: String, generation: Int, page: Int) -> [UInt8] {
        event("end", type: "end", id: "\(generation):\(page)") { object in
            object.field("feed", feed)
            object.field("page", page)
        }
    }

    /// The feed's source is failing; no id, since the reading has not moved.
    static func upstream(feed: String, message: String, retryIn: Duration) -> [UInt8] {
        event("upstream", type: "error", id: nil) { object in
            object.field("code", "upstream")
            object.field("message", message)
            object.field("feed", feed)
            object.field("retry_in_ms", Int(retryIn.wholeMilliseconds))
        }
    }

    /// The last event of a stream the daemon ends.
    static func bye(code: String, message: String) -> [UInt8] {
        event("bye", type: "bye", id: nil) { object in
            object.field("reason", code)
            object.field("message", message)
        }
    }

    static let keepAlive: [UInt8] = Array(": keep-alive\n\n".utf8)

    private static func event(_ name: String, type: StaticString, id: String?, _ write: (inout Message) -> Void) -> [UInt8] {
        var object = Message(type: type)
        write(&object)
        var bytes = Array("event: \(name)\n".utf8)
        if let id { bytes += Array("id: \(id)\n".utf8) }
        bytes += Array("data: ".utf8)
        bytes += object.object()
        bytes += Array("\n\n".utf8)
        return bytes
    }

    /// Where a stream starts: after page `page` of the feed's current generation, and whether the
    /// client must first be told of a new generation (it resumed from one that is gone).
    struct Start: Equatable {
        let after: Int
        let announcesGeneration: Bool
    }

    /// From `Last-Event-ID: G:P` if sent (after P of generation G if that is current, else after
    /// 0 of the current one), else `after` (default 0); nil if the header is not of that form.
    static func start(lastEventID: String?, after: Int?, currentGeneration: Int) -> Start? {
        guard let lastEventID = lastEventID?.trimmingCharacters(in: .whitespaces), !lastEventID.isEmpty else {
            return Start(after: after ?? 0, announcesGeneration: false)
        }
        let parts = lastEventID.split(separator: ":", omittingEmptySubsequences: false)
        guard parts.count == 2, let generation = Int(parts[0]), let page = Int(parts[1]), generation >= 0, page >= 0,
            page <= FeedAccess.maximumPage
        else { return nil }
        if generation == currentGeneration { return Start(after: page, announcesGeneration: false) }
        return Start(after: 0, announcesGeneration: true)
    }
}
