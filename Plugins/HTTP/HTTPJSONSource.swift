import FeedKit
import Foundation

/// The `http` adapter: any paged JSON API (SPEC §9).
///
/// The URL template pages by `{page}` (1, 2, 3 …), `{offset}` ((page - 1) × `page_size`) or
/// `{cursor}` (empty on page 1, then the `next` value of the page before); without a placeholder,
/// page 1 is the URL itself and later pages are wherever `next` points. `items` is the dot path of
/// the item array (`""`: the body is the array), `id` the dot path of an item's id (else a hash of
/// the item), and `next` the dot path of the next cursor (or, without `{cursor}`, of the next
/// page's URL, or with `{page}`/`{offset}` of anything that is not null, false or "" while more
/// pages follow), or `"link"` for the `Link: <…>; rel="next"` header.
///
/// The feed ends at an empty page, a missing `next` value or a response without a next link.
/// With `poll` it never ends: an empty last page is asked for again every `poll`, and after a
/// last page with items that page is, until it names a next page; each such look is a
/// conditional GET, and a `304` publishes nothing.
///
/// Every URL fetched, whatever named it, must be on the origin of `url` (``OriginPolicy``), and
/// a walk that comes back to a cursor or next-page URL of an earlier page stops with an error
/// (``CursorHistory``).
///
/// Options: `url` (required), `items`, `id`, `next`, `page_size` (for `{offset}`, default 20),
/// `headers` (a table of header fields), `bearer_token_file` (read here, when the feed is
/// configured, so again on every reload; never logged), `follow_other_hosts`, `follow_redirects`.
public struct HTTPJSONSource: SourceAdapter {
    public static let sourceName = "http"
    public static let configKeys = [
        ConfigKey(
            "url", .string, .required(example: "\"https://api.example.com/v1/posts?page={page}\""),
            "the URL template, with at most one of {page}, {offset} and {cursor}"),
        ConfigKey("items", .string, .value("\"\""), "dot path to the array of items; \"\": the body is the array"),
        ConfigKey("id", .string, .unset, "dot path inside an item to its id; unset or missing: a hash of the item"),
        ConfigKey("next", .string, .unset, "dot path to the next cursor or URL (required with {cursor}), or \"link\" for the Link header"),
        ConfigKey("page_size", .integer, .value("20"), "items per page, for {offset}"),
        ConfigKey("headers", .stringTable, .value("{}"), "header fields sent with every request"),
        ConfigKey("bearer_token_file", .path(.file), .unset, "a file holding a token sent as Authorization: Bearer, read at start and on reload"),
        ConfigKey(
            "follow_other_hosts", .boolean, .value("false"),
            "fetch next pages on other origins than url's (without the bearer token or headers); redirects default to any_host"),
        RedirectPolicy.configKey,
    ]

    /// How a page says a next page follows.
    enum NextRule: Sendable {
        /// Only an empty page ends the feed (`{page}` or `{offset}`).
        case none
        /// The `Link` header's `rel="next"` target.
        case link
        /// A dot path into the body.
        case path(DotPath)
    }

    let template: URLTemplate
    let itemsPath: DotPath
    let idPath: DotPath?
    let next: NextRule
    let polls: Bool
    let http: HTTPSource
    let tokenFile: String?
    let origins: OriginPolicy
    let cursors: CursorHistory
    let revalidation = RevalidationMemory()

    /// One request and the parse of its page: on the transport's thread.
    public var fetchExecutor: (any TaskExecutor)? { http.executor }

    public init(options: AdapterOptions, context: AdapterContext) throws {
        let pageSize = try options.integer("page_size", in: 1...100_000) ?? 20
        template = try URLTemplate(try options.requiredString("url"), pageSize: pageSize, options: options)
        itemsPath = try Self.dotPath(options, "items") ?? DotPath("")!
        idPath = try Self.dotPath(options, "id")
        next = try Self.nextRule(options)
        switch (template.paging, next) {
        case (.cursor, .none), (.cursor, .link):
            throw options.invalid("next", "must be the dot path of the next cursor, since url has {cursor}")
        default:
            break
        }
        polls = context.pollInterval != nil
        origins = try OriginPolicy(firstPage: template.url(for: template.firstPage)!, options: options)
        cursors = CursorHistory.shared(feed: context.feed, template: template.text, directory: context.stateDirectory, logger: context.logger)
        var http = try context.http(options)
        // Following other hosts means redirects to them too, unless the feed says otherwise.
        if origins.followsOtherHosts, options.value("follow_redirects") == nil { http.redirects = .anyHost }
        http.headers = try Self.headers(options)
        tokenFile = try options.string("bearer_token_file")
        if let tokenFile { http.bearerToken = try BearerTokenFile.read(tokenFile, options: options) }
        self.http = http
    }

