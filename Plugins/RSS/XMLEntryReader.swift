import CLibXML2
import FeedKit

/// Reads the entries of an RSS, RDF, Atom or CDF document with libxml2's SAX2 parser, namespaces
/// resolved, so `content:encoded` or `dc:date` are known by their namespace whatever prefix a
/// document gives them. One reader reads one document, on one thread, from libxml2's callbacks.
///
/// An entry's fields come from the elements directly inside it (a `title` inside the entry's
/// `source` or `image` is not the entry's), but for a person's `name` inside `author` and the
/// Media RSS elements inside `media:group` or `media:content`. Element names are compared without
/// case, as feedparser compares them (`<TITLE>` in CDF).
///
/// Nothing is fetched (no DTD, no external entity) and nothing declared is ever expanded: a
/// document using an entity its internal DTD declares is not well-formed to this reader. Where a
/// document names an external DTD (RSS 0.91's, which declares HTML's entities), an undeclared
/// entity such as `&eacute;` is read as the HTML character it names.
final class XMLEntryReader {
    let context: DocumentContext
    private(set) var entries: [FeedEntry] = []
    private(set) var problem: String?
    private(set) var format: FeedFormat?
    private var parser: xmlParserCtxtPtr?

    private(set) var depth = 0
    private var rootNamespace = ""
    /// Roles by libxml2's interned name and namespace pointers, so each distinct element name is
    /// looked at as text once per document.
    private var roles: [ElementKey: ElementRole] = [:]
    /// The depth of the entry being read, 0 outside entries.
    private var entryDepth = 0
    /// The depth of the outermost `media:group` or `media:content` in the entry, 0 if none is open.
    private var mediaDepth = 0
    /// The depth of the outermost `itunes:category` in the entry, 0 if none is open.
    private var categoryDepth = 0
    /// `xml:base` in force, innermost last, with the depth of the element that set it.
    private var bases: [(depth: Int, uri: String)] = []
    var fields = EntryFields()
    var capture: FieldCapture?
    /// The text of the field being captured.
    var buffer: [UInt8] = []
    var person = PersonCapture()
    /// Whether the entry's `guid` is its link too (RSS 2.0's `isPermaLink`, true unless it says false).
    var guidIsPermalink = true

    private init(context: DocumentContext) {
        self.context = context
    }

    /// The entries of the UTF-8 document `bytes`, in document order.
    static func entries(in bytes: UnsafeBufferPointer<UInt8>, context: DocumentContext) throws(FeedDocumentError) -> [FeedEntry] {
        _ = libraryReady
        guard bytes.count < Int(Int32.max) else { throw FeedDocumentError(description: "larger than 2 GiB") }
        let reader = XMLEntryReader(context: context)
        let result = withExtendedLifetime(reader) { () -> Int32 in
            bytes.withMemoryRebound(to: CChar.self) { text in
                let created = withUnsafePointer(to: handler) {
                    feedd_xml_parser($0, Unmanaged.passUnretained(reader).toOpaque(), text.baseAddress, Int32(text.count))
                }
                guard let parser = created else { return -1 }
                reader.parser = parser
                defer {
                    reader.parser = nil
                    xmlFreeParserCtxt(parser)
                }
                return feedd_xml_run(parser)
            }
        }
        if let problem = reader.problem { throw FeedDocumentError(description: problem) }
        guard result == 0 else { throw FeedDocumentError(description: "not well-formed XML") }
        guard reader.format != nil else { throw FeedDocumentError(description: "empty, not an RSS, Atom or JSON Feed document") }
        return reader.entries
    }

    /// libxml2 sets up its global state once, before any thread parses.
    private static let libraryReady: Void = xmlInitParser()

    /// The callbacks: each finds its reader in the context pointer. Never changed once made (the
    /// parser copies it), so any thread may read it.
    nonisolated(unsafe) private static let handler: xmlSAXHandler = {
        var handler = xmlSAXHandler()
        handler.initialized = UInt32(XML_SAX2_MAGIC)
        handler.startElementNs = { context, name, prefix, uri, _, _, attributeCount, _, attributes in
            reader(context).start(name!, prefix: prefix, uri: uri, attributes: Attributes(pointer: attributes, count: Int(attributeCount)))
        }
        handler.endElementNs = { context, name, _, _ in
            reader(context).end(name!)
        }
        handler.characters = { context, bytes, count in
            reader(context).characters(UnsafeBufferPointer(start: bytes, count: Int(count)))
        }
        handler.cdataBlock = handler.characters
        handler.reference = { context, name in
            reader(context).reference(name)
        }
        handler.serror = { context, error in
            guard let error, error.pointee.level == XML_ERR_FATAL else { return }
            reader(context).fail(error.pointee)
        }
        return handler
    }()

