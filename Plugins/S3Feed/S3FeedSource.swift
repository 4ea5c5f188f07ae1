import FeedKit
import Foundation

/// The `s3` adapter: a paged JSON feed of static files, such as the original app's feed on S3.
///
/// `GET` the URL template with `{page}` replaced by the page number; each body is
/// `{"items": [{"id": …, "label": …}, …], "hasMorePages": bool}`. Item ids come from `id`. The feed
/// ends on `hasMorePages == false`, unless the feed has a `poll` interval: then the last page is
/// fetched again every `poll` (the first time one `poll` after it was fetched), and as soon as it
/// says more pages follow, the next one is published. Pages are addressed by number.
///
/// Options: `url` (required, must contain `{page}`), `follow_redirects`.
public struct S3FeedSource: SourceAdapter {
    public static let sourceName = "s3"
    public static let configKeys = [
        ConfigKey("url", .string, .required(example: "\"https://example.com/feed-{page}.json\""), "URL template; {page} becomes 1, 2, 3 …"),
        RedirectPolicy.configKey,
    ]

    let template: String
    let polls: Bool
    let http: HTTPSource

    /// One request and the parse of its page: on the transport's thread.
    public var fetchExecutor: (any TaskExecutor)? { http.executor }

    /// The token of the page after a last page on a polled feed: look at that last page again first.
    static let recheckToken = "recheck-previous"

    public init(options: AdapterOptions, context: AdapterContext) throws {
        template = try options.requiredString("url")
        guard template.contains("{page}") else {
            throw options.invalid("url", "must contain {page}, where the page number goes")
        }
        guard let url = URL(string: template.replacingOccurrences(of: "{page}", with: "1")),
            let scheme = url.scheme, ["http", "https"].contains(scheme), url.host != nil
        else {
            throw options.invalid("url", "\"\(template)\" is not an http(s) URL template")
        }
        polls = context.pollInterval != nil
        http = try context.http(options)
    }

    public var pageAddressing: PageAddressing { .direct }

    public func fetch(_ request: PageRequest) async throws -> FetchResult {
        if request.token == Self.recheckToken, request.page > 1 {
            let previous = try await page(request.page - 1)
            guard previous.hasMorePages else { return .notYet }
        }
        let current = try await page(request.page)
        if current.hasMorePages { return .page(current.items, next: .more(token: nil)) }
        // Polled, the last page is looked at again only after `poll`: `.later` makes the daemon
        // wait before asking for the page after it, which starts by re-reading this one.
        return .page(current.items, next: polls ? .later(token: Self.recheckToken) : .end)
    }

    private func page(_ number: Int) async throws -> (items: [Item], hasMorePages: Bool) {
        let url = URL(string: template.replacingOccurrences(of: "{page}", with: String(number)))!
        return try Self.decode(try await http.getJSON(url), from: url)
    }

    /// One page body: its items, each as the upstream wrote it (ids from `id`), and whether more
    /// pages follow.
    public static func decode(_ body: JSONDocument, from url: URL) throws(SourceError) -> (items: [Item], hasMorePages: Bool) {
        guard let entries = body.root["items"]?.elements else {
            throw SourceError.rejected("the body from \(url.absoluteString) has no \"items\" array")
        }
        let items = entries.map { Item(id: $0["id"], data: $0) }
        return (items, body.root["hasMorePages"]?.boolValue ?? false)
    }
}
