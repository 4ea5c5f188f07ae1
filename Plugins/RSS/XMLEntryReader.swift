import CLibXML2
import FeedKit

/// Reads the entries of an RSS, RDF, Atom or CDF document with libxml2's SAX2 parser, namespaces
/// resolved, so `content:encoded` or `dc:date` are known by their namespace whatever prefix a
/// document gives them.
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
///
/// A value, mutated in place by libxml2's callbacks through a pointer.
struct XMLEntryReader {
    let context: DocumentContext
    /// The entries read since the last full batch went to `builder`, and the text of the one
    /// being read.
    var batch = CapturedBatch()
    private let builder: BatchBuilder
    private(set) var problem: String?
    private(set) var format: FeedFormat?
    fileprivate var parser: xmlParserCtxtPtr?

    private(set) var depth = 0
    private var rootNamespace = ""
    /// Roles by libxml2's interned name and namespace pointers, so each distinct element name is
    /// looked at as text once per document.
    private var roles = RoleCache()
    /// The depth of the entry being read, 0 outside entries.
    private var entryDepth = 0
    /// The depth of the outermost `media:group` or `media:content` in the entry, 0 if none is open.
    private var mediaDepth = 0
    /// The depth of the outermost `itunes:category` in the entry, 0 if none is open.
    private var categoryDepth = 0
    /// `xml:base` in force, innermost last, with the depth of the element that set it.
    private var bases: [(depth: Int, number: BaseNumber)] = []
    /// Every `xml:base` the document set, resolved, in document order: number n is `knownBases[n - 1]`.
    private var knownBases: [String] = []
    var fields = EntryFields()
    var capture: FieldCapture?
    /// The base URI where the field being captured is, if it is a link.
    var captureBase = BaseNumber.document
    var person = PersonCapture()
    /// Whether the entry's `guid` is its link too (RSS 2.0's `isPermaLink`, true unless it says false).
    var guidIsPermalink = true

    /// The entries of the UTF-8 document, in document order. libxml2 reads the text a few KB at a
    /// time (not a copy of the whole: see `feedd_xml_parser`), and `document` (a response's body,
    /// unless it was converted) is let go of as soon as the parse is done, before the last batch
    /// is built.
    static func entryBatches(in document: consuming DecodedDocument, context: DocumentContext) throws(FeedDocumentError) -> [BuiltBatch] {
        let run = ParserRun(context: context)
        let result = try document.withText { text throws(FeedDocumentError) -> Int32 in
            // UInt8 and CChar may alias each other.
            var unread = feedd_xml_text(next: UnsafeRawPointer(text.baseAddress)?.assumingMemoryBound(to: CChar.self), left: text.count)
            return try withUnsafeMutablePointer(to: &unread) { unread throws(FeedDocumentError) in try run.parse(feedd_xml_read, unread) }
        }
        _ = consume document
        return try run.entryBatches(parsed: result)
    }

    /// The entries of the UTF-8 document that `first` starts and `body` goes on with, in document
    /// order, read as the body arrives. A failed read of the body is, to libxml2, the end of its
    /// input with an error.
    static func entryBatches(first: ArraySlice<UInt8>, then body: HTTPBodyStream, context: DocumentContext) throws(FeedDocumentError) -> [BuiltBatch] {
        let run = ParserRun(context: context)
        var text = ArrivingText(first: first, body: body)
        let result = try withUnsafeMutablePointer(to: &text) { text throws(FeedDocumentError) in
            try run.parse({ source, buffer, length in
                source!.assumingMemoryBound(to: ArrivingText.self).pointee.read(into: UnsafeMutableRawBufferPointer(start: buffer, count: Int(length)))
            }, text)
        }
        return try run.entryBatches(parsed: result)
    }

    /// One parse: the reader, where libxml2's callbacks reach it through a pointer: no reference
    /// counting and no exclusivity check per callback, as a class's property would cost. One
    /// thread.
    private struct ParserRun: ~Copyable {
        let reader: UnsafeMutablePointer<XMLEntryReader>