    private static func reader(_ context: UnsafeMutableRawPointer?) -> XMLEntryReader {
        Unmanaged<XMLEntryReader>.fromOpaque(context!).takeUnretainedValue()
    }

    // MARK: Elements

    private func start(_ name: UnsafePointer<xmlChar>, prefix: UnsafePointer<xmlChar>?, uri: UnsafePointer<xmlChar>?, attributes: Attributes) {
        guard problem == nil else { return }
        depth += 1
        if depth == 1 {
            startRoot(name, prefix: prefix, uri: uri)
            guard problem == nil else { return }
        }
        // CDF writes `BASE`, with no namespace, for what XML writes `xml:base`.
        if attributes.count > 0, let base = attributes.value(of: "base", inXMLNamespace: format != .channelDefinition) { pushBase(base) }
        guard depth > 1 else { return }
        let role = role(of: name, uri: uri)
        guard entryDepth > 0 else {
            if role == .entry { startEntry(attributes) }
            return
        }
        if person.depth > 0, depth == person.depth + 1, role == .personName || role == .personEmail {
            person.start(role, depth: depth)
            return
        }
        if capture != nil { return startInCapture(name, uri: uri, attributes: attributes) }
        let direct = depth == entryDepth + 1
        switch role {
        case .mediaContainer where direct || mediaDepth > 0:
            if mediaDepth == 0 { mediaDepth = depth }
        case .mediaTitle, .mediaDescription, .mediaCategory:
            if direct || mediaDepth > 0 { startField(role, attributes: attributes) }
        case .itunesCategory where direct || categoryDepth > 0:
            if categoryDepth == 0 { categoryDepth = depth }
            if let text = attributes.value(of: "text") { fields.addCategory(Array(text.utf8)[...]) }
        default:
            if direct, role.capturesText { startField(role, attributes: attributes) }
        }
    }

    private func end(_ name: UnsafePointer<xmlChar>) {
        guard problem == nil else { return }
        defer {
            if bases.last?.depth == depth { bases.removeLast() }
            depth -= 1
        }
        if person.field != nil, depth == person.fieldDepth {
            person.field = nil
        } else if let capture {
            if depth == capture.depth {
                finishField()
            } else {
                endInCapture(name)
            }
        }
        if depth == mediaDepth { mediaDepth = 0 }
        if depth == categoryDepth { categoryDepth = 0 }
        if depth == entryDepth { finishEntry() }
    }

    private func characters(_ text: UnsafeBufferPointer<UInt8>) {
        guard problem == nil else { return }
        if person.field != nil, depth == person.fieldDepth {
            person.append(text)
            return
        }
        guard capture != nil else { return }
        captureText(text)
    }

    /// An entity the document does not declare, with an external DTD it may declare it in: read
    /// as HTML's entity of that name, if there is one (RSS 0.91's DTD declares HTML's).
    private func reference(_ name: UnsafePointer<xmlChar>?) {
        guard problem == nil, let name, let parser, feedd_xml_in_attribute(parser) == 0 else { return }
        let codePoint = name.withMemoryRebound(to: CChar.self, capacity: 1) { feedd_html_entity($0) }
        guard codePoint != 0, let scalar = Unicode.Scalar(codePoint) else { return }
        let utf8 = Array(String(Character(scalar)).utf8)
        utf8.withUnsafeBufferPointer { characters($0) }
    }

    private func fail(_ error: xmlError) {
        guard problem == nil else { return }
        var reason = ""
        if let message = error.message {
            reason = ": " + String(cString: message).trimmingCharacters(in: .whitespacesAndNewlines)
        }
        problem = "not well-formed XML at line \(error.line), column \(error.int2)\(reason)"
    }

    private func startRoot(_ name: UnsafePointer<xmlChar>, prefix: UnsafePointer<xmlChar>?, uri: UnsafePointer<xmlChar>?) {
        let namespace = uri.map { String(cString: $0).lowercased() } ?? ""
        let local = String(cString: name).lowercased()
        guard let format = FeedFormat(rootNamespace: namespace, name: local) else {
            let qualified = prefix.map { "\(String(cString: $0)):" } ?? ""
            problem = "not an RSS, Atom or JSON Feed document (its root element is <\(qualified)\(String(cString: name))>)"
            return
        }
        self.format = format
        rootNamespace = format == .rdf ? "" : namespace
    }

    private func role(of name: UnsafePointer<xmlChar>, uri: UnsafePointer<xmlChar>?) -> ElementRole {
        let key = ElementKey(name: UInt(bitPattern: name), namespace: UInt(bitPattern: uri))
        if let role = roles[key] { return role }
        let role = ElementRole(
            namespace: uri.map { String(cString: $0).lowercased() } ?? "", name: String(cString: name).lowercased(), root: rootNamespace)
        roles[key] = role
        return role
    }

