import FeedKit
import Foundation

/// The `rss` adapter: a feed document of any kind ``FeedDocument`` reads (RSS 0.90 to 2.0, RSS
/// 1.0, Atom 0.3 and 1.0, JSON Feed 1.x), found from the document itself (SPEC §9).
///
/// Each item is `{"title","link","published","updated","summary","author","categories"}` (see
/// ``FeedEntry``), with its id from `guid`, else `atom:id`, else `link`.
///
/// The first fetch pages the document's entries newest first (by `published`, else `updated`;
/// entries without either follow, in document order). Without `poll` that is the whole feed, and
/// its last page says `last`. With `poll`, the document is read again every `poll` with a
/// conditional GET (a `304` costs nothing), and the entries never published before become new
/// pages, newest first; an entry published once is never published again, even when the document
/// re-orders or edits it (see ``PublishedEntries`` for the memory that takes).
///
/// Pages are numbered by batch: the token `"B.P"` is page P of batch B, the entries one look at
/// the document found new. Page 1 is batch 1, page 1.
///
/// Options: `url` (required), `page_size` (default 20), `follow_redirects`, `html` (`"html"`,
/// the default, or `"text"` for plain-text summaries).
public struct RSSSource: SourceAdapter {
    public static let sourceName = "rss"
    public static let configKeys = [
        ConfigKey("url", .string, .required(example: "\"https://example.com/feed.xml\""), "the RSS, Atom or JSON Feed document's URL"),
        ConfigKey("page_size", .integer, .value("20"), "entries per page"),
        ConfigKey("html", .oneOf(["html", "text"]), .value("\"html\""), "summaries (and html titles) as the document has them, or as plain text"),
        RedirectPolicy.configKey,
    ]

    let url: URL
    let pageSize: Int
    let polls: Bool
    let plainText: Bool
    let http: HTTPSource
    let published: PublishedEntries
    let revalidation = RevalidationMemory()
    let pageBuffer = PageBuffer()

    public init(options: AdapterOptions, context: AdapterContext) throws {
        let text = try options.requiredString("url")
        guard let url = URL(string: text), ["http", "https"].contains(url.scheme ?? ""), url.host != nil else {
            throw options.invalid("url", "\"\(text)\" is not an http(s) URL")
        }
        self.url = url
        pageSize = try options.integer("page_size", in: 1...100_000) ?? 20
        switch try options.string("html") ?? "html" {
        case "html": plainText = false
        case "text": plainText = true
        case let other: throw options.invalid("html", "\"\(other)\" is neither \"html\" (summaries as the feed writes them) nor \"text\" (plain text)")
        }
        polls = context.pollInterval != nil
        var http = try context.http(options)
        http.headers = [
            "Accept": "application/rss+xml, application/atom+xml, application/feed+json, application/rdf+xml;q=0.9, application/xml;q=0.8, text/xml;q=0.8, application/json;q=0.8, */*;q=0.1"
        ]
        self.http = http
        // Without poll the document is read once and nothing is remembered between reads.
        published = PublishedEntries(directory: polls ? context.stateDirectory : nil, logger: context.logger)
    }

    /// False: a page is cut from the document as it was at one look. Without `poll` the document
    /// may have changed by the next look; with `poll` an entry is published once, and the batches
    /// a page is cut from live in this process only, so after a restart "batch 1, page 2" holds
    /// whatever the document has that was never published. The daemon keeps the pages instead.
    public var reproducesPages: Bool { false }

    public func fetch(_ request: PageRequest) async throws -> FetchResult {
        let (batchNumber, page) = Self.position(of: request.token)
        let generation = request.generation
        var found = published.batch(batchNumber, generation: generation)
        if found == nil {
            guard let entries = try await readDocument(generation: generation) else { return .notYet }
            found = published.makeBatch(batchNumber, firstPage: page, of: entries, generation: generation)
        }
        // A batch rebuilt after a restart starts at the page asked for: it holds what was never published.
        guard let batch = found, page >= batch.firstPage else { return polls ? .notYet : .page([], next: .end) }
        let index = page - batch.firstPage
        let pageCount = (batch.places.count + pageSize - 1) / pageSize
        guard index < pageCount else { return polls ? .notYet : .page([], next: .end) }
        let places = batch.places[index * pageSize..<min(batch.places.count, (index + 1) * pageSize)]
        // Each entry's JSON is written here, straight from the text the reader captured.
        let pageItems = pageBuffer.items(at: places, of: batch.entries.batches, morePages: index + 1 < pageCount)
        if polls { published.published(places, of: batch.entries, generation: generation) }
        if index + 1 < pageCount { return .page(pageItems, next: .more(token: "\(batchNumber).\(page + 1)")) }
        return .page(pageItems, next: polls ? .more(token: "\(batchNumber + 1).1") : .end)
    }

    /// The document's entries, in the order their pages take them; nil when a poll finds it
    /// unchanged (`304`). The document is read as it downloads (see
    /// ``FeedDocument/entries(arriving:context:)``).
    private func readDocument(generation: Int) async throws(SourceError) -> DocumentEntries? {
        let validators = polls ? revalidation.validators(for: url, generation: generation) : nil
        let read = try await http.get(url, ifChangedSince: validators) { response, body throws(SourceError) in
            let context = DocumentContext(
                url: url.absoluteString, contentType: response.headers["content-type"], contentLocation: response.headers["content-location"],
                plainText: plainText)
            do throws(FeedDocumentError) {
                return try FeedDocument.entryBatches(arriving: body, context: context)
            } catch {
                throw SourceError.rejected("the document from \(url.absoluteString) is \(error.description)")
            }
        }
        guard let (response, entries) = read else { return nil }
        if polls { revalidation.remember(response, from: url, generation: generation) }
        return DocumentEntries(entries)
    }

    /// The entries' items in the order their pages take them: by `published`, else `updated`,
    /// newest first; undated entries last, in document order.
    public static func itemsNewestFirst(_ entries: [FeedEntry]) -> [Item] {
        DocumentEntries.newestFirst(entries.map(\.time)).map { entries[$0].item }
    }

    /// `"B.P"`: batch B, page P; nil (page 1) is batch 1, page 1.
    private static func position(of token: String?) -> (batch: Int, page: Int) {
        let parts = token?.split(separator: ".").compactMap { Int($0) } ?? []
        guard parts.count == 2, parts[0] >= 1, parts[1] >= 1 else { return (1, 1) }
        return (parts[0], parts[1])
    }
}