        init(context: DocumentContext) {
            _ = libraryReady
            reader = .allocate(capacity: 1)
            reader.initialize(to: XMLEntryReader(context: context))
        }

        deinit {
            reader.deinitialize(count: 1)
            reader.deallocate()
        }

        /// Parses the text `read` gives from `source`: libxml2's result, 0 when it is well-formed.
        func parse(_ read: xmlInputReadCallback, _ source: UnsafeMutableRawPointer) throws(FeedDocumentError) -> Int32 {
            guard let parser = withUnsafePointer(to: handler, { feedd_xml_parser($0, reader, read, source) }) else {
                throw FeedDocumentError(description: "not read: libxml2 has no memory left")
            }
            reader.pointee.parser = parser
            defer {
                reader.pointee.parser = nil
                xmlFreeParserCtxt(parser)
            }
            return feedd_xml_run(parser)
        }

        /// The entries, once ``parse(_:_:)`` has given `result`.
        func entryBatches(parsed result: Int32) throws(FeedDocumentError) -> [BuiltBatch] {
            if let problem = reader.pointee.problem { throw FeedDocumentError(description: problem) }
            guard result == 0 else { throw FeedDocumentError(description: "not well-formed XML") }
            guard reader.pointee.format != nil else { throw FeedDocumentError(description: "empty, not an RSS, Atom or JSON Feed document") }
            return reader.pointee.builder.entryBatches(finishing: reader.pointee.batch)
        }
    }

    private init(context: DocumentContext) {
        self.context = context
        builder = BatchBuilder(context: context)
    }

    /// libxml2 sets up its global state once, before any thread parses.
    private static let libraryReady: Void = xmlInitParser()

    /// The callbacks: each finds its reader in the context pointer. Never changed once made (the
    /// parser copies it), so any thread may read it.
    nonisolated(unsafe) private static let handler: xmlSAXHandler = {
        var handler = xmlSAXHandler()
        handler.initialized = UInt32(XML_SAX2_MAGIC)
        handler.startElementNs = { context, name, prefix, uri, _, _, attributeCount, _, attributes in
            reader(context).pointee.start(name!, prefix: prefix, uri: uri, attributes: Attributes(pointer: attributes, count: Int(attributeCount)))
        }
        handler.endElementNs = { context, name, _, _ in
            reader(context).pointee.end(name!)
        }
        handler.characters = { context, bytes, count in
            reader(context).pointee.characters(UnsafeBufferPointer(start: bytes, count: Int(count)))
        }
        handler.cdataBlock = handler.characters
        handler.reference = { context, name in
            reader(context).pointee.reference(name)
        }
        handler.serror = { context, error in
            guard let error, error.pointee.level == XML_ERR_FATAL else { return }
            reader(context).pointee.fail(error.pointee)
        }
        return handler
    }()

    private static func reader(_ context: UnsafeMutableRawPointer?) -> UnsafeMutablePointer<XMLEntryReader> {
        context!.assumingMemoryBound(to: XMLEntryReader.self)
    }

    // MARK: Elements

