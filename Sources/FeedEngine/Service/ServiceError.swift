import FeedState

/// Why ``FeedService`` refused or could not do something, with the code of SPEC §5 a front
/// answers with, and a message that says what was wrong and where.
public struct ServiceError: Error, Sendable, Equatable, CustomStringConvertible {
    /// The protocol's error code (SPEC §5); an HTTP front maps each to a status (SPEC §11).
    public struct Code: Sendable, Hashable, CustomStringConvertible {
        private enum Raw: String {
            case badRequest = "bad_request"
            case unknownFeed = "unknown_feed"
            case storeFailed = "store_failed"
            case shuttingDown = "shutting_down"
            case tooManyConsumers = "too_many_consumers"
        }

        private let raw: Raw

        /// A request the engine cannot act on as asked: not subscribed, a limit reached, a
        /// consumer that does not exist. HTTP 400.
        public static let badRequest = Code(raw: .badRequest)
        /// No feed of that name is configured. HTTP 404.
        public static let unknownFeed = Code(raw: .unknownFeed)
        /// What had to be made durable (a cursor, a generation, a consumer's start) could not be,
        /// locally or in the fleet; nothing changed, retry later. HTTP 503.
        public static let storeFailed = Code(raw: .storeFailed)
        /// The daemon is stopping. HTTP 503.
        public static let shuttingDown = Code(raw: .shuttingDown)
        /// The feed has as many durable consumers as it may. HTTP 429.
        public static let tooManyConsumers = Code(raw: .tooManyConsumers)

        /// The code as the protocol spells it, e.g. `store_failed`.
        public var description: String { raw.rawValue }
    }

    /// What kind of failure.
    public let code: Code
    /// What was wrong, for the client.
    public let message: String
    /// The feed concerned, if any.
    public let feed: String?

    /// An error with `code`, `message` and the feed it concerns.
    public init(_ code: Code, _ message: String, feed: String? = nil) {
        self.code = code
        self.message = message
        self.feed = feed
    }

    public var description: String { "\(code): \(message)" }

    /// A store failure, told the protocol's way.
    static func storeFailed(_ what: String, _ error: StoreError, feed: String) -> ServiceError {
        ServiceError(.storeFailed, "\(what): \(error)", feed: feed)
    }
}

/// The answer to `subscribe`, and to a `next` that subscribed on its own: the feed, who reads it,
/// in which generation, after which page.
public struct Subscribed: Sendable, Equatable {
    /// The feed subscribed to.
    public let feed: String
    /// The consumer, for a durable subscription.
    public let consumer: String?
    /// The generation the subscription reads.
    public let generation: Int
    /// The page it starts after (a consumer's stored cursor, `after`, or 0).
    public let after: Int
    /// Whether pages are pushed as they are ready.
    public let follows: Bool
}
