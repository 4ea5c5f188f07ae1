import FeedKit

/// A client request, decoded from one line.
public enum Request: Equatable, Sendable {
    case subscribe(feed: String, consumer: String?, after: Int?, follow: Bool)
    case next(feed: String, count: Int)
    case ack(feed: String, page: Int)
    case unsubscribe(feed: String)
    case refresh(feed: String)
    /// Deletes a consumer's stored cursor (SPEC §5, for administrators).
    case forget(feed: String, consumer: String)
    /// A page of a feed's durable consumers, by name, after `after` (SPEC §5).
    case consumers(feed: String, after: String?, limit: Int)
    case status
    /// The OpenMetrics text of SPEC §10.
    case metrics
    case ping
    case quit

    /// Whether it is answered at once from memory with a short line whatever the daemon holds
    /// (no page, no store, no upstream, no list that grows with the feeds): a client that sends
    /// only these is served ahead of the others (``TurnOrder/Kind``).
    public var isBrief: Bool {
        switch self {
        case .ping, .quit: true
        case .subscribe, .next, .ack, .unsubscribe, .refresh, .forget, .consumers, .status, .metrics: false
        }
    }

    /// Whether `line` can hold a brief request at all: it names a brief op, in either form. A
    /// look before decoding, for the event loop's guess at a connection's first request: when a
    /// thousand followers connect at once, their input is looked at before the `ping` sent
    /// meanwhile is served, and decoding each `subscribe` only to learn it is no `ping` was about
    /// a quarter of that look (3.3–4.6 µs a connection, 2.5–3.4 without, instrumented build). An
    /// op spelled with JSON escapes is not found: its request is taken as ordinary, and waits its
    /// turn by recency as any other.
    public static func mayBeBrief(_ line: ArraySlice<UInt8>) -> Bool {
        line.withUnsafeBytes { bytes in
            guard bytes.count >= 4 else { return false }
            let ops = briefOps
            for start in 0...(bytes.count - 4) {
                let word = bytes.loadUnaligned(fromByteOffset: start, as: UInt32.self)
                if ops.contains(word) { return true }
            }
            return false
        }
    }

    /// The ops of the requests ``isBrief`` names, as a line spells them, each as the four bytes
    /// of its name read as one word.
    private static let briefOps: [UInt32] = ["ping", "quit"].map { name in
        Array(name.utf8).withUnsafeBytes { $0.loadUnaligned(as: UInt32.self) }
    }

    /// The feed the request names, if any.
    public var feed: String? {
        switch self {
        case .subscribe(let feed, _, _, _), .next(let feed, _), .ack(let feed, _), .unsubscribe(let feed), .refresh(let feed),
            .forget(let feed, _), .consumers(let feed, _, _):
            return feed
        case .status, .metrics, .ping, .quit:
            return nil
        }
    }
}

/// The error codes of SPEC §5.
public enum ErrorCode: String, Sendable {
    case badJSON = "bad_json"
    case badRequest = "bad_request"
    case unknownOp = "unknown_op"
    case unknownFeed = "unknown_feed"
    case lineTooLong = "line_too_long"
    case tooManyClients = "too_many_clients"
    case forbidden
    case upstream
    case shuttingDown = "shutting_down"
    /// A consumer's cursor or a generation could not be made durable; nothing was acknowledged.
    case storeFailed = "store_failed"
    /// Not in SPEC §5's list: the client left its output unread past `stall_timeout` and is
    /// being disconnected.
    case tooSlow = "too_slow"
    case tooManyConsumers = "too_many_consumers"
}

/// A request line that could not be decoded: what to answer, with the id and feed where known.
public struct RequestError: Error, Equatable, Sendable {
    public let code: ErrorCode
    public let message: String
    public let id: RequestID?
    public let feed: String?
}

/// The rule for consumer names: `[A-Za-z0-9][A-Za-z0-9._-]{0,127}`. A name is stored on disk and
/// shown in `status`, so it may not be empty, hold a path separator or control characters, or
/// start with a dot.
public enum ConsumerName {
    public static let maxLength = 128
    public static let rule = "[A-Za-z0-9][A-Za-z0-9._-]{0,127}"

    public static func isValid(_ name: String) -> Bool {
        let bytes = Array(name.utf8)
        guard (1...maxLength).contains(bytes.count) else { return false }
        func isAlphanumeric(_ byte: UInt8) -> Bool {
            (UInt8(ascii: "a")...UInt8(ascii: "z")).contains(byte) || (UInt8(ascii: "A")...UInt8(ascii: "Z")).contains(byte)
                || (UInt8(ascii: "0")...UInt8(ascii: "9")).contains(byte)
        }
        return isAlphanumeric(bytes[0])
            && bytes.dropFirst().allSatisfy { isAlphanumeric($0) || $0 == UInt8(ascii: ".") || $0 == UInt8(ascii: "_") || $0 == UInt8(ascii: "-") }
    }
}

