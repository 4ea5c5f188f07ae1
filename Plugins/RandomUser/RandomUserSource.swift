import FeedKit
import Foundation

/// The `randomuser` adapter: the randomuser.me API, `results` users a page, forever.
///
/// `GET {url}?results={results}&page={n}&seed={seed}`. Every item is the upstream user object as
/// it came, with `login.uuid` as its id. Without a fixed `seed`, the generation's seed
/// (``PageRequest/seed``, chosen by the daemon when the generation starts and kept across
/// restarts) is sent, so every page of a generation is addressable by its number and comes back
/// the same when fetched again; a refresh starts a new generation and so gets a new seed.
///
/// Options: `url` (default `https://randomuser.me/api/`), `results` (default 20), `seed`, `follow_redirects`.
public struct RandomUserSource: SourceAdapter {
    public static let sourceName = "randomuser"
    public static let configKeys = [
        ConfigKey("url", .string, .value("\"https://randomuser.me/api/\""), "the API's base URL (a query it has is kept)"),
        ConfigKey("results", .integer, .value("20"), "users per page"),
        ConfigKey("seed", .string, .unset, "a fixed seed: the same users every time, across refreshes too; unset, each generation gets its own"),
        RedirectPolicy.configKey,
    ]

    /// The page URL up to the page number: the base URL, its own query and `results`.
    let pagePrefix: String
    let results: Int
    let fixedSeed: String?
    let http: HTTPSource

    /// One request and the parse of its page: on the transport's thread.
    public var fetchExecutor: (any TaskExecutor)? { http.executor }

    public init(options: AdapterOptions, context: AdapterContext) throws {
        let url = try options.string("url") ?? "https://randomuser.me/api/"
        guard let parsed = URL(string: url), let scheme = parsed.scheme, ["http", "https"].contains(scheme), parsed.host != nil else {
            throw options.invalid("url", "\"\(url)\" is not an http(s) URL")
        }
        results = try options.integer("results", in: 1...5_000) ?? 20
        let withoutFragment = parsed.absoluteString.split(separator: "#", maxSplits: 1, omittingEmptySubsequences: false)[0]
        pagePrefix = withoutFragment + (parsed.query == nil ? "?" : "&") + "results=\(results)&page="
        fixedSeed = try options.string("seed")
        http = try context.http(options)
    }

    public var pageAddressing: PageAddressing { .direct }

    public func fetch(_ request: PageRequest) async throws -> FetchResult {
        let url = pageURL(page: request.page, seed: fixedSeed ?? request.seed)
        return .page(try Self.decode(try await http.getJSON(url), from: url), next: .more(token: nil))
    }

    /// One response body's users, each as the upstream wrote it, with ids from `login.uuid`. An
    /// `{"error": …}` body is an upstream error.
    public static func decode(_ body: JSONDocument, from url: URL) throws(SourceError) -> [Item] {
        if let error = body.root["error"] {
            throw SourceError.transient("randomuser error from \(url.absoluteString): \(error.stringValue ?? error.jsonText)")
        }
        guard let users = body.root["results"]?.elements else {
            throw SourceError.rejected("the body from \(url.absoluteString) has no \"results\" array")
        }
        return users.map { user in
            guard let uuid = user.value(at: uuidPath), uuid.kind == .string else { return Item(hashing: user) }
            return Item(id: uuid, data: user)
        }
    }

    private static let uuidPath = DotPath("login.uuid")!

    /// Built as text from a prefix made once, rather than by URLComponents, which parses and
    /// writes the whole URL again for every page.
    func pageURL(page: Int, seed: String) -> URL {
        URL(string: pagePrefix + String(page) + "&seed=" + Self.percentEncoded(seed))!
    }

    /// `text` with every byte but RFC 3986's unreserved characters percent-encoded (most seeds
    /// have none to encode).
    static func percentEncoded(_ text: String) -> String {
        guard !text.utf8.allSatisfy(isUnreserved) else { return text }
        return text.addingPercentEncoding(withAllowedCharacters: unreserved) ?? ""
    }

    private static func isUnreserved(_ byte: UInt8) -> Bool {
        switch byte {
        case UInt8(ascii: "A")...UInt8(ascii: "Z"), UInt8(ascii: "a")...UInt8(ascii: "z"), UInt8(ascii: "0")...UInt8(ascii: "9"): true
        case UInt8(ascii: "-"), UInt8(ascii: "."), UInt8(ascii: "_"), UInt8(ascii: "~"): true
        default: false
        }
    }

    private static let unreserved = CharacterSet(charactersIn: "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789-._~")
}