    private mutating func start(_ name: UnsafePointer<xmlChar>, prefix: UnsafePointer<xmlChar>?, uri: UnsafePointer<xmlChar>?, attributes: Attributes) {
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
            if let text = attributes.bytes(of: "text") { keepAttribute(text, as: nil) }
        default:
            if direct, role.capturesText { startField(role, attributes: attributes) }
        }
    }

    private mutating func end(_ name: UnsafePointer<xmlChar>) {
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

    private mutating func characters(_ text: UnsafeBufferPointer<UInt8>) {
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
    private mutating func reference(_ name: UnsafePointer<xmlChar>?) {
        guard problem == nil, let name, let parser, feedd_xml_in_attribute(parser) == 0 else { return }
        let codePoint = name.withMemoryRebound(to: CChar.self, capacity: 1) { feedd_html_entity($0) }
        guard codePoint != 0, let scalar = Unicode.Scalar(codePoint) else { return }
        let utf8 = Array(String(Character(scalar)).utf8)
        utf8.withUnsafeBufferPointer { characters($0) }
    }

    private mutating func fail(_ error: xmlError) {
        guard problem == nil else { return }
        var reason = ""
        if let message = error.message {
            reason = ": " + String(cString: message).trimmingCharacters(in: .whitespacesAndNewlines)
        }
        problem = "not well-formed XML at line \(error.line), column \(error.int2)\(reason)"
    }

    private mutating func startRoot(_ name: UnsafePointer<xmlChar>, prefix: UnsafePointer<xmlChar>?, uri: UnsafePointer<xmlChar>?) {
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

    private mutating func role(of name: UnsafePointer<xmlChar>, uri: UnsafePointer<xmlChar>?) -> ElementRole {
        let key = ElementKey(name: UInt(bitPattern: name), namespace: UInt(bitPattern: uri))
        if let role = roles[key] { return role }
        let role = ElementRole(
            namespace: uri.map { String(cString: $0).lowercased() } ?? "", name: String(cString: name).lowercased(), root: rootNamespace)
        roles.insert(role, for: key)
        return role
    }

    // MARK: Entries

    private mutating func startEntry(_ attributes: Attributes) {
        entryDepth = depth
        fields.reset()
        guidIsPermalink = true
        // CDF puts an item's link and time in its attributes.
        guard format == .channelDefinition else { return }
        if let href = attributes.bytes(of: "href") { keepAttribute(href, as: (.link, 0), base: currentBase) }
        if let modified = attributes.bytes(of: "lastmod") { keepAttribute(modified, as: (.updated, 0)) }
    }

    private mutating func finishEntry() {
        entryDepth = 0
        mediaDepth = 0
        categoryDepth = 0
        let linkBase = fields[.link].base
        batch.add(fields, linkBase: linkBase == .document ? nil : uri(of: linkBase))
        if batch.isFull {
            let used = batch.bytes.count
            builder.submit(batch)
            batch = CapturedBatch(expectedBytes: used + used / 4)
        }
    }

    // MARK: xml:base

    /// Whether the document is Atom 1.0 (not Atom 0.3 or an Atom element in another format).
    var isAtom10: Bool { format == .atom && rootNamespace == Namespace.atom }

    /// The base URI in force: the innermost `xml:base`, else the document's.
    var currentBase: BaseNumber { bases.last?.number ?? .document }

    func uri(of base: BaseNumber) -> String {
        base == .document ? context.base : knownBases[Int(base.value) - 1]
    }

    private mutating func pushBase(_ value: String) {
        guard let resolved = LinkResolution.resolveBase(value, against: uri(of: currentBase)) else { return }
        knownBases.append(resolved)
        bases.append((depth, BaseNumber(value: Int32(knownBases.count))))
    }
}

/// What libxml2 reads of a document that is downloading: the bytes read before the parse, then the
/// body as it arrives.
private struct ArrivingText {
    var first: ArraySlice<UInt8>
    let body: HTTPBodyStream

    /// libxml2's read: bytes copied into `buffer`, 0 at the end, -1 when the body failed.
    mutating func read(into buffer: UnsafeMutableRawBufferPointer) -> Int32 {
        guard first.isEmpty else {
            let count = min(first.count, buffer.count)
            buffer.copyBytes(from: first.prefix(count))
            first = first.dropFirst(count)
            return Int32(count)
        }
        return (try? body.read(into: buffer)).map { Int32($0) } ?? -1
    }
}

/// An element's name and namespace as libxml2's dictionary interns them: the same pointers for
/// the same strings throughout one document.
struct ElementKey: Equatable {
    let name: UInt
    let namespace: UInt
}

/// Element roles by ``ElementKey``: a small open-addressing table, since a document has a few
/// dozen distinct element names and asks for one per element, where a `Dictionary` would hash
/// each key with SipHash.
struct RoleCache {
    private var keys = [ElementKey](repeating: ElementKey(name: 0, namespace: 0), count: 64)
    private var values = [ElementRole](repeating: .other, count: 64)
    private var count = 0

    subscript(key: ElementKey) -> ElementRole? {
        var index = Self.slot(key, in: keys.count)
        while keys[index].name != 0 {
            if keys[index] == key { return values[index] }
            index = (index + 1) & (keys.count - 1)
        }
        return nil
    }

    mutating func insert(_ role: ElementRole, for key: ElementKey) {
        if (count + 1) * 2 > keys.count { grow() }
        var index = Self.slot(key, in: keys.count)
        while keys[index].name != 0 { index = (index + 1) & (keys.count - 1) }
        keys[index] = key
        values[index] = role
        count += 1
    }

    private mutating func grow() {
        let old = zip(keys, values).filter { $0.0.name != 0 }
        keys = [ElementKey](repeating: ElementKey(name: 0, namespace: 0), count: keys.count * 2)
        values = [ElementRole](repeating: .other, count: keys.count)
        count = 0
        for (key, role) in old { insert(role, for: key) }
    }

    /// Fibonacci hashing of both pointers, which are 16-byte aligned.
    private static func slot(_ key: ElementKey, in capacity: Int) -> Int {
        let mixed = (key.name ^ (key.namespace &* 31)) &* 0x9E37_79B9_7F4A_7C15
        return Int(truncatingIfNeeded: mixed >> 40) & (capacity - 1)
    }
}

/// The attributes libxml2's SAX2 parser hands an element: five pointers each (local name, prefix,
/// namespace URI, value start, value end).
struct Attributes {
    let pointer: UnsafeMutablePointer<UnsafePointer<xmlChar>?>?
    let count: Int

    /// The value of the attribute whose local name is `name` (lowercase; compared without case),
    /// in the `xml:` namespace or, unless `inXMLNamespace`, in any.
    func bytes(of name: StaticString, inXMLNamespace: Bool = false) -> UnsafeBufferPointer<UInt8>? {
        guard let pointer else { return nil }
        for index in 0..<count {
            guard let local = pointer[index * 5], Self.equalsIgnoringCase(local, name),
                let start = pointer[index * 5 + 3], let end = pointer[index * 5 + 4]
            else { continue }
            if inXMLNamespace {
                guard let prefix = pointer[index * 5 + 1], Self.equalsIgnoringCase(prefix, "xml") else { continue }
            }
            return UnsafeBufferPointer(start: start, count: end - start)
        }
        return nil
    }

    /// ``bytes(of:inXMLNamespace:)`` as a string.
    func value(of name: StaticString, inXMLNamespace: Bool = false) -> String? {
        bytes(of: name, inXMLNamespace: inXMLNamespace).map { String(decoding: $0, as: UTF8.self) }
    }

    /// Every attribute as its local name, prefix and value, for inline markup.
    func forEach(_ body: (UnsafePointer<xmlChar>, UnsafePointer<xmlChar>?, UnsafeBufferPointer<UInt8>) -> Void) {
        guard let pointer else { return }
        for index in 0..<count {
            guard let local = pointer[index * 5], let start = pointer[index * 5 + 3], let end = pointer[index * 5 + 4] else { continue }
            body(local, pointer[index * 5 + 1], UnsafeBufferPointer(start: start, count: end - start))
        }
    }

    /// Whether the NUL-terminated `text` is `name`, ignoring ASCII case.
    static func equalsIgnoringCase(_ text: UnsafePointer<xmlChar>, _ name: StaticString) -> Bool {
        let letters = name.utf8Start
        for index in 0..<name.utf8CodeUnitCount where text[index] | 0x20 != letters[index] | 0x20 { return false }
        return text[name.utf8CodeUnitCount] == 0
    }

    /// Whether `value` is `word`, ignoring ASCII case and surrounding white space.
    static func value(_ value: UnsafeBufferPointer<UInt8>, is word: StaticString) -> Bool {
        var start = 0
        var end = value.count
        while start < end, Trimming.isSpace(value[start]) { start += 1 }
        while end > start, Trimming.isSpace(value[end - 1]) { end -= 1 }
        guard end - start == word.utf8CodeUnitCount else { return false }
        let letters = word.utf8Start
        for index in 0..<(end - start) where value[start + index] | 0x20 != letters[index] | 0x20 { return false }
        return true
    }
}