    public var pageAddressing: PageAddressing {
        switch template.paging {
        case .page, .offset: return .direct
        case .cursor, .none: return .sequential
        }
    }

    /// True only for pages addressed by number (`{page}`, `{offset}`) of a feed that is not
    /// polled: page N is an address the API answers the same way again. Not for a cursor or a
    /// next-page URL (`{cursor}`, `next = "link"` or a `next` URL): those are the API's own
    /// promises, which many APIs let expire or resolve against data that has moved on. Not with
    /// `poll` either: a polled API is live, and the page at an address grows and changes (its
    /// last page is looked at again until it names a next one).
    public var reproducesPages: Bool {
        switch template.paging {
        case .page, .offset: return !polls
        case .cursor, .none: return false
        }
    }

    public func fetch(_ request: PageRequest) async throws -> FetchResult {
        var location: PageLocation
        switch PageToken(request, firstPage: template.firstPage) {
        case .at(let given):
            location = given
        case .recheck(let previous):
            guard let page = try await page(at: previous, number: request.page - 1, of: request), !page.items.isEmpty,
                let following = page.next
            else {
                return .notYet
            }
            location = following
        }
        guard let page = try await page(at: location, number: request.page, of: request) else { return .notYet }
        if page.items.isEmpty { return polls ? .notYet : .page([], next: .end) }
        guard let following = page.next else {
            return .page(page.items, next: polls ? .more(token: PageToken.recheck(previous: location).text) : .end)
        }
        try cursors.follow(following, after: request.page, url: page.url, generation: CursorHistory.Generation(request))
        return .page(page.items, next: .more(token: PageToken.at(following).text))
    }

    /// Page `number` of `request`'s generation, at `location`: its items and where the next one is
    /// (nil: none follows); nil when a conditional GET of a page that ended the feed answers that
    /// it has not changed.
    private func page(at location: PageLocation, number: Int, of request: PageRequest) async throws(SourceError) -> (
        items: [Item], next: PageLocation?, url: URL
    )? {
        let (url, http) = try client(for: location, number: number, of: request)
        let validators = polls ? revalidation.validators(for: url, generation: request.generation) : nil
        guard let response = try await http.get(url, ifChangedSince: validators) else { return nil }
        let body = try HTTPSource.json(in: response, from: url)
        let items = try Self.items(in: body, at: itemsPath, ids: idPath, from: url)
        let following = try nextLocation(after: location, body: body, response: response, url: url)
        if polls, items.isEmpty || following == nil { revalidation.remember(response, from: url, generation: request.generation) }
        return (items, following, url)
    }

    /// The URL of page `number` at `location` and the client to GET it with, once the origin
    /// policy and the cursor history have let it be fetched.
    private func client(for location: PageLocation, number: Int, of request: PageRequest) throws(SourceError) -> (URL, HTTPSource) {
        guard let url = template.url(for: location) else {
            throw SourceError.rejected("page \(number) would be fetched from \(location), which is not a URL")
        }
        var http = http
        if let tokenFile { http.bearerToken = BearerTokenFile.token(in: tokenFile) ?? http.bearerToken }
        http = try origins.client(http, for: url, page: number)
        try cursors.enter(location, page: number, url: url, generation: CursorHistory.Generation(request))
        return (url, http)
    }

    /// The items of a page body: the array at `path`, each as the upstream wrote it, with its id
    /// at `ids` (else a hash of it). A body without an array there is rejected, naming the URL
    /// and the path.
    public static func items(in body: JSONDocument, at path: DotPath, ids: DotPath?, from url: URL) throws(SourceError) -> [Item] {
        guard let entries = body.root.value(at: path)?.elements else {
            throw SourceError.rejected("the body from \(url.absoluteString) has no array at items = \"\(path)\"")
        }
        return entries.map { entry in
            let id = ids.flatMap(entry.value(at:))
            return id?.stringValue == "" ? Item(hashing: entry) : Item(id: id, data: entry)
        }
    }

