// Fuzz target: an RSS or Atom document, as the rss adapter reads it. Invariants: reading never
// crashes, every entry makes an item with a non-empty id, and sorting newest first keeps them all.

@_cdecl("LLVMFuzzerTestOneInput")
public func fuzzXMLEntries(_ data: UnsafePointer<UInt8>, _ size: Int) -> CInt {
    guard let entries = try? FeedDocument.entries(in: Array(UnsafeBufferPointer(start: data, count: size))) else { return 0 }
    for entry in entries { precondition(!entry.item.id.isEmpty, "an entry without an id") }
    precondition(RSSSource.newestFirst(entries).count == entries.count, "sorting lost entries")
    return 0
}
