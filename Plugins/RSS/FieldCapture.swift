import CLibXML2
import Foundation

/// The entry field whose text the reader is collecting, from its element's start to its end.
struct FieldCapture {
    enum Mode {
        /// The element's own text only (a date, a guid, a category): text inside its child
        /// elements is not its.
        case direct
        /// Text as it is; child elements, should any turn up, are kept as markup (an RSS
        /// description with HTML that is not escaped).
        case flexible
        /// Inline markup (Atom `xhtml`): child elements kept as tags, text escaped.
        case markup
    }

    let role: ElementRole
    let depth: Int
    /// Where the text starts in the batch's bytes.
    let start: Int
    var mode: Mode
    let kind: TextKind
    let base64: Bool
    /// Atom's `type="xhtml"`: the one `div` wrapping the content is not part of it.
    let unwrapsDiv: Bool
    /// How many elements are directly inside, so far.
    var children = 0
    /// Where the wrapping `div`'s content starts and ends in the batch's bytes.
    var wrapperStart: Int?
    var wrapperEnd: Int?
    /// Whether there is text directly inside, beside the wrapping `div`.
    var textOutside = false
}

/// An Atom person (`author`) being read: its `name` and `email` children's text.
struct PersonCapture {
    /// The `author` element's depth; 0 when none is being read.
    var depth = 0
    var field: ElementRole?
    var fieldDepth = 0
    var name: [UInt8] = []
    var email: [UInt8] = []

    mutating func start(_ role: ElementRole, depth: Int) {
        field = role
        fieldDepth = depth
    }

    mutating func append(_ text: UnsafeBufferPointer<UInt8>) {
        if field == .personName { name.append(contentsOf: text) } else { email.append(contentsOf: text) }
    }

    mutating func reset(depth: Int) {
        self.depth = depth
        field = nil
        name.clear()
        email.clear()
    }
}

extension XMLEntryReader {
    /// Starts reading a field element directly inside the entry (or a Media RSS one inside a
    /// media container). Elements whose field already holds something better are skipped.
    mutating func startField(_ role: ElementRole, attributes: Attributes) {
        switch role {
        case .link:
            if let href = attributes.bytes(of: "href") { return offerAtomLink(href, attributes: attributes) }
        case .category:
            if let term = attributes.bytes(of: "term"), term.contains(where: { !Trimming.isSpace($0) }) { return keepAttribute(term, as: nil) }
        case .guid:
            guidIsPermalink = !(attributes.bytes(of: "ispermalink").map { Attributes.value($0, is: "false") } ?? false)
        case .author:
            person.reset(depth: depth)
        default:
            break
        }
        if let (field, priority) = role.slot, !fields[field].accepts(priority), !(role == .guid && guidIsPermalink) { return }
        var kind = TextKind.text
        var base64 = false
        var unwrapsDiv = false
        if role.holdsMarkup {
            (kind, base64, unwrapsDiv) = TextKind.of(
                type: attributes.value(of: "type"), mode: attributes.value(of: "mode"), default: role.defaultKind, atom10: isAtom10)
        }
        let mode: FieldCapture.Mode = !role.holdsMarkup ? .direct : (kind == .markup && !base64 ? .markup : .flexible)
        capture = FieldCapture(role: role, depth: depth, start: batch.bytes.count, mode: mode, kind: kind, base64: base64, unwrapsDiv: unwrapsDiv)
        captureBase = role == .link || role == .guid ? currentBase : .document
    }

    /// Keeps an attribute's value as `field`'s text (or, without a field, as a category).
    mutating func keepAttribute(_ value: UnsafeBufferPointer<UInt8>, as field: (Field, UInt8)?, base: BaseNumber = .document) {
        let start = batch.bytes.count
        batch.bytes.append(contentsOf: value)
        let range = Trimming.trimmed(start..<batch.bytes.count, in: batch.bytes)
        let kept = field.map { fields.take($0.0, range, priority: $0.1, base: base) } ?? fields.addCategory(range, in: batch.bytes)
        if !kept { batch.takeBack(from: start) }
    }