    /// Where the page after the one at `location` is, by the `next` rule; nil when none follows.
    private func nextLocation(after location: PageLocation, body: JSONDocument, response: HTTPResponse, url: URL) throws(SourceError) -> PageLocation? {
        let following: PageLocation?
        switch next {
        case .none:
            following = location.numbered { .number($0 + 1) }
        case .link:
            guard let target = response.headers["link"].flatMap({ LinkHeader($0).target(relation: "next") }) else { return nil }
            if let numbered = location.numbered({ .number($0 + 1) }) { return numbered }
            following = .url(try Self.resolve(target, against: url, what: "the Link rel=\"next\" target"))
        case .path(let path):
            guard let value = body.root.value(at: path), !value.isNull, value.boolValue != false, value.stringValue != "" else { return nil }
            if let numbered = location.numbered({ .number($0 + 1) }) { return numbered }
            let text = try Self.cursor(value, at: path, from: url)
            following = template.paging == .cursor ? .cursor(text) : .url(try Self.resolve(text, against: url, what: "the next URL at \"\(path)\""))
        }
        return following
    }

    /// The next cursor a body's `value` at `path` names: a string, or an integer as written (of
    /// any size). Anything else is rejected.
    private static func cursor(_ value: JSONElement, at path: DotPath, from url: URL) throws(SourceError) -> String {
        if let string = value.stringValue { return string }
        if value.isInteger { return value.jsonText }
        throw SourceError.rejected("the body from \(url.absoluteString) has \(value.typeDescription) at next = \"\(path)\", not a cursor")
    }

    /// `reference` made absolute against the URL of the page that named it; it must be http(s).
    private static func resolve(_ reference: String, against url: URL, what: String) throws(SourceError) -> String {
        guard let resolved = URL(string: reference, relativeTo: url)?.absoluteURL, ["http", "https"].contains(resolved.scheme ?? ""),
            resolved.host != nil
        else {
            throw SourceError.rejected("\(what) \"\(reference)\" from \(url.absoluteString) is not an http(s) URL")
        }
        return resolved.absoluteString
    }

    private static func dotPath(_ options: AdapterOptions, _ key: String) throws(OptionError) -> DotPath? {
        guard let text = try options.string(key) else { return nil }
        guard let path = DotPath(text) else {
            throw options.invalid(key, "\"\(text)\" is not a dot path (names and array indexes between dots, such as \"data.0.id\")")
        }
        return path
    }

    private static func nextRule(_ options: AdapterOptions) throws(OptionError) -> NextRule {
        if try options.string("next") == "link" { return .link }
        return try dotPath(options, "next").map(NextRule.path) ?? .none
    }

    /// `Accept: application/json` and the `headers` table, whose names must be HTTP tokens and
    /// whose values may not break a line.
    private static func headers(_ options: AdapterOptions) throws(OptionError) -> [String: String] {
        var headers = ["Accept": "application/json"]
        guard let value = options.value("headers") else { return headers }
        guard let table = value.objectValue else { throw options.invalid("headers", "expected a table of strings, got \(value.typeDescription)") }
        for (name, value) in table.sorted(by: { $0.key < $1.key }) {
            guard let text = value.stringValue else {
                throw options.invalid("headers", "\(name): expected a string, got \(value.typeDescription)")
            }
            guard !name.isEmpty, name.utf8.allSatisfy(Self.isTokenCharacter) else {
                throw options.invalid("headers", "\"\(name)\" is not a header field name")
            }
            guard !text.unicodeScalars.contains(where: { $0.value < 0x20 && $0 != "\t" || $0.value == 0x7F }) else {
                throw options.invalid("headers", "\(name): a header value may not hold a line break or another control character")
            }
            if name.lowercased() == "accept" { headers["Accept"] = nil }
            headers[name] = text
        }
        return headers
    }

    private static func isTokenCharacter(_ byte: UInt8) -> Bool {
        (0x21...0x7E).contains(byte) && !Array("\"(),/:;<=>?@[\\]{}".utf8).contains(byte)
    }
}

extension PageLocation {
    /// `transform` of the page number, for pages addressed by number; nil for the others.
    func numbered(_ transform: (Int) -> PageLocation) -> PageLocation? {
        if case .number(let page) = self { return transform(page) }
        return nil
    }
}
