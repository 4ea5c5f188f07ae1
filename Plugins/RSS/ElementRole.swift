/// The kinds of feed document the reader knows, from their root element.
enum FeedFormat: Sendable {
    /// RSS 0.91 to 2.0: `<rss>`, in no namespace or any.
    case rss
    /// RSS 0.90 and 1.0: `<rdf:RDF>`.
    case rdf
    /// Atom 0.3 and 1.0: `<feed>`.
    case atom
    /// Microsoft's Channel Definition Format, RSS's forerunner: `<CHANNEL>` with `<ITEM HREF=…>`.
    case channelDefinition

    /// The format a root element names; nil for anything else.
    init?(rootNamespace namespace: String, name: String) {
        switch (namespace, name) {
        case (_, "rss"): self = .rss
        case (Namespace.rdf, "rdf"): self = .rdf
        case (_, "feed"): self = .atom
        case ("", "channel"): self = .channelDefinition
        default: return nil
        }
    }
}

/// Namespace URIs, lowercased (they are compared without case, as feedparser does).
enum Namespace {
    static let atom = "http://www.w3.org/2005/atom"
    static let atom03 = "http://purl.org/atom/ns#"
    static let rss1 = "http://purl.org/rss/1.0/"
    static let rss090 = "http://my.netscape.com/rdf/simple/0.9/"
    static let rdf = "http://www.w3.org/1999/02/22-rdf-syntax-ns#"
    static let dublinCore = "http://purl.org/dc/elements/1.1/"
    static let dublinCoreTerms = "http://purl.org/dc/terms/"
    static let content = "http://purl.org/rss/1.0/modules/content/"
    static let media = "http://search.yahoo.com/mrss/"
    static let itunes = "http://www.itunes.com/dtds/podcast-1.0.dtd"
    static let xhtml = "http://www.w3.org/1999/xhtml"

    /// The namespaces whose elements are a feed format's own (`title`, `link`, `item`…): none,
    /// RSS 1.0's and 0.90's, Atom's, the namespaces RSS 2.0 was given over the years, and Atom's
    /// drafts. The root element's own namespace is one too, whatever it is.
    static let feedFormats: Set<String> = [
        "", rss1, rss090, atom, atom03, "http://blogs.law.harvard.edu/tech/rss", "http://purl.org/rss/1.0/modules/rss091#",
        "http://purl.org/echo/", "http://purl.org/pie/", "http://example.com/newformat#", "http://example.com/necho",
        "uri/of/echo/namespace#",
    ]

    /// Whether `namespace` (lowercased) is a feed format's own, in a document whose root is in `root`.
    static func isFeedFormat(_ namespace: String, root: String) -> Bool {
        namespace == root || feedFormats.contains(namespace) || namespace.hasPrefix("http://backend.userland.com/rss")
    }
}

/// What an element means to the reader, by its namespace and local name; which of these count
/// depends on where the element is (see ``XMLEntryReader``).
enum ElementRole: UInt8, Sendable {
    case other
    /// RSS `item`, Atom `entry`.
    case entry
    case title, dublinCoreTitle, mediaTitle
    /// RSS `link` (its text) or Atom `link` (its `href`).
    case link
    /// RSS `description`: HTML unless it says otherwise.
    case description
    /// Atom `summary`, CDF `abstract`: text unless it says otherwise.
    case summary
    case dublinCoreDescription, mediaDescription, itunesSummary
    /// Atom `content`: text unless it says otherwise.
    case content
    /// `content:encoded` (and the `body` and `fullitem` of old RSS variants): HTML.
    case encodedContent
    /// XHTML `body`: inline XHTML.
    case xhtmlBody
    /// RSS `pubDate`, Atom `published`, Atom 0.3 `issued`, `dcterms:issued`.
    case published
    /// Atom `updated`, Atom 0.3 `modified`, `dcterms:modified`.
    case updated
    case dublinCoreDate
    /// RSS `author` (text) or Atom `author` (a person with a `name`).
    case author
    case dublinCoreCreator, itunesAuthor
    /// A person's `name` and `email`, inside an Atom `author`.
    case personName, personEmail
    /// RSS `category` (text) or Atom `category` (`term`).
    case category
    case dublinCoreSubject, mediaCategory
    /// `itunes:category`, whose category is its `text` attribute.
    case itunesCategory
    case guid
    /// Atom `id`.
    case id
    /// `media:group` and `media:content`, which may hold `media:title`, `media:description` and
    /// `media:category` for their entry.
    case mediaContainer

