import FeedKit
import Foundation

/// What a polled `rss` feed has published: the ids of the entries already on a page (so that no
/// entry is published twice, even when a document re-orders or edits it), and the batches of
/// entries each look at the document found new (so that a page asked for again comes back the same).
///
/// The ids are bounded: the most recent ``limit`` are kept, the oldest forgotten first. They are
/// kept with the generation they belong to in `seen-entries.json` in the feed's state directory,
/// written atomically after every page, so they survive a restart; a new generation (a `refresh`)
/// starts with none, and pages the whole document again. The batches live in memory only.
final class PublishedEntries: Sendable {
    /// How many ids are remembered: far more than any document holds at once.
    static let limit = 10_000

    private struct State {
        var loaded = false
        var generation: Int?
        /// Oldest first, each once.
        var order: [String] = []
        var seen: Set<String> = []
        var batches: [Int: [Item]] = [:]
    }

    private let file: String?
    private let logger: Logger
    private let state = Locked(State())

    /// `directory` nil keeps the memory in this process only.
    init(directory: String?, logger: Logger) {
        file = directory.map { "\($0)/seen-entries.json" }
        self.logger = logger
    }

    /// The batch numbered `number` of `generation`, if this process made it.
    func batch(_ number: Int, generation: Int) -> [Item]? {
        state.withLock { state in
            prepare(&state, generation: generation)
            return state.batches[number]
        }
    }

    /// Keeps the entries of `entries` never published in `generation` as batch `number`, and
    /// returns them (none: nothing new). A document listing an id twice counts it once.
    func makeBatch(_ number: Int, of entries: [Item], generation: Int) -> [Item] {
        state.withLock { state in
            prepare(&state, generation: generation)
            var ids: Set<String> = []
            let fresh = entries.filter { !state.seen.contains($0.id) && ids.insert($0.id).inserted }
            if !fresh.isEmpty {
                state.batches[number] = fresh
                // The batches only serve pages asked for again; the oldest go first.
                while state.batches.values.reduce(0, { $0 + $1.count }) > Self.limit, let oldest = state.batches.keys.min(), oldest != number {
                    state.batches[oldest] = nil
                }
            }
            return fresh
        }
    }

    /// Records `items` as published and saves the ids.
    func published(_ items: [Item], generation: Int) {
        let snapshot: JSONValue? = state.withLock { state in
            var added = false
            for item in items where state.seen.insert(item.id).inserted {
                state.order.append(item.id)
                added = true
            }
            if state.order.count > Self.limit {
                let forgotten = state.order.prefix(state.order.count - Self.limit)
                state.seen.subtract(forgotten)
                state.order.removeFirst(forgotten.count)
            }
            guard added, file != nil else { return nil }
            return ["generation": .integer(Int64(generation)), "seen": .array(state.order.map(JSONValue.string))]
        }
        if let snapshot { save(snapshot) }
    }

    /// Loads the file the first time, and forgets everything when the generation changes.
    private func prepare(_ state: inout State, generation: Int) {
        if !state.loaded {
            state.loaded = true
            load(into: &state)
        }
        guard state.generation != generation else { return }
        state = State(loaded: true, generation: generation)
    }

    private func load(into state: inout State) {
        guard let file, FileManager.default.fileExists(atPath: file) else { return }
        guard let data = FileManager.default.contents(atPath: file), let saved = try? JSONValue(parsing: Array(data)),
            let generation = saved["generation"]?.integerValue, let ids = saved["seen"]?.arrayValue?.compactMap(\.stringValue)
        else {
            logger.warning("\(file) cannot be read as the ids already published; starting without them")
            return
        }
        state.generation = Int(generation)
        for id in ids.suffix(Self.limit) where state.seen.insert(id).inserted { state.order.append(id) }
    }

    /// Written to a temporary file and renamed over the old one, so a crash leaves one or the other.
    private func save(_ snapshot: JSONValue) {
        guard let file else { return }
        do {
            let directory = (file as NSString).deletingLastPathComponent
            try FileManager.default.createDirectory(atPath: directory, withIntermediateDirectories: true, attributes: [.posixPermissions: 0o700])
            try Data(snapshot.serialized).write(to: URL(fileURLWithPath: file), options: .atomic)
        } catch {
            logger.warning("cannot save the ids already published to \(file): \(error.localizedDescription)")
        }
    }
}
