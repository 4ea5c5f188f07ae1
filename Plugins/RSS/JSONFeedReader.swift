import FeedKit
import Foundation

/// Reads the items of a JSON Feed document (https://jsonfeed.org, versions 1.0 and 1.1) into the
/// same entries as RSS and Atom: `title`; `url` (else `external_url`) as the link, resolved
/// against the document's base; `summary`, else `content_html`, else `content_text`;
/// `date_published` and `date_modified`; the first of `authors` (1.1) or `author` (1.0), else
/// the feed's; `tags` as categories; `id` as the id.
enum JSONFeedReader {
    static func entries(in text: UnsafeBufferPointer<UInt8>, context: DocumentContext) throws(FeedDocumentError) -> [FeedEntry] {
        let document: JSONValue
        do {
            document = try JSONValue(parsing: text)
        } catch {
            throw FeedDocumentError(description: "not valid JSON (\(error.description))")
        }
        guard let version = document["version"]?.stringValue, version.contains("jsonfeed.org/version/1") else {
            throw FeedDocumentError(description: "JSON, but not a JSON Feed (its \"version\" is not https://jsonfeed.org/version/1 or 1.1)")
        }
        guard let items = document["items"]?.arrayValue else {
            throw FeedDocumentError(description: "a JSON Feed without an \"items\" array")
        }
        let feedAuthor = authorName(document)
        return items.compactMap { item in entry(item, feedAuthor: feedAuthor, context: context) }
    }

    private static func entry(_ item: JSONValue, feedAuthor: String?, context: DocumentContext) -> FeedEntry? {
        guard item.objectValue != nil else { return nil }
        func bytes(_ key: String) -> ArraySlice<UInt8>? {
            guard let text = item[key]?.stringValue else { return nil }
            let trimmed = Trimming.trimmed(Array(text.utf8)[...])
            return trimmed.isEmpty ? nil : trimmed
        }
        var values = EntryValues()
        values.title = bytes("title")
        values.link = (bytes("url") ?? bytes("external_url")).flatMap { LinkResolution.resolve($0, against: context.base) }
        if let summary = bytes("summary") {
            values.summary = summary
        } else if let html = bytes("content_html") {
            values.summary = context.plainText ? HTMLText.plainText(html)[...] : html
        } else {
            values.summary = bytes("content_text")
        }
        values.published = item["date_published"]?.stringValue.flatMap(FeedTime.init)
        values.updated = item["date_modified"]?.stringValue.flatMap(FeedTime.init)
        values.author = (authorName(item) ?? feedAuthor).map { Array($0.utf8)[...] }
        var tags: [String] = []
        var ranges: [Range<Int>] = []
        for tag in item["tags"]?.arrayValue ?? [] {
            guard let text = tag.stringValue?.trimmingCharacters(in: .whitespacesAndNewlines), !text.isEmpty, !tags.contains(text) else { continue }
            tags.append(text)
            let start = values.categoryText.count
            values.categoryText.append(contentsOf: text.utf8)
            ranges.append(start..<values.categoryText.count)
        }
        values.categoryRanges = ranges[...]
        let id: String? = item["id"]?.stringValue ?? item["id"]?.integerValue.map { String($0) }
        return values.entry(guid: id.map { Array($0.utf8)[...] }, id: nil)
    }

    /// The name of the first of `authors` (JSON Feed 1.1), else of `author` (1.0).
    private static func authorName(_ object: JSONValue) -> String? {
        let author = object["authors"]?.arrayValue?.first ?? object["author"]
        guard let name = author?["name"]?.stringValue?.trimmingCharacters(in: .whitespacesAndNewlines), !name.isEmpty else { return nil }
        return name
    }
}
