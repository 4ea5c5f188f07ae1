/// An HTTP `Link` header field (RFC 8288, section 3), parsed by its grammar:
///
/// ```
/// Link       = #link-value
/// link-value = "<" URI-Reference ">" *( OWS ";" OWS link-param )
/// link-param = token BWS [ "=" BWS ( token / quoted-string ) ]
/// ```
///
/// Several links may share one field (`<…?page=3>; rel="next", <…?page=9>; rel="last"`), a `rel`
/// may hold several relation types (`rel="next prefetch"`), quoted strings may hold commas and
/// semicolons and escaped quotes. A link-value that breaks the grammar is skipped up to the next
/// comma outside quotes and angle brackets, so one bad link does not hide the others.
public struct LinkHeader: Sendable, Hashable {
    /// One link: its target as written (resolve it against the request's URL) and its parameters.
    public struct Link: Sendable, Hashable {
        /// The target between `<` and `>`, as written.
        public let target: String
        /// Parameter names, lowercased, with their values (nil for a name without `=`), in order.
        public let parameters: [Parameter]

        /// A link to `target` with `parameters`.
        public init(target: String, parameters: [Parameter]) {
            self.target = target
            self.parameters = parameters
        }

        /// The relation types of the first `rel` parameter (later ones are ignored, as RFC 8288
        /// says), lowercased.
        public var relations: [String] {
            guard let rel = parameters.first(where: { $0.name == "rel" })?.value else { return [] }
            return rel.split(whereSeparator: { $0 == " " || $0 == "\t" }).map { $0.lowercased() }
        }
    }

    /// A link parameter: `rel="next"`, `title="…"`, or a bare name.
    public struct Parameter: Sendable, Hashable {
        /// The parameter's name, lowercased.
        public let name: String
        /// Its value, unquoted; nil for a bare name.
        public let value: String?

        /// The parameter `name` with `value`.
        public init(name: String, value: String?) {
            self.name = name
            self.value = value
        }
    }

    /// The links, in the order the header lists them.
    public let links: [Link]

    /// Parses a field value; never fails, keeping every link-value that follows the grammar.
    public init(_ fieldValue: String) {
        var scanner = Scanner(Array(fieldValue.utf8))
        var links: [Link] = []
        while !scanner.atEnd {
            if let link = scanner.linkValue() {
                links.append(link)
            } else {
                scanner.skipPastNextComma()
            }
        }
        self.links = links
    }

    /// The target of the first link whose relation types include `relation` (`"next"`).
    public func target(relation: String) -> String? {
        let relation = relation.lowercased()
        return links.first { $0.relations.contains(relation) }?.target
    }

    /// Reads the grammar above over the field's bytes; every method leaves the position after
    /// what it read.
    private struct Scanner {
        let bytes: [UInt8]
        var position = 0

        init(_ bytes: [UInt8]) { self.bytes = bytes }

        var atEnd: Bool { position >= bytes.count }
        private var current: UInt8? { atEnd ? nil : bytes[position] }

        /// One link-value, after any whitespace and empty list elements; nil if it breaks the grammar.
        mutating func linkValue() -> Link? {
            skip { $0 == UInt8(ascii: ",") || Self.isWhitespace($0) }
            guard !atEnd else { return nil }
            guard current == UInt8(ascii: "<") else { return nil }
            position += 1
            let start = position
            while let byte = current, byte != UInt8(ascii: ">") { position += 1 }
            guard !atEnd else { return nil }
            let target = String(decoding: bytes[start..<position], as: UTF8.self).trimmingWhitespace
            position += 1
            var parameters: [Parameter] = []
            while true {
                skip(Self.isWhitespace)
                guard let byte = current, byte != UInt8(ascii: ",") else { return Link(target: target, parameters: parameters) }
                guard byte == UInt8(ascii: ";") else { return nil }
                position += 1
                skip(Self.isWhitespace)
                // An empty parameter (`;;` or a trailing `;`) is tolerated, as many servers send one.
                if current == UInt8(ascii: ";") || current == UInt8(ascii: ",") || atEnd { continue }
                guard let parameter = linkParameter() else { return nil }
                parameters.append(parameter)
            }
        }

        private mutating func linkParameter() -> Parameter? {
            guard let name = token() else { return nil }
            skip(Self.isWhitespace)
            guard current == UInt8(ascii: "=") else { return Parameter(name: name.lowercased(), value: nil) }
            position += 1
            skip(Self.isWhitespace)
            let value = current == UInt8(ascii: "\"") ? quotedString() : token()
            guard let value else { return nil }
            return Parameter(name: name.lowercased(), value: value)
        }

        /// `1*tchar`.
        private mutating func token() -> String? {
            let start = position
            skip(Self.isTokenCharacter)
            guard position > start else { return nil }
            return String(decoding: bytes[start..<position], as: UTF8.self)
        }

        /// `DQUOTE *( qdtext / quoted-pair ) DQUOTE`, unescaped; nil if it never closes.
        private mutating func quotedString() -> String? {
            position += 1
            var value: [UInt8] = []
            while let byte = current {
                position += 1
                switch byte {
                case UInt8(ascii: "\""):
                    return String(decoding: value, as: UTF8.self)
                case UInt8(ascii: "\\"):
                    guard let escaped = current else { return nil }
                    value.append(escaped)
                    position += 1
                default:
                    value.append(byte)
                }
            }
            return nil
        }

        /// Recovers from a broken link-value: on to the next comma that is outside quotes and
        /// angle brackets, or the end.
        mutating func skipPastNextComma() {
            var inQuotes = false
            var inBrackets = false
            while let byte = current {
                position += 1
                switch byte {
                case UInt8(ascii: "\\") where inQuotes: position += 1
                case UInt8(ascii: "\"") where !inBrackets: inQuotes.toggle()
                case UInt8(ascii: "<") where !inQuotes: inBrackets = true
                case UInt8(ascii: ">") where !inQuotes: inBrackets = false
                case UInt8(ascii: ",") where !inQuotes && !inBrackets: return
                default: break
                }
            }
        }

        private mutating func skip(_ predicate: (UInt8) -> Bool) {
            while let byte = current, predicate(byte) { position += 1 }
        }

        private static func isWhitespace(_ byte: UInt8) -> Bool { byte == UInt8(ascii: " ") || byte == UInt8(ascii: "\t") }

        /// RFC 9110's tchar; `*` too, so that `rel*` (RFC 8187's extended form) reads as a name.
        private static func isTokenCharacter(_ byte: UInt8) -> Bool {
            switch byte {
            case UInt8(ascii: "a")...UInt8(ascii: "z"), UInt8(ascii: "A")...UInt8(ascii: "Z"), UInt8(ascii: "0")...UInt8(ascii: "9"):
                return true
            default:
                return Array("!#$%&'*+-.^_`|~".utf8).contains(byte)
            }
        }
    }
}

extension String {
    fileprivate var trimmingWhitespace: String {
        var scalars = Substring(self)
        while scalars.first == " " || scalars.first == "\t" { scalars.removeFirst() }
        while scalars.last == " " || scalars.last == "\t" { scalars.removeLast() }
        return String(scalars)
    }
}
