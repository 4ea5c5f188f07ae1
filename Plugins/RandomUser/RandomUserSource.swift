import FeedKit
import Foundation
import Synchronization

/// The `randomuser` adapter: the randomuser.me API, `results` users a page, forever.
///
/// `GET {url}?results={results}&page={n}&seed={seed}`. Every item is the upstream user object as
/// it came, with `login.uuid` as its id. Without a fixed `seed`, page 1 is asked for without one
/// and the seed the response's `info` carries pages the rest of the generation consistently; a
/// refresh starts a new generation and so gets a new seed.
///
/// Options: `url` (default `https://randomuser.me/api/`), `results` (default 20), `seed`.
public struct RandomUserSource: SourceAdapter {
    public static let sourceName = "randomuser"

    let baseURL: URL
    let results: Int
    let fixedSeed: String?
    let http: HTTPSource
    /// The seed each generation learned from its page 1, so page 1 fetched again matches page 2.
    private let learnedSeeds = LearnedSeeds()

    public init(options: AdapterOptions, context: AdapterContext) throws {
        let url = try options.string("url") ?? "https://randomuser.me/api/"
        guard let parsed = URL(string: url), let scheme = parsed.scheme, ["http", "https"].contains(scheme), parsed.host != nil else {
            throw options.invalid("url", "\"\(url)\" is not an http(s) URL")
        }
        baseURL = parsed
        results = try options.integer("results", in: 1...5_000) ?? 20
        fixedSeed = try options.string("seed")
        http = context.http
    }

    public func fetch(_ request: PageRequest) async throws -> FetchResult {
        let seed = fixedSeed ?? request.token ?? learnedSeeds.seed(for: request.generation)
        let url = pageURL(page: request.page, seed: seed)
        let page = try Self.decode(try await http.getJSON(url), from: url)
        let pagingSeed = seed ?? page.seed ?? Self.randomSeed()
        if seed == nil { learnedSeeds.remember(pagingSeed, for: request.generation) }
        return .page(page.users, next: .more(token: pagingSeed))
    }

    /// One response body: its users (ids from `login.uuid`) and the seed its `info` names.
    /// An `{"error": …}` body is an upstream error.
    public static func decode(_ body: JSONValue, from url: URL) throws(SourceError) -> (users: [Item], seed: String?) {
        if let error = body["error"] {
            throw SourceError.transient("randomuser error from \(url.absoluteString): \(error.stringValue ?? error.jsonText)")
        }
        guard let users = body["results"]?.arrayValue else {
            throw SourceError.rejected("the body from \(url.absoluteString) has no \"results\" array")
        }
        let items = users.map { user in
            user["login"]?["uuid"]?.stringValue.map { Item(id: $0, data: user) } ?? Item(hashing: user)
        }
        return (items, body["info"]?["seed"]?.stringValue)
    }

    func pageURL(page: Int, seed: String?) -> URL {
        var components = URLComponents(url: baseURL, resolvingAgainstBaseURL: false)!
        var query = components.queryItems ?? []
        query.append(URLQueryItem(name: "results", value: String(results)))
        query.append(URLQueryItem(name: "page", value: String(page)))
        if let seed { query.append(URLQueryItem(name: "seed", value: seed)) }
        components.queryItems = query
        return components.url!
    }

    private static func randomSeed() -> String {
        String(UInt64.random(in: 0...UInt64.max), radix: 16)
    }
}

/// Seeds by generation; only the newest few are kept, since older generations are never fetched again.
private final class LearnedSeeds: Sendable {
    private let seeds = Mutex<[Int: String]>([:])

    func seed(for generation: Int) -> String? {
        seeds.withLock { $0[generation] }
    }

    func remember(_ seed: String, for generation: Int) {
        seeds.withLock { seeds in
            seeds[generation] = seed
            seeds = seeds.filter { $0.key > generation - 4 }
        }
    }
}
