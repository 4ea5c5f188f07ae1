import FeedEngine
import FeedKit

/// Builds one JSON object field by field: an outgoing line `{"type":"…", fields…, "id":…}\n`
/// of the socket protocol, or the same object as the HTTP front's body or event data
/// (``object()``), with or without a `type`.
package struct Message {
    private var writer: JSONWriter
    private var isEmpty: Bool

    package init(type: StaticString, capacity: Int = 128) {
        writer = JSONWriter(reservingCapacity: capacity)
        writer.raw("{\"type\":\"")
        writer.raw(type)
        writer.raw(UInt8(ascii: "\""))
        isEmpty = false
    }

    /// An object with no `type`: `{}` until fields are added.
    package init(capacity: Int = 256) {
        writer = JSONWriter(reservingCapacity: capacity)
        writer.raw(UInt8(ascii: "{"))
        isEmpty = true
    }

    package mutating func field(_ key: StaticString, _ value: String) {
        next(key)
        writer.string(value)
    }

    package mutating func field(_ key: StaticString, _ value: String?) {
        next(key)
        if let value { writer.string(value) } else { writer.raw("null") }
    }

    package mutating func field(_ key: StaticString, _ value: Int) {
        next(key)
        writer.number(value)
    }

    package mutating func field(_ key: StaticString, _ value: Bool) {
        next(key)
        writer.raw(value ? "true" : "false")
    }

    package mutating func field(_ key: StaticString, _ value: JSONValue) {
        next(key)
        writer.value(value)
    }

    package mutating func field(_ key: StaticString, strings: [String]) {
        next(key)
        writer.value(.array(strings.map(JSONValue.string)))
    }

    /// A field whose value the caller writes with `write`.
    package mutating func field(_ key: StaticString, write: (inout JSONWriter) -> Void) {
        next(key)
        write(&writer)
    }

    private mutating func next(_ key: StaticString) {
        if !isEmpty { writer.raw(UInt8(ascii: ",")) }
        isEmpty = false
        writer.key(key)
    }

    /// The finished line, with the request's id where it answers one.
    package consuming func line(replyTo id: RequestID?) -> [UInt8] {
        writer.bytes.append(contentsOf: Message.closing(replyTo: id))
        return writer.bytes
    }

    /// The body without its closing brace: for a line sent to many connections, each of which may
    /// add its own `id` (see ``closing(replyTo:)``).
    package consuming func openBody() -> [UInt8] { writer.bytes }

    /// The object alone, closed, with no newline and no `id`.
    package consuming func object() -> [UInt8] {
        writer.raw(UInt8(ascii: "}"))
        return writer.bytes
    }

    /// `}\n`, or `,"id":…}\n` for a reply.
    static func closing(replyTo id: RequestID?) -> [UInt8] {
        guard let id else { return plainClosing }
        var bytes = Array(",\"id\":".utf8)
        bytes.reserveCapacity(id.json.count + 10)
        bytes.append(contentsOf: id.json)
        bytes.append(contentsOf: "}\n".utf8)
        return bytes
    }

    static let plainClosing: [UInt8] = Array("}\n".utf8)
}

extension Message {
    static func error(_ code: ErrorCode, _ message: String, feed: String? = nil, id: RequestID? = nil, retryInMilliseconds: Int64? = nil) -> [UInt8] {
        var line = Message(type: "error")
        line.field("code", code.rawValue)
        line.field("message", message)
        if let feed { line.field("feed", feed) }
        if let retryInMilliseconds { line.field("retry_in_ms", Int(retryInMilliseconds)) }
        return line.line(replyTo: id)
    }

    /// The error line for what the service refused.
    static func error(_ error: ServiceError, id: RequestID?) -> [UInt8] {
        Message.error(ErrorCode(error.code), error.message, feed: error.feed, id: id)
    }

    static func subscribed(_ subscribed: Subscribed, id: RequestID?) -> [UInt8] {
        var line = Message(type: "subscribed")
        line.field("feed", subscribed.feed)
        line.field("consumer", subscribed.consumer)
        line.field("generation", subscribed.generation)
        line.field("after", subscribed.after)
        line.field("follow", subscribed.follows)
        return line.line(replyTo: id)
    }

    static func simple(_ type: StaticString, feed: String? = nil, id: RequestID?) -> [UInt8] {
        var line = Message(type: type)
        if let feed { line.field("feed", feed) }
        return line.line(replyTo: id)
    }

    static func bye(reason: String, id: RequestID? = nil) -> [UInt8] {
        var line = Message(type: "bye")
        line.field("reason", reason)
        return line.line(replyTo: id)
    }

    static func refreshed(feed: String, generation: Int, id: RequestID?) -> [UInt8] {
        var line = Message(type: "refreshed")
        line.field("feed", feed)
        line.field("generation", generation)
        return line.line(replyTo: id)
    }

    static func hello(feeds: [String]) -> [UInt8] {
        var line = Message(type: "hello")
        line.field("name", "feedd")
        line.field("version", feeddVersion)
        line.field("protocol", 1)
        line.field("feeds", strings: feeds)
        return line.line(replyTo: nil)
    }

}

/// The `page` line of SPEC §5, for the feeds to encode each page with once.
public struct PageLineEncoder: PageEncoder {
    /// The encoder.
    public init() {}

    public func encode(feed: String, generation: Int, number: Int, items: [Item], isLast: Bool) -> SharedBytes {
        encode(feed: feed, generation: generation, number: number, written: WrittenItems(items), isLast: isLast)
    }

    /// The line with the items as they are written: a page an adapter wrote (a file's) is
    /// copied in, any other's items are written here.
    public func encode(feed: String, generation: Int, number: Int, written items: WrittenItems, isLast: Bool) -> SharedBytes {
        var line = Message(type: "page", capacity: 256 + items.estimatedSize)
        line.field("feed", feed)
        line.field("generation", generation)
        line.field("page", number)
        line.field("items") { items.write(to: &$0) }
        line.field("last", isLast)
        return SharedBytes(line.line(replyTo: nil))
    }
}

extension ErrorCode {
    /// The code the service gave, as the socket protocol spells it (the same words).
    init(_ code: ServiceError.Code) {
        self = ErrorCode(rawValue: code.description) ?? .badRequest
    }
}

extension RequestID {
    /// The id as the engine carries it back with the events that answer the request, which it
    /// never looks into (see ``init(replyTag:)``).
    var replyTag: ReplyTag { ReplyTag(json) }

    /// The id back from an engine event's `replyTo`, which only ever holds a ``replyTag``.
    init?(replyTag: ReplyTag?) {
        guard let replyTag else { return nil }
        self.init(json: replyTag.bytes)
    }
}
