import Dispatch
import FeedKit

/// The text of one field as the reader found it, in its batch's storage: 32-bit offsets, so that
/// an entry of ten fields takes 136 bytes, not 248 (perf of a 20k read: the batches' entry arrays
/// were a fifth of the reading thread's page faults, 5 MB of fresh memory a read).
struct CapturedText: Sendable {
    private let start: UInt32
    private let end: UInt32
    let kind: TextKind

    /// `range` of a batch's bytes, which are never 4 GiB (the body limit is far under).
    init(range: Range<Int>, kind: TextKind) {
        start = UInt32(range.lowerBound)
        end = UInt32(range.upperBound)
        self.kind = kind
    }

    var range: Range<Int> { Int(start)..<Int(end) }
}

/// An entry as the reader found it, before it becomes JSON.
struct CapturedEntry: Sendable {
    var title: CapturedText?
    var link: CapturedText?
    /// The base URI the link is relative to, if not the document's.
    var linkBase: String?
    var summary: CapturedText?
    var published: CapturedText?
    var updated: CapturedText?
    var date: CapturedText?
    var author: CapturedText?
    var guid: CapturedText?
    var id: CapturedText?
    /// Where the entry's categories are in the batch's `categories`.
    private var firstCategory: UInt32 = 0
    private var endCategory: UInt32 = 0

    var categories: Range<Int> {
        get { Int(firstCategory)..<Int(endCategory) }
        set {
            firstCategory = UInt32(newValue.lowerBound)
            endCategory = UInt32(newValue.upperBound)
        }
    }
}

/// Entries as the reader found them, their text in one buffer, on their way to becoming a
/// ``BuiltBatch``: the work of reading their dates, links and ids (and HTML as text) is done a
/// batch at a time, on other cores while the document is still being read.
///
/// The reader captures each field's text straight into `bytes`, and takes back (drops from the
/// end) what no field wants.
struct CapturedBatch: Sendable {
    var bytes: [UInt8]
    private(set) var entries: [CapturedEntry] = []
    private(set) var categories: [Range<Int>] = []

    /// How many entries a batch holds before it is built.
    static let size = 256

    /// A batch with room for `expectedBytes` of text, so that its buffer rarely grows (and copies).
    init(expectedBytes: Int = 0) {
        bytes = []
        bytes.reserveCapacity(expectedBytes)
        // Room for a full batch at once: grown by doubling, its entries were copied seven times
        // over, in fresh memory (perf: 2% of a 20k read's samples on the reading thread).
        entries.reserveCapacity(Self.size)
    }

    var isFull: Bool { entries.count >= Self.size }

    /// Drops the bytes from `offset` on: text no field took.
    mutating func takeBack(from offset: Int) {
        if offset < bytes.count { bytes.removeLast(bytes.count - offset) }
    }

    /// Keeps the entry whose fields' text is in `bytes` where `fields` says, its link relative to
    /// `linkBase` (nil: the document's base).
    mutating func add(_ fields: EntryFields, linkBase: String?) {
        func text(_ field: Field) -> CapturedText? {
            let slot = fields[field]
            return slot.isEmpty ? nil : CapturedText(range: slot.range, kind: slot.kind)
        }
        var entry = CapturedEntry()
        entry.title = text(.title)
        entry.link = text(.link)
        entry.linkBase = linkBase
        // The summary, else the content if it is text (not an image's bytes).
        entry.summary = text(.summary) ?? (fields[.content].kind == .binary ? nil : text(.content))
        entry.published = text(.published)
        entry.updated = text(.updated)
        entry.date = text(.date)
        entry.author = text(.author)
        entry.guid = text(.guid)
        entry.id = text(.id)
        entry.categories = categories.count..<(categories.count + fields.categories.count)
        categories.append(contentsOf: fields.categories)
        entries.append(entry)
    }

    /// The batch's entries built, in order, their text still where it was captured.
    func built(_ context: DocumentContext) -> BuiltBatch {
        var built = BuiltBatch(text: bytes, categories: categories, expectedEntries: entries.count)
        for entry in entries {
            func text(_ captured: CapturedText?) -> ArraySlice<UInt8>? { captured.map { bytes[$0.range] } }
            func kept(_ captured: CapturedText?) -> BuiltText? { captured.map { BuiltText(range: $0.range, isDerived: false) } }
            func readable(_ captured: CapturedText?) -> BuiltText? {
                guard let captured else { return nil }
                guard context.plainText, captured.kind == .html || captured.kind == .markup else { return kept(captured) }
                let plain = HTMLText.plainText(bytes[captured.range])
                return plain.isEmpty ? nil : built.derive(plain)
            }
            func time(_ captured: CapturedText?) -> FeedTime? { text(captured)?.withUnsafeBufferPointer { FeedTime(utf8: $0) } }
            var fields = BuiltEntry.Fields()
            fields.title = readable(entry.title)
            if let link = entry.link {
                // A link stands as it is written unless it is relative to a base.
                let resolved = LinkResolution.resolution(of: bytes[link.range], against: entry.linkBase ?? context.base)
                fields.link = resolved.map { built.derive($0.utf8) } ?? kept(link)
            }
            fields.summary = readable(entry.summary)
            let date = time(entry.date)
            fields.published = time(entry.published) ?? date
            fields.updated = time(entry.updated) ?? date
            fields.author = kept(entry.author)
            fields.categories = entry.categories
            built.add(fields, guid: text(entry.guid), id: text(entry.id))
        }
        return built
    }
}

/// Builds full batches on Dispatch's pool while the reader goes on, and gives the entries back
/// in document order. A small document (one batch) is built by the reader itself, at its end.
/// Used by the reading thread alone; the batches go to other threads as values.
final class BatchBuilder {
    private let context: DocumentContext
    private let group = DispatchGroup()
    private let built = Locked<[Int: BuiltBatch]>([:])
    private var submitted = 0

    init(context: DocumentContext) {
        self.context = context
    }

    func submit(_ batch: CapturedBatch) {
        let (index, context, built) = (submitted, context, built)
        submitted += 1
        group.enter()
        DispatchQueue.global(qos: .userInitiated).async { [group] in
            let entries = batch.built(context)
            built.withLock { $0[index] = entries }
            group.leave()
        }
    }

    /// Every entry, in order, in batches: the submitted batches' (waited for), then `last`'s.
    func entryBatches(finishing last: CapturedBatch) -> [BuiltBatch] {
        let tail = last.built(context)
        group.wait()
        let batches = built.withLock { built in
            defer { built = [:] }
            return built
        }
        return (0..<submitted).map { batches[$0] ?? BuiltBatch() } + [tail]
    }
}
