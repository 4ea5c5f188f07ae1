// Fuzz target: a feed document, as the rss adapter reads it. The input's length picks how it
// came (the HTTP charset, a Content-Location, html = "text"), so every input is a whole document.
// Invariants: reading never crashes, every entry makes an item with a non-empty id and valid
// JSON (the adapter's writer is trusted to escape, RawJSON(written:), so this check is what
// proves it), and sorting newest first keeps them all.

@_cdecl("LLVMFuzzerTestOneInput")
public func fuzzXMLEntries(_ data: UnsafePointer<UInt8>, _ size: Int) -> CInt {
    let charsets = [nil, "utf-8", "iso-8859-1", "utf-16", "shift_jis", "x-unknown"]
    let context = DocumentContext(
        url: "https://example.com/a/feed.xml", contentType: charsets[size % charsets.count].map { "application/rss+xml; charset=\($0)" },
        contentLocation: size % 5 == 0 ? "/b/" : nil, plainText: size % 7 == 0)
    guard let entries = try? FeedDocument.entries(in: Array(UnsafeBufferPointer(start: data, count: size)), context: context) else { return 0 }
    for entry in entries {
        precondition(!entry.item.id.isEmpty, "an entry without an id")
        precondition(RawJSON(validating: entry.json.bytes) != nil, "an entry whose JSON is not valid")
    }
    precondition(RSSSource.itemsNewestFirst(entries).count == entries.count, "sorting lost entries")
    return 0
}