    // MARK: Entries

    private func startEntry(_ attributes: Attributes) {
        entryDepth = depth
        fields.reset()
        guidIsPermalink = true
        // CDF puts an item's link and time in its attributes.
        guard format == .channelDefinition else { return }
        if let href = attributes.value(of: "href") {
            var text = Array(href.utf8)
            fields.link.offer(&text, priority: 0, base: currentBase)
        }
        if let modified = attributes.value(of: "lastmod") {
            var text = Array(modified.utf8)
            fields.updated.offer(&text, priority: 0)
        }
    }

    private func finishEntry() {
        entryDepth = 0
        mediaDepth = 0
        categoryDepth = 0
        var values = EntryValues()
        values.title = readable(fields.title)
        values.link = fields.link.text.flatMap { LinkResolution.resolve($0, against: fields.link.base ?? context.base) }
        values.summary = fields.summary.isEmpty ? (fields.content.kind == .binary ? nil : readable(fields.content)) : readable(fields.summary)
        let date = Self.time(fields.date)
        values.published = Self.time(fields.published) ?? date
        values.updated = Self.time(fields.updated) ?? date
        values.author = fields.author.text
        values.categories = fields.categories
        if let entry = values.entry(guid: fields.guid.text, id: fields.id.text) { entries.append(entry) }
    }

    /// A slot's text as the feed wants it given: HTML as plain text with `html = "text"`.
    private func readable(_ slot: FieldSlot) -> ArraySlice<UInt8>? {
        guard let text = slot.text else { return nil }
        guard context.plainText, slot.kind == .html || slot.kind == .markup else { return text }
        return HTMLText.plainText(text)[...]
    }

    private static func time(_ slot: FieldSlot) -> FeedTime? {
        slot.text?.withUnsafeBufferPointer { FeedTime(utf8: $0) }
    }

    /// Whether the document is Atom 1.0 (not Atom 0.3 or an Atom element in another format).
    var isAtom10: Bool { format == .atom && rootNamespace == Namespace.atom }

    // MARK: xml:base

    /// The base URI in force: the innermost `xml:base`, else the document's.
    var currentBase: String { bases.last?.uri ?? context.base }

    private func pushBase(_ value: String) {
        guard let resolved = LinkResolution.resolveBase(value, against: currentBase) else { return }
        bases.append((depth, resolved))
    }
}

/// An element's name and namespace as libxml2's dictionary interns them: the same pointers for
/// the same strings throughout one document.
struct ElementKey: Hashable {
    let name: UInt
    let namespace: UInt
}

/// The attributes libxml2's SAX2 parser hands an element: five pointers each (local name, prefix,
/// namespace URI, value start, value end).
struct Attributes {
    let pointer: UnsafeMutablePointer<UnsafePointer<xmlChar>?>?
    let count: Int

    /// The value of the attribute whose local name is `name` (lowercase; compared without case),
    /// in the `xml:` namespace or, unless `inXMLNamespace`, in any.
    func value(of name: StaticString, inXMLNamespace: Bool = false) -> String? {
        guard let pointer else { return nil }
        for index in 0..<count {
            guard let local = pointer[index * 5], Self.equalsIgnoringCase(local, name),
                let start = pointer[index * 5 + 3], let end = pointer[index * 5 + 4]
            else { continue }
            if inXMLNamespace {
                guard let prefix = pointer[index * 5 + 1], Self.equalsIgnoringCase(prefix, "xml") else { continue }
            }
            return String(decoding: UnsafeBufferPointer(start: start, count: end - start), as: UTF8.self)
        }
        return nil
    }

    /// Every attribute as `(name, value)`, the `xml:` prefix kept, for inline markup.
    func forEach(_ body: (UnsafePointer<xmlChar>, UnsafePointer<xmlChar>?, UnsafeBufferPointer<UInt8>) -> Void) {
        guard let pointer else { return }
        for index in 0..<count {
            guard let local = pointer[index * 5], let start = pointer[index * 5 + 3], let end = pointer[index * 5 + 4] else { continue }
            body(local, pointer[index * 5 + 1], UnsafeBufferPointer(start: start, count: end - start))
        }
    }

    static func equalsIgnoringCase(_ text: UnsafePointer<xmlChar>, _ name: StaticString) -> Bool {
        let letters = name.utf8Start
        for index in 0..<name.utf8CodeUnitCount where text[index] | 0x20 != letters[index] | 0x20 { return false }
        return text[name.utf8CodeUnitCount] == 0
    }
}
