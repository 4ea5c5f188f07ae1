import FeedKit
import Foundation
import Glibc

/// What a polled `rss` feed has published in its generation: every entry it ever put on a page
/// (so that none is published twice, even when a document re-orders or edits it), and the batches
/// of entries each look at the document found new (so that a page asked for again comes back the
/// same).
///
/// An entry is remembered by a 64-bit hash of its id (8 bytes of file, about 20 of memory),
/// never by the entry, so a generation remembers every entry it published, however many.
///
/// The hashes are appended to `published-entries` in the feed's state directory as they are
/// remembered, after a header naming the generation, so they survive a restart; a new
/// generation (a `refresh`) starts a new file, with none. A torn last record (a crash mid-write)
/// is ignored. The batches live in memory only.
final class PublishedEntries: Sendable {
    /// How many items of batches before the newest are kept for pages asked for again.
    static let keptBatchItems = 10_000

    private struct State {
        var loaded = false
        var generation: Int?
        var seen: Set<UInt64> = []
        var batches: [Int: Batch] = [:]
    }

    /// The entries one look found new (places in the document's built batches, in the order
    /// their pages take them), and the page (of the token) they start at.
    struct Batch {
        let firstPage: Int
        let entries: DocumentEntries
        let places: [EntryPlace]
    }

    private let file: String?
    private let logger: Logger
    private let state = Locked(State())

    /// `directory` nil keeps the memory in this process only.
    init(directory: String?, logger: Logger) {
        file = directory.map { "\($0)/published-entries" }
        self.logger = logger
    }

    /// The batch numbered `number` of `generation`, if this process made it.
    func batch(_ number: Int, generation: Int) -> Batch? {
        state.withLock { state in
            prepare(&state, generation: generation)
            return state.batches[number]
        }
    }

    /// Keeps the entries of `entries` never published in `generation` as batch `number`, starting
    /// at `firstPage`, and returns it (nil: nothing new). A document listing an id twice counts it
    /// once.
    func makeBatch(_ number: Int, firstPage: Int, of entries: DocumentEntries, generation: Int) -> Batch? {
        state.withLock { state in
            prepare(&state, generation: generation)
            var ids = Set<UInt64>(minimumCapacity: entries.idHashes.count)
            let isFresh = entries.idHashes.map { hash in !state.seen.contains(hash) && ids.insert(hash).inserted }
            // A document read once has every entry fresh, and its array is kept as it is, not copied.
            let fresh = isFresh.allSatisfy { $0 } ? entries.newestFirst : zip(entries.newestFirst, isFresh).compactMap { $1 ? $0 : nil }
            guard !fresh.isEmpty else { return nil }
            let batch = Batch(firstPage: firstPage, entries: entries, places: fresh)
            state.batches[number] = batch
            var kept = 0
            for old in state.batches.keys.sorted(by: >) where old != number {
                kept += state.batches[old]!.places.count
                if kept > Self.keptBatchItems { state.batches[old] = nil }
            }
            return batch
        }
    }

    /// Remembers the entries at `places` of `entries` as published in `generation` (the page
    /// holding them is being served), in the file too.
    func published(_ places: some Collection<EntryPlace>, of entries: DocumentEntries, generation: Int) {
        let hashes = places.map { entries.batches[Int($0.batch)].entries[Int($0.index)].idHash }
        let fresh: [UInt64] = state.withLock { state in
            prepare(&state, generation: generation)
            return hashes.filter { state.seen.insert($0).inserted }
        }
        if !fresh.isEmpty { append(fresh) }
    }

    static func hash(_ id: String) -> UInt64 {
        var id = id
        return id.withUTF8 { StableHash.fnv1a64($0) }
    }

    /// Loads the file the first time, and forgets everything when the generation changes.
    private func prepare(_ state: inout State, generation: Int) {
        if !state.loaded {
            state.loaded = true
            load(into: &state)
        }
        guard state.generation != generation else { return }
        state = State(loaded: true, generation: generation)
        startFile(generation: generation)
    }

    // MARK: The file

    private static let header = Array("feedd published entries 1\n".utf8)

    private func load(into state: inout State) {
        guard let file, let data = FileManager.default.contents(atPath: file) else { return importSeenEntries(into: &state) }
        let bytes = [UInt8](data)
        let headerLength = Self.header.count + 8
        guard bytes.count >= headerLength, bytes.starts(with: Self.header) else {
            logger.warning("\(file) is not a list of published entries; starting without it")
            return
        }
        state.generation = Int(Self.integer(bytes, at: Self.header.count))
        let count = (bytes.count - headerLength) / 8
        state.seen.reserveCapacity(count)
        for index in 0..<count { state.seen.insert(Self.integer(bytes, at: headerLength + index * 8)) }
    }

    /// The ids an older feedd kept in `seen-entries.json` (its newest 10,000), taken over once.
    private func importSeenEntries(into state: inout State) {
        guard let file else { return }
        let old = (file as NSString).deletingLastPathComponent + "/seen-entries.json"
        guard let data = FileManager.default.contents(atPath: old) else { return }
        guard let saved = try? JSONValue(parsing: Array(data)), let generation = saved["generation"]?.integerValue,
            let ids = saved["seen"]?.arrayValue?.compactMap(\.stringValue)
        else {
            logger.warning("\(old) cannot be read as the ids already published; starting without them")
            return
        }
        state.generation = Int(generation)
        state.seen = Set(ids.map(Self.hash))
        startFile(generation: Int(generation))
        append(Array(state.seen))
        try? FileManager.default.removeItem(atPath: old)
    }

    /// Replaces the file with an empty one for `generation`, through a rename so that a crash
    /// leaves one file or the other.
    private func startFile(generation: Int) {
        guard let file else { return }
        var bytes = Self.header
        withUnsafeBytes(of: UInt64(generation).littleEndian) { bytes.append(contentsOf: $0) }
        do {
            let directory = (file as NSString).deletingLastPathComponent
            try FileManager.default.createDirectory(atPath: directory, withIntermediateDirectories: true, attributes: [.posixPermissions: 0o700])
            try Data(bytes).write(to: URL(fileURLWithPath: file), options: .atomic)
        } catch {
            logger.warning("cannot start \(file), the list of published entries: \(error.localizedDescription)")
        }
    }

    /// Appends `hashes` to the file.
    private func append(_ hashes: [UInt64]) {
        guard let file else { return }
        var bytes: [UInt8] = []
        bytes.reserveCapacity(hashes.count * 8)
        for hash in hashes { withUnsafeBytes(of: hash.littleEndian) { bytes.append(contentsOf: $0) } }
        let descriptor = open(file, O_WRONLY | O_APPEND | O_CLOEXEC)
        guard descriptor >= 0 else {
            logger.warning("cannot add to \(file), the list of published entries: \(String(cString: strerror(errno)))")
            return
        }
        defer { close(descriptor) }
        var offset = 0
        while offset < bytes.count {
            let written = bytes[offset...].withUnsafeBytes { Glibc.write(descriptor, $0.baseAddress, $0.count) }
            guard written > 0 else {
                if written < 0, errno == EINTR { continue }
                logger.warning("cannot add to \(file), the list of published entries: \(String(cString: strerror(errno)))")
                return
            }
            offset += written
        }
    }

    private static func integer(_ bytes: [UInt8], at offset: Int) -> UInt64 {
        var value: UInt64 = 0
        for index in (0..<8).reversed() { value = value << 8 | UInt64(bytes[offset + index]) }
        return value
    }
}
