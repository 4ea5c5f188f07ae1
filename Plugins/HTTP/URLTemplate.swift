import FeedKit
import Foundation

/// The `url` option of an `http` feed and how it pages: by `{page}`, `{offset}`, `{cursor}`, or
/// not at all (one document, or the next page's URL comes from the response).
struct URLTemplate: Sendable {
    enum Paging: Sendable, Equatable {
        /// `{page}`: 1, 2, 3 …
        case page
        /// `{offset}`: (page - 1) × page_size.
        case offset(pageSize: Int)
        /// `{cursor}`: the empty string on page 1, then whatever the previous page said.
        case cursor
        /// No placeholder: page 1 is the URL itself, later pages come from `next`.
        case none
    }

    let text: String
    let paging: Paging

    static let placeholders = ["{page}", "{offset}", "{cursor}"]

    /// Reads `url`; a template with more than one placeholder, or one that is not an http(s) URL
    /// once filled in, is an error about `url`.
    init(_ text: String, pageSize: Int, options: AdapterOptions) throws(OptionError) {
        let present = Self.placeholders.filter { text.contains($0) }
        guard present.count <= 1 else {
            throw options.invalid("url", "has \(present.joined(separator: " and ")); use one of {page}, {offset} or {cursor}")
        }
        self.text = text
        switch present.first {
        case "{page}"?: paging = .page
        case "{offset}"?: paging = .offset(pageSize: pageSize)
        case "{cursor}"?: paging = .cursor
        default: paging = .none
        }
        for sample in [PageLocation.number(1), .cursor("")] {
            guard let url = url(for: sample), ["http", "https"].contains(url.scheme ?? ""), url.host != nil else {
                throw options.invalid("url", "\"\(text)\" is not an http(s) URL template")
            }
        }
    }

    /// Where page 1 is.
    var firstPage: PageLocation {
        switch paging {
        case .page, .offset: return .number(1)
        case .cursor: return .cursor("")
        case .none: return .url(text)
        }
    }

    /// The URL of a page; nil only for a `url` location that does not parse.
    func url(for location: PageLocation) -> URL? {
        switch location {
        case .number(let page):
            switch paging {
            case .offset(let pageSize): return URL(string: fill(String((page - 1) * pageSize)))
            default: return URL(string: fill(String(page)))
            }
        case .cursor(let cursor):
            return URL(string: fill(cursor.addingPercentEncoding(withAllowedCharacters: Self.unreserved) ?? ""))
        case .url(let text):
            return URL(string: text)
        }
    }

    private func fill(_ value: String) -> String {
        Self.placeholders.reduce(text) { $0.replacingOccurrences(of: $1, with: value) }
    }

    /// RFC 3986's unreserved characters: a cursor is sent with everything else percent-encoded.
    private static let unreserved = CharacterSet(charactersIn: "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789-._~")
}

/// Where one page of an `http` feed is fetched from.
enum PageLocation: Sendable, Hashable, CustomStringConvertible {
    /// `{page}` or `{offset}`: computed from the page number.
    case number(Int)
    /// `{cursor}`: the cursor the previous page named.
    case cursor(String)
    /// An absolute URL: a `Link: rel="next"` target, or a `next` value that is a URL.
    case url(String)

    /// How a token writes it: `cursor …` or `url …`; nil for a page number, which needs no token.
    var tokenText: String? {
        switch self {
        case .number: return nil
        case .cursor(let cursor): return "cursor " + cursor
        case .url(let url): return "url " + url
        }
    }

    /// For messages: `page 3`, `cursor "c2"`, `next URL https://…`.
    var description: String {
        switch self {
        case .number(let page): return "page \(page)"
        case .cursor(let cursor): return "cursor \"\(cursor)\""
        case .url(let url): return "next URL \(url)"
        }
    }
}

/// The continuation token of an `http` feed's page: where it is, or, on a polled feed past its
/// end, "look at the previous page again first". Written as text, since tokens are opaque strings.
enum PageToken: Sendable, Hashable {
    case at(PageLocation)
    case recheck(previous: PageLocation)

    var text: String? {
        switch self {
        case .at(let location): return location.tokenText
        case .recheck(let previous): return "recheck " + (previous.tokenText ?? "page")
        }
    }

    /// The token for `request`, whose page number stands in when the token is nil.
    init(_ request: PageRequest, firstPage: PageLocation) {
        guard let text = request.token else {
            self = request.page == 1 ? .at(firstPage) : .at(.number(request.page))
            return
        }
        if text.hasPrefix("recheck ") {
            self = .recheck(previous: Self.location(text.dropFirst(8), page: request.page - 1))
        } else {
            self = .at(Self.location(Substring(text), page: request.page))
        }
    }

    private static func location(_ text: Substring, page: Int) -> PageLocation {
        if text.hasPrefix("cursor ") { return .cursor(String(text.dropFirst(7))) }
        if text.hasPrefix("url ") { return .url(String(text.dropFirst(4))) }
        return .number(page)
    }
}