    /// An Atom `link`: the entry's own page is its `rel="alternate"` (the default) link to HTML.
    private mutating func offerAtomLink(_ href: UnsafeBufferPointer<UInt8>, attributes: Attributes) {
        if let relation = attributes.bytes(of: "rel"), !Attributes.value(relation, is: "alternate"), !Attributes.value(relation, is: "") { return }
        if let type = attributes.bytes(of: "type"), !Attributes.value(type, is: ""), !Attributes.value(type, is: "text/html"),
            !Attributes.value(type, is: "application/xhtml+xml")
        {
            return
        }
        guard fields[.link].accepts(0) else { return }
        keepAttribute(href, as: (.link, 0), base: currentBase)
    }

    /// An element inside the field being read: kept as a tag if the field holds markup. In HTML
    /// or text, a `div` is dropped (TypePad wraps escaped HTML in one), and any other element
    /// turns the field into inline markup from there on.
    mutating func startInCapture(_ name: UnsafePointer<xmlChar>, uri: UnsafePointer<xmlChar>?, attributes: Attributes) {
        guard var capture else { return }
        switch capture.mode {
        case .direct: return
        case .flexible:
            if Attributes.equalsIgnoringCase(name, "div") { return }
            capture.mode = .markup
        case .markup: break
        }
        var isWrapper = false
        if depth == capture.depth + 1 {
            capture.children += 1
            isWrapper = capture.unwrapsDiv && capture.children == 1 && !capture.textOutside && Attributes.equalsIgnoringCase(name, "div")
        }
        Self.appendStartTag(name, uri: uri, attributes: attributes, to: &batch.bytes)
        if isWrapper { capture.wrapperStart = batch.bytes.count }
        self.capture = capture
    }

    /// The end of an element inside the field being read.
    mutating func endInCapture(_ name: UnsafePointer<xmlChar>) {
        guard var capture, capture.mode == .markup else { return }
        if depth == capture.depth + 1, capture.wrapperStart != nil, capture.wrapperEnd == nil { capture.wrapperEnd = batch.bytes.count }
        batch.bytes.append(contentsOf: "</".utf8)
        Self.appendName(name, prefix: nil, to: &batch.bytes)
        batch.bytes.append(UInt8(ascii: ">"))
        self.capture = capture
    }

    mutating func captureText(_ text: UnsafeBufferPointer<UInt8>) {
        // The capture is read in place, not copied out: this runs once per text, and each entity
        // (`&lt;` in escaped HTML) is a text of its own.
        guard let mode = capture?.mode else { return }
        switch mode {
        case .direct:
            if depth == capture?.depth { batch.bytes.append(contentsOf: text) }
        case .flexible where text.count == 1:
            // An entity (`&lt;` in escaped HTML) comes as a text of its own: one byte, appended as one.
            batch.bytes.append(text[0])
        case .flexible:
            batch.bytes.append(contentsOf: text)
        case .markup:
            Self.appendEscaped(text, quotes: false, to: &batch.bytes)
            if depth == capture?.depth, capture?.textOutside == false, text.contains(where: { !Trimming.isSpace($0) }) {
                capture?.textOutside = true
            }
        }
    }

    /// The end of the field's element: its text goes to its field, if it beats what is there,
    /// and is taken back from the batch's bytes if no field wants it.
    mutating func finishField() {
        guard let capture else { return }
        self.capture = nil
        var range = capture.start..<batch.bytes.count
        if capture.base64, let decoded = Data(base64Encoded: Data(batch.bytes[range]), options: .ignoreUnknownCharacters),
            String(validating: decoded, as: UTF8.self) != nil
        {
            batch.takeBack(from: capture.start)
            batch.bytes.append(contentsOf: decoded)
            range = capture.start..<batch.bytes.count
        }
        if capture.unwrapsDiv, capture.children == 1, !capture.textOutside, let start = capture.wrapperStart, let end = capture.wrapperEnd {
            range = start..<end
        }
        range = Trimming.trimmed(range, in: batch.bytes)
        var kept = false
        switch capture.role {
        case .author:
            // An Atom person's name, else RSS's text, else the person's email.
            let name = Trimming.trimmed(person.name[...])
            let email = Trimming.trimmed(person.email[...])
            if let chosen = !name.isEmpty ? name : (range.isEmpty && !email.isEmpty ? email : nil) {
                batch.takeBack(from: capture.start)
                batch.bytes.append(contentsOf: chosen)
                range = capture.start..<batch.bytes.count
            }
            person.depth = 0
        case .guid where guidIsPermalink:
            kept = fields.take(.link, range, priority: 1, base: captureBase)
        default:
            break
        }
        if capture.role.isCategory {
            kept = fields.addCategory(range, in: batch.bytes) || kept
        } else if let (field, priority) = capture.role.slot {
            kept = fields.take(field, range, priority: priority, kind: capture.kind, base: captureBase) || kept
        }
        if !kept { batch.takeBack(from: capture.start) }
    }

