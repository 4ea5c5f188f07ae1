import FeedEngine

/// What a request's path names (SPEC §11), and the methods it takes.
enum HTTPRoute: Equatable {
    /// `/`: the infinite-scroll page.
    case scrollPage
    case health
    case metrics
    /// `/v1/feeds`
    case feeds
    /// `/v1/feeds/F`
    case feed(String)
    case pages(String)
    case events(String)
    case acknowledge(String)
    case refresh(String)
    /// `/v1/feeds/F/…` with a name that no feed may have; answered `unknown_feed`.
    case badFeedName(String)

    /// The route `path` names, or nil when it names nothing.
    init?(path: String) {
        switch path {
        case "/": self = .scrollPage
        case "/healthz": self = .health
        case "/metrics": self = .metrics
        case "/v1/feeds", "/v1/feeds/": self = .feeds
        default:
            guard path.hasPrefix("/v1/feeds/") else { return nil }
            let parts = path.dropFirst("/v1/feeds/".count).split(separator: "/", omittingEmptySubsequences: false)
            guard (1...2).contains(parts.count) else { return nil }
            let name = String(parts[0])
            guard FeedName.isValid(name) else {
                self = .badFeedName(name)
                return
            }
            switch parts.count == 1 ? "" : parts[1] {
            case "": self = .feed(name)
            case "pages": self = .pages(name)
            case "events": self = .events(name)
            case "ack": self = .acknowledge(name)
            case "refresh": self = .refresh(name)
            default: return nil
            }
        }
    }

    /// The methods it answers (HEAD wherever GET; OPTIONS everywhere, for CORS preflights).
    var methods: [String] {
        switch self {
        case .acknowledge, .refresh: ["POST", "OPTIONS"]
        case .events: ["GET", "OPTIONS"]
        default: ["GET", "HEAD", "OPTIONS"]
        }
    }

    /// The feed it concerns, whose token it needs.
    var feed: String? {
        switch self {
        case .feed(let name), .pages(let name), .events(let name), .acknowledge(let name), .refresh(let name), .badFeedName(let name): name
        case .scrollPage, .health, .metrics, .feeds: nil
        }
    }
}
