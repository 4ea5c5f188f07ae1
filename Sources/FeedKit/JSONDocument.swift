import CSimdJSON
import Glibc

/// A JSON text checked in full by simdjson and indexed, so that an adapter reads the values it
/// needs where they lie in the text and hands each item on as the upstream wrote it, without
/// building a ``JSONValue`` tree.
///
/// ```swift
/// let body = try JSONDocument(parsing: response.body)
/// guard let users = body.root["results"]?.elements else { throw … }
/// let items = users.map { user in Item(id: user.value(at: uuidPath), data: user) }
/// ```
///
/// What is accepted: exactly one JSON text (RFC 8259) in valid UTF-8, at most
/// ``maximumDepth`` arrays and objects deep, with no object naming two members alike (which
/// readers of the same bytes would resolve differently). Numbers are kept as written, of any size
/// or precision: `123456789012345678901234567890` and `1e400` stay exactly that.
///
/// Values are ``JSONElement``s. Their bytes (``JSONElement/raw``) share the document's storage,
/// which lives as long as any of them; the index of the values lives as long as the document.
public final class JSONDocument: @unchecked Sendable {
    // Sendable: every stored property is set once in init and only read after; `entries` is
    // memory this object owns (freed in deinit) and never writes after init.

    /// The text, then FEEDD_JSON_PADDING spaces that no value includes (simdjson reads ahead).
    let text: [UInt8]
    /// How many bytes of `text` are the JSON text.
    let length: Int
    let entries: UnsafeBufferPointer<feedd_json_entry>
    /// Whether the text holds a line break, which can only be whitespace between tokens: a
    /// value's bytes are then checked for one before they go into an NDJSON line.
    let hasLineBreaks: Bool

    /// How deeply arrays and objects may nest, as Foundation's parser allowed.
    public static let maximumDepth = 512
    /// The largest text read (offsets and counts in the index are 32 bits).
    public static let maximumLength = 1 << 28

    /// The spaces the text is followed by in memory. An array of bytes read with room for them
    /// after it is indexed where it lies.
    static let padding = Int(FEEDD_JSON_PADDING)

    /// Checks and indexes `bytes`; throws, saying what is wrong and about where, for anything
    /// but one JSON text as described above.
    public convenience init(parsing bytes: some Collection<UInt8>) throws(JSONParseError) {
        var text: [UInt8] = []
        text.reserveCapacity(bytes.count + Self.padding)
        // Copied with memcpy where the bytes are contiguous (a request line is an ArraySlice):
        // `append(contentsOf:)` of a generic collection went element by element, a quarter of
        // decoding a request line in an ack storm (callgrind).
        let copied: Bool? = bytes.withContiguousStorageIfAvailable { source in
            text.append(contentsOf: source)
            return true
        }
        if copied == nil { text.append(contentsOf: bytes) }
        try self.init(parsing: text)
    }

    /// Checks and indexes `bytes`, as the generic initializer does. An array
    /// that is this call's alone and has room for ``padding`` more bytes is kept as it is, not
    /// copied: `perf` of the daemon put the copy of each 22 KB randomuser body (and its
    /// allocation) at 4% of the CPU of libcurl's thread, which reads the body and parses it.
    public init(parsing bytes: consuming [UInt8]) throws(JSONParseError) {
        let padding = Self.padding
        var text = bytes
        let length = text.count
        guard length < Self.maximumLength else {
            throw JSONParseError(description: "the text is larger than \(Self.maximumLength >> 20) MiB")
        }
        text.append(contentsOf: repeatElement(UInt8(ascii: " "), count: padding))
        var count = 0
        var failure = feedd_json_failure()
        let entries = text.withUnsafeBufferPointer { feedd_json_index($0.baseAddress, length, Self.maximumDepth, &count, &failure) }
        guard let entries else {
            throw JSONParseError(description: "\(String(cString: failure.message)) at byte \(failure.offset)")
        }
        self.entries = UnsafeBufferPointer(start: entries, count: count)
        self.length = length
        hasLineBreaks = text.withUnsafeBufferPointer { buffer in
            memchr(buffer.baseAddress!, 0x0A, length) != nil || memchr(buffer.baseAddress!, 0x0D, length) != nil
        }
        self.text = text
    }

    deinit {
        feedd_json_free(UnsafeMutablePointer(mutating: entries.baseAddress))
    }

    /// The value the text is.
    public var root: JSONElement { JSONElement(document: self, index: 0) }

    /// The text of entry `index`, quotes and brackets included.
    func bytes(of index: Int) -> ArraySlice<UInt8> {
        let entry = entries[index]
        return text[Int(entry.start)..<Int(entry.end)]
    }

    /// The value of the string (or member name) at entry `index`.
    func string(at index: Int) -> String {
        let entry = entries[index]
        let start = Int(entry.start)
        let end = Int(entry.end)
        if entry.shape & FEEDD_JSON_ESCAPED == 0 {
            return text.withUnsafeBufferPointer { String(decoding: UnsafeBufferPointer(rebasing: $0[(start + 1)..<(end - 1)]), as: UTF8.self) }
        }
        return text.withUnsafeBufferPointer { buffer in
            String(unsafeUninitializedCapacity: end - start) { value in
                feedd_json_unescape(buffer.baseAddress! + start, end - start, value.baseAddress!)
            }
        }
    }

    /// Whether the string (or member name) at entry `index` is `name`.
    func string(at index: Int, equals name: Substring) -> Bool {
        let entry = entries[index]
        guard entry.shape & FEEDD_JSON_ESCAPED == 0 else { return string(at: index) == name }
        let length = Int(entry.end - entry.start) - 2
        guard length == name.utf8.count else { return false }
        return text.withUnsafeBufferPointer { text in
            name.utf8.withContiguousStorageIfAvailable { name in
                memcmp(text.baseAddress! + Int(entry.start) + 1, name.baseAddress!, length) == 0
            } ?? text[(Int(entry.start) + 1)..<(Int(entry.end) - 1)].elementsEqual(name.utf8)
        }
    }
}

/// Why some bytes are not a JSON value.
public struct JSONParseError: Error, Sendable, CustomStringConvertible {
    /// What is wrong, and where.
    public let description: String
}