    /// `<name attributes>` as inline markup writes it.
    private static func appendStartTag(_ name: UnsafePointer<xmlChar>, uri: UnsafePointer<xmlChar>?, attributes: Attributes, to bytes: inout [UInt8]) {
        bytes.append(UInt8(ascii: "<"))
        appendName(name, prefix: nil, to: &bytes)
        // SVG and MathML inside XHTML say what they are, as their namespace prefix is dropped.
        if let uri, let namespace = embeddedNamespaces.first(where: { Attributes.equalsIgnoringCase(name, $0.root) && Attributes.equalsIgnoringCase(uri, $0.uri) })?.uri {
            bytes.append(contentsOf: #" xmlns=""#.utf8)
            namespace.withUTF8Buffer { bytes.append(contentsOf: $0) }
            bytes.append(UInt8(ascii: "\""))
        }
        attributes.forEach { local, prefix, value in
            bytes.append(UInt8(ascii: " "))
            appendName(local, prefix: prefix, to: &bytes)
            bytes.append(contentsOf: #"=""#.utf8)
            appendEscaped(value, quotes: true, to: &bytes)
            bytes.append(UInt8(ascii: "\""))
        }
        bytes.append(UInt8(ascii: ">"))
    }

    private static let embeddedNamespaces: [(root: StaticString, uri: StaticString)] = [
        ("svg", "http://www.w3.org/2000/svg"), ("math", "http://www.w3.org/1998/Math/MathML"),
    ]

    /// An element or attribute name as inline markup writes it: the local name, with `xml:` and
    /// `xlink:` for those namespaces' attributes (other prefixes are dropped, as feedparser drops them).
    private static func appendName(_ name: UnsafePointer<xmlChar>, prefix: UnsafePointer<xmlChar>?, to bytes: inout [UInt8]) {
        if let prefix, Attributes.equalsIgnoringCase(prefix, "xml") || Attributes.equalsIgnoringCase(prefix, "xlink") {
            bytes.append(contentsOf: UnsafeBufferPointer(start: prefix, count: strlen(UnsafeRawPointer(prefix).assumingMemoryBound(to: CChar.self))))
            bytes.append(UInt8(ascii: ":"))
        }
        bytes.append(contentsOf: UnsafeBufferPointer(start: name, count: strlen(UnsafeRawPointer(name).assumingMemoryBound(to: CChar.self))))
    }

    /// Text as markup holds it: `&`, `<` and `>` escaped, and `"` too in an attribute value.
    private static func appendEscaped(_ text: UnsafeBufferPointer<UInt8>, quotes: Bool, to bytes: inout [UInt8]) {
        var runStart = 0
        for index in 0..<text.count {
            let replacement: StaticString
            switch text[index] {
            case UInt8(ascii: "&"): replacement = "&amp;"
            case UInt8(ascii: "<"): replacement = "&lt;"
            case UInt8(ascii: ">"): replacement = "&gt;"
            case UInt8(ascii: "\"") where quotes: replacement = "&quot;"
            default: continue
            }
            bytes.append(contentsOf: UnsafeBufferPointer(rebasing: text[runStart..<index]))
            replacement.withUTF8Buffer { bytes.append(contentsOf: $0) }
            runStart = index + 1
        }
        bytes.append(contentsOf: UnsafeBufferPointer(rebasing: text[runStart..<text.count]))
    }
}
