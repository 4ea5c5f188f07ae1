import FeedKit
import Foundation

/// Reads the items of a JSON Feed document (https://jsonfeed.org, versions 1.0 and 1.1) into the
/// same entries as RSS and Atom: `title`; `url` (else `external_url`) as the link, resolved
/// against the document's base; `summary`, else `content_html`, else `content_text`;
/// `date_published` and `date_modified`; the first of `authors` (1.1) or `author` (1.0), else
/// the feed's; `tags` as categories; `id` as the id.
enum JSONFeedReader {
    static func entries(in text: UnsafeBufferPointer<UInt8>, context: DocumentContext) throws(FeedDocumentError) -> BuiltBatch {
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
        var batch = BuiltBatch(expectedEntries: items.count)
        for item in items { add(item, to: &batch, feedAuthor: feedAuthor, context: context) }
        return batch
    }

    private static func add(_ item: JSONValue, to batch: inout BuiltBatch, feedAuthor: String?, context: DocumentContext) {
        guard item.objectValue != nil else { return }
        func bytes(_ key: String) -> ArraySlice<UInt8>? {
            guard let text = item[key]?.stringValue else { return nil }
            let trimmed = Trimming.trimmed(Array(text.utf8)[...])
            return trimmed.isEmpty ? nil : trimmed
        }
        var fields = BuiltEntry.Fields()
        fields.title = bytes("title").map { batch.capture($0) }
        fields.link = (bytes("url") ?? bytes("external_url")).map { batch.capture(LinkResolution.resolve($0, against: context.base).utf8) }
        if let summary = bytes("summary") {
            fields.summary = batch.capture(summary)
        } else if let html = bytes("content_html") {
            fields.summary = batch.capture(context.plainText ? HTMLText.plainText(html)[...] : html)
        } else {
            fields.summary = bytes("content_text").map { batch.capture($0) }
        }
        fields.published = item["date_published"]?.stringValue.flatMap(FeedTime.init)
        fields.updated = item["date_modified"]?.stringValue.flatMap(FeedTime.init)
        fields.author = (authorName(item) ?? feedAuthor).map { batch.capture($0.utf8) }
        var tags: [String] = []
        let firstCategory = batch.categories.count
        for tag in item["tags"]?.arrayValue ?? [] {
            guard let text = tag.stringValue?.trimmingCharacters(in: .whitespacesAndNewlines), !text.isEmpty, !tags.contains(text) else { continue }
            tags.append(text)
            batch.captureCategory(text.utf8)
        }
        fields.categories = firstCategory..<batch.categories.count
        let id: String? = item["id"]?.stringValue ?? item["id"]?.integerValue.map { String($0) }
        batch.add(fields, guid: id.map { Array($0.utf8)[...] }, id: nil)
    }

    /// The name of the first of `authors` (JSON Feed 1.1), else of `author` (1.0).
    private static func authorName(_ object: JSONValue) -> String? {
        let author = object["authors"]?.arrayValue?.first ?? object["author"]
        guard let name = author?["name"]?.stringValue?.trimmingCharacters(in: .whitespacesAndNewlines), !name.isEmpty else { return nil }
        return name
    }
}
