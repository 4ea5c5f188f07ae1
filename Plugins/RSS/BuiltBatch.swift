import FeedKit

/// Where one field's text is in a ``BuiltBatch``: a range of the text the reader captured, or of
/// the text the builder derived from it (a link resolved against its base, HTML as plain text).
struct BuiltText: Sendable {
    let range: Range<Int>
    let isDerived: Bool
}

/// An entry once built: its id, and its fields as places in its batch's text, with its times
/// read. Its JSON is written only when its page is (see ``BuiltBatch/items(at:of:)``).
struct BuiltEntry: Sendable {
    /// `guid`, else `atom:id` (a JSON Feed item's `id`), else the link, else a hash of the JSON.
    let id: String
    /// The id's hash, as ``PublishedEntries`` knows an entry: taken where the entry is built (a
    /// batch builder's core, while libxml2 reads on), not in the one pass after the parse that
    /// every page waits for.
    let idHash: UInt64
    let fields: Fields

    /// The seven fields of the entry's JSON; nil (and empty categories) is JSON's null.
    struct Fields: Sendable {
        var title: BuiltText?
        var link: BuiltText?
        var published: FeedTime?
        var updated: FeedTime?
        var summary: BuiltText?
        var author: BuiltText?
        /// Where the entry's categories are in the batch's `categories`.
        var categories: Range<Int> = 0..<0
    }

    /// When it was published, else last updated: what "newest" means.
    var time: FeedTime? { fields.published ?? fields.updated }
}

/// A batch of entries built (dates read, links resolved, HTML made plain text if asked, ids
/// chosen), with their text where the reader captured it. An entry's JSON is written straight
/// from that text into the buffer of the page that takes it: perf of a 20k-item read had each
/// entry's JSON written into an array of its own (20,000 allocations, 9 MB of fresh memory and its
/// page faults) that lived until its page line copied it once more.
struct BuiltBatch: Sendable {
    /// The text the reader captured, and the categories' ranges in it (the XML reader's batch's
    /// own buffers, shared).
    private(set) var text: [UInt8]
    private(set) var categories: [Range<Int>]
    /// Text the builder made from it.
    private var derived: [UInt8] = []
    private(set) var entries: [BuiltEntry] = []

    init(text: [UInt8] = [], categories: [Range<Int>] = [], expectedEntries: Int = 0) {
        self.text = text
        self.categories = categories
        entries.reserveCapacity(expectedEntries)
    }

    /// Keeps `bytes` as text the builder made (a resolved link, a summary as plain text).
    mutating func derive(_ bytes: some Collection<UInt8>) -> BuiltText {
        let start = derived.count
        derived.append(contentsOf: bytes)
        return BuiltText(range: start..<derived.count, isDerived: true)
    }

    /// Keeps `bytes` as captured text (a reader that builds as it reads: JSON Feed's).
    mutating func capture(_ bytes: some Collection<UInt8>) -> BuiltText {
        let start = text.count
        text.append(contentsOf: bytes)
        return BuiltText(range: start..<text.count, isDerived: false)
    }

    /// Keeps `bytes` as the next category (a reader that builds as it reads).
    mutating func captureCategory(_ bytes: some Collection<UInt8>) {
        categories.append(capture(bytes).range)
    }

    /// Adds the entry of `fields`, its id from `guid`, else `id`, else its link, else a hash of
    /// its JSON.
    mutating func add(_ fields: BuiltEntry.Fields, guid: ArraySlice<UInt8>?, id: ArraySlice<UInt8>?) {
        let identifier: String
        if let given = guid?.isEmpty == false ? guid : id?.isEmpty == false ? id : nil {
            identifier = String(decoding: given, as: UTF8.self)
        } else if let link = fields.link, !link.range.isEmpty {
            identifier = withText(link) { String(decoding: $0, as: UTF8.self) }
        } else {
            var writer = JSONWriter(reservingCapacity: estimatedJSONSize(fields))
            writeJSON(fields, to: &writer)
            identifier = StableHash.hex(writer.bytes)
        }
        entries.append(BuiltEntry(id: identifier, idHash: PublishedEntries.hash(identifier), fields: fields))
    }

