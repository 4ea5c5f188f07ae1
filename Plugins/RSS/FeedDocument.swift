import FeedKit

/// Why a document gave no entries: its encoding, its XML or JSON, or its format.
public struct FeedDocumentError: Error, Sendable, Hashable, CustomStringConvertible {
    public let description: String
}

/// Where a document came from, and how its entries are to be given.
public struct DocumentContext: Sendable {
    /// The base URI of its relative links: its `Content-Location` (resolved against its URL), else its URL.
    let base: String
    /// The HTTP `Content-Type`, whose `charset` is the document's encoding.
    let contentType: String?
    /// Whether HTML summaries are given as plain text (`html = "text"`).
    let plainText: Bool

    public init(url: String = "", contentType: String? = nil, contentLocation: String? = nil, plainText: Bool = false) {
        base = contentLocation.flatMap { LinkResolution.resolveBase($0, against: url) } ?? url
        self.contentType = contentType
        self.plainText = plainText
    }
}

/// The entries of a feed document, in document order: RSS 0.90 to 2.0, RSS 1.0 (RDF), Atom 0.3
/// and 1.0, CDF, or JSON Feed 1.0 and 1.1, whichever the document is (a JSON text is a JSON Feed,
/// anything else XML, its format named by its root element).
///
/// libxml2 directly rather than Foundation's XMLParser: on malformed input XMLParser crashed (a
/// name that is not UTF-8) and leaked an error object per document; the fuzzer found both.
public enum FeedDocument {
    /// The entries of `body`, a response's body as it came; `body` is let go of as soon as it is
    /// no longer needed, which frees it while the entries are built if the caller gave it up too.
    public static func entries(in body: consuming [UInt8], context: DocumentContext = DocumentContext()) throws(FeedDocumentError) -> [FeedEntry] {
        try entryBatches(in: body, context: context).flatMap(\.feedEntries)
    }

    /// ``entries(in:context:)`` in batches, as the reader built them (see ``BatchBuilder``).
    static func entryBatches(in body: consuming [UInt8], context: DocumentContext) throws(FeedDocumentError) -> [BuiltBatch] {
        let document = try DecodedDocument(body, contentType: context.contentType)
        guard document.isJSON else { return try XMLEntryReader.entryBatches(in: document, context: context) }
        return [try document.withText { text throws(FeedDocumentError) in try JSONFeedReader.entries(in: text, context: context) }]
    }

    /// The entries of a response's body as it arrives: read while it downloads when its start
    /// shows UTF-8 XML (by its byte-order mark, the `charset` of its `Content-Type` or its XML
    /// declaration, or nothing saying otherwise), else waited for whole and read as
    /// ``entries(in:context:)`` reads it. A body whose read fails is "not read in full"; the
    /// body's ``HTTPBodyStream/failureRead`` says why.
    public static func entries(arriving body: HTTPBodyStream, context: DocumentContext = DocumentContext()) throws(FeedDocumentError) -> [FeedEntry] {
        try entryBatches(arriving: body, context: context).flatMap(\.feedEntries)
    }

    /// ``entries(arriving:context:)`` in batches, as the reader built them (see ``BatchBuilder``).
    static func entryBatches(arriving body: HTTPBodyStream, context: DocumentContext) throws(FeedDocumentError) -> [BuiltBatch] {
        do {
            var bytes = try body.read(upTo: DecodedDocument.sniffedBytes)
            if bytes.count == DecodedDocument.sniffedBytes, let start = DecodedDocument.utf8XMLStart(bytes, contentType: context.contentType) {
                let entries = try XMLEntryReader.entryBatches(first: bytes[start...], then: body, context: context)
                if body.failureRead != nil { throw notReadInFull }
                return entries
            }
            try body.readAll(appendingTo: &bytes)
            return try entryBatches(in: bytes, context: context)
        } catch let error as FeedDocumentError {
            throw body.failureRead != nil ? notReadInFull : error
        } catch {
            throw notReadInFull
        }
    }

    private static let notReadInFull = FeedDocumentError(description: "not read in full")
}
