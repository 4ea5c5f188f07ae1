import CLibXML2
import FeedKit
import Foundation

/// Why a document gave no entries: it is not well-formed XML, or not RSS or Atom.
public struct FeedDocumentError: Error, Sendable, Hashable, CustomStringConvertible {
    public let description: String
}

/// The entries of an RSS 2.0, RSS 1.0 (RDF) or Atom 1.0 document, in document order, read with
/// libxml2's SAX2 parser with namespaces resolved, so `content:encoded`, `dc:creator` and
/// `dc:date` are known by their namespace whatever prefix a document gives them.
///
/// Text is kept as text: entities are decoded, CDATA sections taken as they are, and escaped HTML
/// in a description stays the HTML text it stands for. An Atom `type="xhtml"` element's content
/// is kept as XHTML markup. Nothing is fetched from the network (no DTD, no external entity), and
/// nothing is expanded: the reader keeps no declarations, so a document that uses an entity its
/// DTD declares is refused as not well-formed.
///
/// libxml2 directly rather than Foundation's XMLParser: on malformed input XMLParser crashed (a
/// name that is not UTF-8) and leaked an error object per document; the fuzzer found both.
public enum FeedDocument {
    public static func entries(in bytes: [UInt8]) throws(FeedDocumentError) -> [FeedEntry] {
        _ = libraryReady
        guard bytes.count < Int(Int32.max) else { throw FeedDocumentError(description: "larger than 2 GiB") }
        let reader = EntryReader()
        var handler = EntryReader.makeHandler()
        let result = withExtendedLifetime(reader) {
            bytes.withUnsafeBufferPointer { buffer in
                buffer.withMemoryRebound(to: CChar.self) { text in
                    feedd_xml_parse(&handler, Unmanaged.passUnretained(reader).toOpaque(), text.baseAddress, Int32(text.count))
                }
            }
        }
        if let problem = reader.problem { throw FeedDocumentError(description: problem) }
        guard result == 0 else { throw FeedDocumentError(description: "not well-formed XML") }
        guard reader.sawFeedRoot else { throw FeedDocumentError(description: "empty, not an RSS or Atom document") }
        return reader.entries
    }

    /// libxml2 sets up its global state once, before any thread parses.
    private static let libraryReady: Void = xmlInitParser()
}

/// The namespaces the reader knows elements of.
private enum Namespace {
    static let atom = "http://www.w3.org/2005/Atom"
    static let rss1 = "http://purl.org/rss/1.0/"
    static let rss090 = "http://my.netscape.com/rdf/simple/0.9/"
    static let rdf = "http://www.w3.org/1999/02/22-rdf-syntax-ns#"
    static let dublinCore = "http://purl.org/dc/elements/1.1/"
    static let content = "http://purl.org/rss/1.0/modules/content/"
}

/// The entry fields whose text the reader collects.
private enum Field {
    case title, link, description, content, published, dublinCoreDate, updated, author, dublinCoreCreator, atomAuthor, category
    case guid, atomID

    /// The field an element directly inside an entry is, by namespace and local name.
    init?(namespace: String, name: String) {
        switch (namespace, name) {
        case ("", "title"), (Namespace.rss1, "title"), (Namespace.rss090, "title"), (Namespace.atom, "title"): self = .title
        case ("", "link"), (Namespace.rss1, "link"), (Namespace.rss090, "link"): self = .link
        case ("", "description"), (Namespace.rss1, "description"), (Namespace.atom, "summary"): self = .description
        case (Namespace.content, "encoded"), (Namespace.atom, "content"): self = .content
        case ("", "pubDate"), (Namespace.atom, "published"): self = .published
        case (Namespace.dublinCore, "date"): self = .dublinCoreDate
        case (Namespace.atom, "updated"): self = .updated
        case ("", "author"): self = .author
        case (Namespace.dublinCore, "creator"): self = .dublinCoreCreator
        case (Namespace.atom, "author"): self = .atomAuthor
        case ("", "category"), (Namespace.dublinCore, "subject"): self = .category
        case ("", "guid"): self = .guid
        case (Namespace.atom, "id"): self = .atomID
        default: return nil
        }
    }
}