    func withText<Result>(_ place: BuiltText, _ body: (UnsafeBufferPointer<UInt8>) -> Result) -> Result {
        withView { body($0.text(place)) }
    }

    /// The batch's text, to write its entries' JSON from: each buffer opened once for a run of
    /// entries rather than once a field (perf: retains and releases of the arrays, a field at a
    /// time, were a tenth of a page's writing).
    func withView<Result>(_ body: (View) -> Result) -> Result {
        text.withUnsafeBufferPointer { text in
            derived.withUnsafeBufferPointer { derived in
                categories.withUnsafeBufferPointer { categories in body(View(captured: text, derived: derived, categories: categories)) }
            }
        }
    }

    /// About how many bytes ``View/writeJSON(_:to:)`` writes for `fields` (escapes aside).
    func estimatedJSONSize(_ fields: BuiltEntry.Fields) -> Int {
        let textBytes = [fields.title, fields.link, fields.summary, fields.author].reduce(0) { $0 + ($1?.range.count ?? 0) }
        return categories[fields.categories].reduce(160 + textBytes) { $0 + $1.count + 3 }
    }

    /// ``BuiltBatch``'s text, for the time of a ``BuiltBatch/withView(_:)``.
    struct View {
        let captured: UnsafeBufferPointer<UInt8>
        let derived: UnsafeBufferPointer<UInt8>
        let categories: UnsafeBufferPointer<Range<Int>>

        func text(_ place: BuiltText) -> UnsafeBufferPointer<UInt8> {
            UnsafeBufferPointer(rebasing: (place.isDerived ? derived : captured)[place.range])
        }