    /// The role of `name` (lowercased, as feedparser reads names) in `namespace` (lowercased) in
    /// a document whose root is in `root`.
    init(namespace: String, name: String, root: String) {
        if Namespace.isFeedFormat(namespace, root: root) {
            self = Self.feedFormatRoles[name] ?? .other
            return
        }
        switch (namespace, name) {
        case (Namespace.dublinCore, "title"): self = .dublinCoreTitle
        case (Namespace.dublinCore, "description"): self = .dublinCoreDescription
        case (Namespace.dublinCore, "date"): self = .dublinCoreDate
        case (Namespace.dublinCore, "creator"), (Namespace.dublinCore, "author"): self = .dublinCoreCreator
        case (Namespace.dublinCore, "subject"): self = .dublinCoreSubject
        case (Namespace.dublinCoreTerms, "issued"): self = .published
        case (Namespace.dublinCoreTerms, "modified"): self = .updated
        case (Namespace.content, "encoded"): self = .encodedContent
        case (Namespace.xhtml, "body"): self = .xhtmlBody
        case (Namespace.itunes, "author"): self = .itunesAuthor
        case (Namespace.itunes, "summary"): self = .itunesSummary
        case (Namespace.itunes, "category"): self = .itunesCategory
        case (Namespace.media, "title"), (String(Namespace.media.dropLast()), "title"): self = .mediaTitle
        case (Namespace.media, "description"), (String(Namespace.media.dropLast()), "description"): self = .mediaDescription
        case (Namespace.media, "category"), (String(Namespace.media.dropLast()), "category"): self = .mediaCategory
        case (Namespace.media, "group"), (Namespace.media, "content"), (String(Namespace.media.dropLast()), "group"),
            (String(Namespace.media.dropLast()), "content"):
            self = .mediaContainer
        default: self = .other
        }
    }

    private static let feedFormatRoles: [String: ElementRole] = [
        "item": .entry, "entry": .entry, "title": .title, "link": .link,
        "description": .description, "summary": .summary, "abstract": .summary,
        "content": .content, "body": .encodedContent, "fullitem": .encodedContent,
        "pubdate": .published, "published": .published, "issued": .published,
        "updated": .updated, "modified": .updated,
        "author": .author, "name": .personName, "email": .personEmail,
        "category": .category, "guid": .guid, "id": .id,
    ]

    /// Whether the element holds text the reader collects (rather than attributes only, or
    /// other elements).
    var capturesText: Bool {
        switch self {
        case .other, .entry, .mediaContainer, .itunesCategory: false
        default: true
        }
    }

    /// Whether the element's text may be markup (an Atom text construct, a description, content),
    /// so that child elements inside it are kept as markup rather than dropped.
    var holdsMarkup: Bool {
        switch self {
        case .title, .dublinCoreTitle, .mediaTitle, .description, .summary, .dublinCoreDescription, .mediaDescription, .itunesSummary,
            .content, .encodedContent, .xhtmlBody:
            true
        default: false
        }
    }

    /// How the element's text is written when its `type` does not say: RSS's descriptions and
    /// `content:encoded` are HTML, Atom's text constructs text (feedparser reads them so).
    var defaultKind: TextKind {
        switch self {
        case .description, .dublinCoreDescription, .mediaDescription, .encodedContent: .html
        case .xhtmlBody: .markup
        default: .text
        }
    }

    /// The field the element fills and its priority there (0 first): a fallback such as
    /// `dc:title` counts only when the entry has no `title`.
    var slot: (field: Field, priority: UInt8)? {
        switch self {
        case .title: (.title, 0)
        case .dublinCoreTitle: (.title, 1)
        case .mediaTitle: (.title, 2)
        case .link: (.link, 0)
        case .description, .summary: (.summary, 0)
        case .dublinCoreDescription: (.summary, 1)
        case .itunesSummary: (.summary, 2)
        case .mediaDescription: (.summary, 3)
        case .content, .encodedContent, .xhtmlBody: (.content, 0)
        case .published: (.published, 0)
        case .updated: (.updated, 0)
        case .dublinCoreDate: (.date, 0)
        case .author: (.author, 0)
        case .dublinCoreCreator: (.author, 1)
        case .itunesAuthor: (.author, 2)
        case .guid: (.guid, 0)
        case .id: (.id, 0)
        default: nil
        }
    }

    /// Whether the element's text is a category.
    var isCategory: Bool {
        self == .category || self == .dublinCoreSubject || self == .mediaCategory
    }
}