/// The SAX side: walks the document's elements and fills one ``FeedEntry`` per item or entry.
/// Used by one parse on one thread, from libxml2's callbacks.
private final class EntryReader {
    private(set) var entries: [FeedEntry] = []
    private(set) var problem: String?
    private(set) var sawFeedRoot = false

    /// What one entry has so far, before the fallbacks between fields are settled.
    private struct PendingEntry {
        var entry = FeedEntry()
        var texts: [Field: String] = [:]
        var atomLink: String?
        let depth: Int
    }

    /// The entry field being read: its element's depth, and whether its text counts right now.
    private struct Capture {
        let field: Field
        let depth: Int
        /// Atom `type="xhtml"`: child elements are kept as markup, but for the one `div` that
        /// wraps them (RFC 4287, 3.1.1.3).
        let keepsMarkup: Bool
        /// An Atom author's text is its `name` child's only.
        var counting: Bool
        var text = ""
    }

    private var depth = 0
    private var pending: PendingEntry?
    private var capture: Capture?

    /// libxml2's callbacks: each finds its reader in the context pointer. Names and text are
    /// decoded with replacement characters, so bytes that are not UTF-8 cannot trap.
    static func makeHandler() -> xmlSAXHandler {
        var handler = xmlSAXHandler()
        handler.initialized = UInt32(XML_SAX2_MAGIC)
        handler.startElementNs = { context, localName, prefix, uri, _, _, attributeCount, _, attributes in
            var values: [String: String] = [:]
            if let attributes {
                // Five pointers per attribute: local name, prefix, URI, value start, value end.
                for index in 0..<Int(attributeCount) {
                    guard let name = attributes[index * 5], let start = attributes[index * 5 + 3], let end = attributes[index * 5 + 4] else { continue }
                    values[EntryReader.text(name)] = String(decoding: UnsafeBufferPointer(start: start, count: end - start), as: UTF8.self)
                }
            }
            let qualifiedName = prefix.map { "\(EntryReader.text($0)):\(EntryReader.text(localName))" } ?? EntryReader.text(localName)
            EntryReader.reader(context).start(EntryReader.text(localName), namespace: uri.map(EntryReader.text) ?? "", qualifiedName: qualifiedName, attributes: values)
        }
        handler.endElementNs = { context, localName, _, uri in
            EntryReader.reader(context).end(EntryReader.text(localName), namespace: uri.map(EntryReader.text) ?? "")
        }
        handler.characters = { context, bytes, count in
            EntryReader.reader(context).text(String(decoding: UnsafeBufferPointer(start: bytes, count: Int(count)), as: UTF8.self))
        }
        handler.cdataBlock = handler.characters
        handler.serror = { context, error in
            guard let error, error.pointee.level.rawValue >= XML_ERR_ERROR.rawValue else { return }
            EntryReader.reader(context).fail(line: Int(error.pointee.line), column: Int(error.pointee.int2))
        }
        return handler
    }

    private static func reader(_ context: UnsafeMutableRawPointer?) -> EntryReader {
        Unmanaged<EntryReader>.fromOpaque(context!).takeUnretainedValue()
    }

    private static func text(_ bytes: UnsafePointer<xmlChar>?) -> String {
        guard let bytes else { return "" }
        return String(decoding: UnsafeBufferPointer(start: bytes, count: strlen(UnsafeRawPointer(bytes).assumingMemoryBound(to: CChar.self))), as: UTF8.self)
    }

    // Once there is a problem the rest of the document is ignored (libxml2 stops calling after
    // a fatal error anyway).