/// Decodes request lines: a JSON object, or the inline words form `OP [FEED] [N]`.
public enum RequestDecoder {
    /// The most pages one `next` may ask for.
    public static let maxCount = 10_000
    /// How many consumers a `consumers` request without `limit` gets.
    public static let defaultConsumerPage = 100
    /// The `limit`s the consumers op takes: the engine's cap (`ConsumerPage.maximumCount`), kept
    /// here too so that the protocol's parser needs no engine (the request-line fuzz target
    /// builds it alone).
    public static let consumerPageLimits = 1...1_000
    /// The highest page number a client may name (`after`, `ack`'s `page`): far beyond any real
    /// feed, and far enough below `Int.max` that no page arithmetic can overflow.
    public static let maxPage = 1_000_000_000

    public static func decode(_ line: ArraySlice<UInt8>) -> Result<(request: Request, id: RequestID?), RequestError> {
        if line.first == UInt8(ascii: "{") { return decodeJSON(line) }
        guard let text = String(validating: line, as: UTF8.self) else {
            return .failure(RequestError(code: .badRequest, message: "the line is not valid UTF-8", id: nil, feed: nil))
        }
        return decodeWords(text).map { ($0, nil) }
    }

    /// simdjson (``JSONDocument``), not Foundation: parsing a request line with
    /// `JSONSerialization` and bridging its values was a fifth of the main thread in an ack storm
    /// of JSON lines. An object naming a member twice is refused, as everywhere else feedd reads
    /// JSON: readers of the same line could take either value.
    private static func decodeJSON(_ line: ArraySlice<UInt8>) -> Result<(request: Request, id: RequestID?), RequestError> {
        let object: JSONElement
        do {
            object = try JSONDocument(parsing: line).root
        } catch {
            return .failure(RequestError(code: .badJSON, message: "invalid JSON: \(error.description)", id: nil, feed: nil))
        }
        guard object.kind == .object else {
            return .failure(RequestError(code: .badJSON, message: "a request must be a JSON object", id: nil, feed: nil))
        }
        // The id as the client wrote it, byte for byte.
        let fields = Fields(object: object, id: object["id"].map { RequestID(json: Array($0.raw.bytes)) })
        do {
            return .success((try request(from: fields), fields.id))
        } catch {
            return .failure(error)
        }
    }

    private static func request(from fields: Fields) throws(RequestError) -> Request {
        let op = try fields.requiredString("op")
        switch op {
        case "subscribe", "follow":
            let follow = try fields.bool("follow") ?? (op == "follow")
            return .subscribe(
                feed: try fields.feed(), consumer: try fields.consumer(required: false), after: try fields.count("after", minimum: 0, maximum: maxPage),
                follow: follow)
        case "next":
            return .next(feed: try fields.feed(), count: try fields.count("count", minimum: 1, maximum: maxCount) ?? 1)
        case "ack":
            guard let page = try fields.count("page", minimum: 0, maximum: maxPage) else { throw fields.error("`page` is required") }
            return .ack(feed: try fields.feed(), page: page)
        case "unsubscribe": return .unsubscribe(feed: try fields.feed())
        case "refresh": return .refresh(feed: try fields.feed())
        case "forget": return .forget(feed: try fields.feed(), consumer: try fields.consumer(required: true)!)
        case "consumers":
            return .consumers(
                feed: try fields.feed(), after: try fields.string("after"),
                limit: try fields.count("limit", minimum: consumerPageLimits.lowerBound, maximum: consumerPageLimits.upperBound) ?? defaultConsumerPage)
        case "status": return .status
        case "metrics": return .metrics
        case "ping": return .ping
        case "quit": return .quit
        default:
            throw RequestError(code: .unknownOp, message: "unknown op \"\(op)\"", id: fields.id, feed: nil)
        }
    }