        /// Writes the entry of `fields` as JSON: `{"title","link","published","updated",
        /// "summary","author","categories"}`, times in RFC 3339, a missing field null.
        func writeJSON(_ fields: BuiltEntry.Fields, to writer: inout JSONWriter) {
            func write(_ place: BuiltText?) {
                guard let place else { return writer.raw("null") }
                writer.feedText(text(place))
            }
            writer.raw(#"{"title":"#)
            write(fields.title)
            writer.raw(#","link":"#)
            write(fields.link)
            writer.raw(#","published":"#)
            writer.time(fields.published)
            writer.raw(#","updated":"#)
            writer.time(fields.updated)
            writer.raw(#","summary":"#)
            write(fields.summary)
            writer.raw(#","author":"#)
            write(fields.author)
            writer.raw(#","categories":"#)
            if fields.categories.isEmpty {
                writer.raw("null")
            } else {
                for index in fields.categories {
                    writer.raw(index == fields.categories.lowerBound ? UInt8(ascii: "[") : UInt8(ascii: ","))
                    writer.feedText(UnsafeBufferPointer(rebasing: captured[categories[index]]))
                }
                writer.raw(UInt8(ascii: "]"))
            }
            writer.raw(UInt8(ascii: "}"))
        }
    }

    /// Writes the entry of `fields` as JSON (``View/writeJSON(_:to:)``).
    func writeJSON(_ fields: BuiltEntry.Fields, to writer: inout JSONWriter) {
        withView { $0.writeJSON(fields, to: &writer) }
    }

    /// The entries one by one, each with its JSON in an array of its own; an entry whose JSON is
    /// not UTF-8 (which the readers never let through) is left out.
    var feedEntries: [FeedEntry] {
        entries.compactMap { entry in
            var writer = JSONWriter(reservingCapacity: estimatedJSONSize(entry.fields))
            writeJSON(entry.fields, to: &writer)
            return RawJSON(written: writer.bytes).map { FeedEntry(id: entry.id, time: entry.time, json: $0) }
        }
    }

    /// The items of the entries at `places` of `batches`, in that order: their JSON written one
    /// after another into `buffer` (emptied first, its storage kept if nothing else holds it),
    /// which the items share. An entry whose JSON is not UTF-8 (which the readers never let
    /// through) is left out.
    static func items(at places: ArraySlice<EntryPlace>, of batches: [BuiltBatch], writingInto buffer: inout [UInt8]) -> [Item] {
        let size = places.reduce(0) { size, place in
            size + batches[Int(place.batch)].estimatedJSONSize(batches[Int(place.batch)].entries[Int(place.index)].fields)
        }
        var writer = JSONWriter(reservingCapacity: 0)
        swap(&writer.bytes, &buffer)
        writer.bytes.removeAll(keepingCapacity: true)
        writer.bytes.reserveCapacity(size + size / 16)
        defer { buffer = writer.bytes }
        var ends: [Int] = []
        ends.reserveCapacity(places.count)
        var ids: [String] = []
        ids.reserveCapacity(places.count)
        // A run of places in one batch at a time: a document's pages take its batches in runs,
        // forwards or backwards.
        var start = places.startIndex
        while start < places.endIndex {
            let number = places[start].batch
            let end = places[start...].firstIndex { $0.batch != number } ?? places.endIndex
            let batch = batches[Int(number)]
            batch.entries.withUnsafeBufferPointer { entries in
                batch.withView { view in
                    for place in places[start..<end] {
                        view.writeJSON(entries[Int(place.index)].fields, to: &writer)
                        ends.append(writer.bytes.count)
                        ids.append(entries[Int(place.index)].id)
                    }
                }
            }
            start = end
        }
        var items: [Item] = []
        items.reserveCapacity(places.count)
        for (id, json) in zip(ids, RawJSON.written(writer.bytes, endingAt: ends)) {
            guard let json else { continue }
            items.append(Item(id: id, json: json))
        }
        return items
    }
}

/// An entry's place among a document's built batches.
struct EntryPlace: Sendable, Hashable {
    let batch: Int32
    let index: Int32
}

/// A document's entries as built, in batches, and the order their pages take them: by
/// `published`, else `updated`, newest first; undated entries last, in document order.
struct DocumentEntries: Sendable {
    let batches: [BuiltBatch]
    /// Every entry, in the order its pages take them.
    let newestFirst: [EntryPlace]
    /// Their ids' hashes, in the same order.
    let idHashes: [UInt64]

    init(_ batches: [BuiltBatch]) {
        self.batches = batches
        var places: [EntryPlace] = []
        var times: [FeedTime?] = []
        for (number, batch) in batches.enumerated() {
            for index in batch.entries.indices {
                places.append(EntryPlace(batch: Int32(number), index: Int32(index)))
                times.append(batch.entries[index].time)
            }
        }
        let order = Self.newestFirst(times)
        newestFirst = order.map { places[$0] }
        idHashes = newestFirst.map { batches[Int($0.batch)].entries[Int($0.index)].idHash }
    }

    /// The positions of entries whose times are `times`, in the order their pages take them.
    /// Sorted as (time, position) pairs, which compare without touching the entries.
    static func newestFirst(_ times: [FeedTime?]) -> [Int] {
        var keys = times.enumerated().map { (time: $1?.millisecondsSinceEpoch ?? .min, position: $0) }
        keys.sort { $0.time != $1.time ? $0.time > $1.time : $0.position < $1.position }
        return keys.map(\.position)
    }
}

/// The buffer a document's pages are written into, used again for its next page once the items
/// that share it are let go (they are, once the daemon has the page's line): perf of a 20k-item
/// read had a new 470 KB buffer for each of its 20 pages, each first touch a page fault. Kept
/// only while a document's pages are being written.
final class PageBuffer: Sendable {
    private let buffer = Locked<[UInt8]>([])

    /// The items of ``BuiltBatch/items(at:of:writingInto:)``, in the buffer kept from the last
    /// page if `morePages`, else let go with the items.
    func items(at places: ArraySlice<EntryPlace>, of batches: [BuiltBatch], morePages: Bool) -> [Item] {
        var bytes = buffer.withLock { buffer in
            defer { buffer = [] }
            return buffer
        }
        let items = BuiltBatch.items(at: places, of: batches, writingInto: &bytes)
        if morePages { buffer.withLock { $0 = bytes } }
        return items
    }
}