    private func start(_ name: String, namespace: String, qualifiedName: String, attributes: [String: String]) {
        guard problem == nil else { return }
        depth += 1
        if depth == 1 {
            switch (namespace, name) {
            case ("", "rss"), (Namespace.rdf, "RDF"), (Namespace.atom, "feed"):
                sawFeedRoot = true
            default:
                problem = "not an RSS or Atom document (its root element is <\(qualifiedName)>)"
            }
            return
        }
        guard var entry = pending else {
            if (namespace, name) == ("", "item") || (namespace, name) == (Namespace.rss1, "item") || (namespace, name) == (Namespace.rss090, "item")
                || (namespace, name) == (Namespace.atom, "entry")
            {
                pending = PendingEntry(depth: depth)
            }
            return
        }
        if var current = capture {
            if current.keepsMarkup, !Self.isXHTMLWrapper(name, depth: depth, in: current) {
                current.text += "<\(name)" + attributes.sorted { $0.key < $1.key }.map { " \($0.key)=\"\(Self.escaped($0.value))\"" }.joined() + ">"
            } else if current.field == .atomAuthor, (namespace, name) == (Namespace.atom, "name") {
                current.counting = true
            }
            capture = current
            return
        }
        guard depth == entry.depth + 1 else { return }
        if (namespace, name) == (Namespace.atom, "link") {
            // rel defaults to "alternate": the entry's own page.
            if (attributes["rel"] ?? "alternate") == "alternate", entry.atomLink == nil { entry.atomLink = attributes["href"] }
            pending = entry
            return
        }
        if (namespace, name) == (Namespace.atom, "category") {
            if let term = attributes["term"], !term.isEmpty { entry.entry.categories.append(term) }
            pending = entry
            return
        }
        guard let field = Field(namespace: namespace, name: name) else { return }
        capture = Capture(field: field, depth: depth, keepsMarkup: attributes["type"] == "xhtml", counting: field != .atomAuthor)
    }

    private func fail(line: Int, column: Int) {
        guard problem == nil else { return }
        problem = "not well-formed XML at line \(line), column \(column)"
    }

    private func end(_ name: String, namespace: String) {
        guard problem == nil else { return }
        defer { depth -= 1 }
        if var current = capture {
            if depth == current.depth {
                finish(current)
                capture = nil
            } else {
                if current.keepsMarkup, !Self.isXHTMLWrapper(name, depth: depth, in: current) { current.text += "</\(name)>" }
                if current.field == .atomAuthor, (namespace, name) == (Namespace.atom, "name") { current.counting = false }
                capture = current
            }
            return
        }
        if let entry = pending, depth == entry.depth {
            entries.append(settle(entry))
            pending = nil
        }
    }

    private func text(_ string: String) {
        guard problem == nil, var current = capture, current.counting else { return }
        current.text += current.keepsMarkup ? Self.escaped(string) : string
        capture = current
    }

    /// Files a field's text; the first of each kind wins, categories add up.
    private func finish(_ current: Capture) {
        let text = current.text.trimmingCharacters(in: .whitespacesAndNewlines)
        guard !text.isEmpty, var entry = pending else { return }
        if current.field == .category {
            entry.entry.categories.append(text)
        } else if entry.texts[current.field] == nil {
            entry.texts[current.field] = text
        }
        pending = entry
    }

    /// The entry with its fallbacks: summary from the description, else the content; the
    /// publication time from `pubDate`/`published`, else `dc:date`; the author from `author`, else
    /// `dc:creator`; the link from `link`, else Atom's alternate link.
    private func settle(_ pending: PendingEntry) -> FeedEntry {
        var entry = pending.entry
        let texts = pending.texts
        entry.title = texts[.title]
        entry.link = texts[.link] ?? pending.atomLink
        entry.summary = texts[.description] ?? texts[.content]
        entry.published = texts[.published].flatMap(FeedTime.init) ?? texts[.dublinCoreDate].flatMap(FeedTime.init)
        entry.updated = texts[.updated].flatMap(FeedTime.init)
        entry.author = texts[.author] ?? texts[.atomAuthor] ?? texts[.dublinCoreCreator]
        entry.guid = texts[.guid]
        entry.atomID = texts[.atomID]
        return entry
    }

    private static func isXHTMLWrapper(_ name: String, depth: Int, in capture: Capture) -> Bool {
        name == "div" && depth == capture.depth + 1
    }

    private static func escaped(_ text: String) -> String {
        text.replacingOccurrences(of: "&", with: "&amp;").replacingOccurrences(of: "<", with: "&lt;")
            .replacingOccurrences(of: ">", with: "&gt;").replacingOccurrences(of: "\"", with: "&quot;")
    }
}