    /// The inline form typed into socat: `next users 5`, `follow donny`, `ack users 3`, `status`.
    private static func decodeWords(_ text: String) -> Result<Request, RequestError> {
        let words = Self.words(of: text)
        guard let op = words.first else {
            return .failure(RequestError(code: .badRequest, message: "empty request", id: nil, feed: nil))
        }
        func failure(_ message: String) -> Result<Request, RequestError> {
            .failure(RequestError(code: .badRequest, message: message, id: nil, feed: words.count > 1 ? words[1] : nil))
        }
        guard takesFeed.contains(op) || takesNothing.contains(op) else {
            return .failure(RequestError(code: .unknownOp, message: "unknown op \"\(op)\"", id: nil, feed: nil))
        }
        let maxWords = takesNumber[op] != nil ? 3 : (takesFeed.contains(op) ? 2 : 1)
        guard words.count <= maxWords else { return failure("too many words: \(op) takes \(Self.usage(op))") }
        guard !takesFeed.contains(op) || words.count >= 2 else { return failure("\(op) needs a feed: \(op) \(Self.usage(op))") }
        var number: Int?
        if words.count == 3, let numberSpec = takesNumber[op] {
            guard let parsed = Int(words[2]), numberSpec.range.contains(parsed) else {
                return failure("\(numberSpec.name) must be a whole number from \(numberSpec.range.lowerBound) to \(numberSpec.range.upperBound), got \"\(words[2].prefix(40))\"")
            }
            number = parsed
        }
        let feed = words.count > 1 ? words[1] : ""
        switch op {
        case "subscribe", "follow": return .success(.subscribe(feed: feed, consumer: nil, after: number, follow: op == "follow"))
        case "next": return .success(.next(feed: feed, count: number ?? 1))
        case "ack":
            guard let number else { return failure("ack needs a page: ack FEED PAGE") }
            return .success(.ack(feed: feed, page: number))
        case "unsubscribe": return .success(.unsubscribe(feed: feed))
        case "refresh": return .success(.refresh(feed: feed))
        case "consumers": return .success(.consumers(feed: feed, after: nil, limit: defaultConsumerPage))
        case "status": return .success(.status)
        case "metrics": return .success(.metrics)
        case "ping": return .success(.ping)
        default: return .success(.quit)
        }
    }

    private static let takesFeed: Set = ["subscribe", "follow", "next", "ack", "unsubscribe", "refresh", "consumers"]
    private static let takesNothing: Set = ["status", "metrics", "ping", "quit"]
    private static let takesNumber: [String: (name: String, range: ClosedRange<Int>)] = [
        "subscribe": ("after", 0...maxPage), "follow": ("after", 0...maxPage),
        "next": ("count", 1...maxCount), "ack": ("page", 0...maxPage),
    ]

    /// `text` split at whitespace. An ASCII line (every line a client sends in practice) is split
    /// at its bytes, which gives the same words as splitting at `Character.isWhitespace` without
    /// looking up Unicode properties for every character; that look-up was a tenth of the main
    /// thread's time in an ack storm.
    private static func words(of text: String) -> [String] {
        guard text.utf8.allSatisfy({ $0 < 0x80 }) else { return text.split(whereSeparator: \.isWhitespace).map(String.init) }
        return text.utf8.split(whereSeparator: { $0 == UInt8(ascii: " ") || (0x09...0x0D).contains($0) }).map { String(Substring($0)) }
    }

    private static func usage(_ op: String) -> String {
        switch op {
        case "subscribe", "follow": return "FEED [AFTER]"
        case "next": return "FEED [COUNT]"
        case "ack": return "FEED PAGE"
        case "unsubscribe", "refresh", "consumers": return "FEED"
        default: return "no arguments"
        }
    }
}

/// Typed access to a request object's fields, with errors that name the field.
private struct Fields {
    let object: JSONElement
    let id: RequestID?

    func error(_ message: String) -> RequestError {
        RequestError(code: .badRequest, message: message, id: id, feed: object["feed"]?.stringValue)
    }

    func string(_ name: String) throws(RequestError) -> String? {
        guard let value = object[name], !value.isNull else { return nil }
        guard let string = value.stringValue else { throw error("`\(name)` must be a string, got \(value.typeDescription)") }
        return string
    }

    func requiredString(_ name: String) throws(RequestError) -> String {
        guard let string = try string(name) else { throw error("`\(name)` is required") }
        return string
    }

    func feed() throws(RequestError) -> String { try requiredString("feed") }

    func consumer(required: Bool) throws(RequestError) -> String? {
        guard let name = required ? try requiredString("consumer") : try string("consumer") else { return nil }
        guard ConsumerName.isValid(name) else {
            throw error("`consumer` must match \(ConsumerName.rule) (1 to \(ConsumerName.maxLength) letters, digits, '.', '_' or '-')")
        }
        return name
    }

    func bool(_ name: String) throws(RequestError) -> Bool? {
        guard let value = object[name], !value.isNull else { return nil }
        guard let flag = value.boolValue else { throw error("`\(name)` must be true or false, got \(value.typeDescription)") }
        return flag
    }

    func count(_ name: String, minimum: Int, maximum: Int) throws(RequestError) -> Int? {
        guard let value = object[name], !value.isNull else { return nil }
        guard let integer = value.integerValue ?? Self.integral(value.doubleValue), let count = Int(exactly: integer), (minimum...maximum).contains(count) else {
            throw error("`\(name)` must be a whole number from \(minimum) to \(maximum)")
        }
        return count
    }

    /// A number written with a fraction or an exponent that is whole (`3.0`, `1e2`), as a count.
    private static func integral(_ number: Double?) -> Int64? {
        guard let number, number.rounded() == number, abs(number) < 9.0e18 else { return nil }
        return Int64(number)
    }
}
