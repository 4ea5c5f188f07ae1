import FeedKit
import Foundation
import Glibc

/// The cursors and next-page URLs an `http` feed has fetched pages at in its generation, each
/// with the page it was, so that a walk that comes back to one ends with an error instead of
/// going round forever (SPEC §9).
///
/// Seen before means seen as another page. A page fetched again (its cache entry was dropped, the
/// daemon restarted, a hung call was abandoned) is at the same location as before and names the
/// same next one: no cycle. A location asked for as page N that page M was fetched at, or named
/// by page N as its next when page M (M ≠ N + 1) was fetched at it, is one.
///
/// A generation is known by its number and its seed, which the engine draws when it starts one:
/// a feed removed and defined again starts at generation 1 again, but with another seed, and does
/// not take the old history for its own. A call of an older generation than the newest seen (an
/// abandoned one, finishing late) is neither checked nor recorded.
///
/// One history per feed, shared by every adapter instance of it that is alive (the engine
/// replaces a hung one while it may still run), and, with a state directory, kept in the file
/// `next-pages` there, so it survives a restart. Pages another instance of a fleet fetched are not
/// in it; a cycle through them is found within one turn once this instance fetches them.
final class CursorHistory: Sendable {
    /// The most locations remembered. Past it, those of the older half of the pages are forgotten,
    /// and a cycle back to one of them goes unnoticed.
    static let limit = 200_000

    /// A generation as the engine names it in every ``PageRequest``.
    struct Generation: Hashable, Sendable {
        let number: Int
        let seed: String
    }

    private struct State {
        var loaded = false
        var generation: Generation?
        /// The hash of each location's token text, with the page fetched at it.
        var pages: [UInt64: Int] = [:]
        var warned = false
    }

    private let file: String?
    private let logger: Logger
    private let state = Locked(State())

    private init(file: String?, logger: Logger) {
        self.file = file
        self.logger = logger
    }

    private struct Entry: Sendable {
        weak let history: CursorHistory?
    }

    private static let living = Locked<[String: Entry]>([:])

    /// The history of `feed`, shared with every adapter instance of it alive; in `directory`
    /// when there is one, else kept in this process only (and then told apart by `template`).
    static func shared(feed: String, template: String, directory: String?, logger: Logger) -> CursorHistory {
        let key = directory ?? "\(feed) \(template)"
        return living.withLock { living in
            if let history = living[key]?.history { return history }
            living = living.filter { $0.value.history != nil }
            let history = CursorHistory(file: directory.map { "\($0)/next-pages" }, logger: logger)
            living[key] = Entry(history: history)
            return history
        }
    }

    /// Page `page`, at `url`, is fetched at `location`; throws if another page was.
    func enter(_ location: PageLocation, page: Int, url: URL, generation: Generation) throws(SourceError) {
        guard let earlier = place(location, page: page, generation: generation) else { return }
        throw SourceError.rejected(
            "page \(page) (\(url.absoluteString)) is asked for at \(location.description), where page \(earlier) was: "
                + "the pages go round in a cycle; the feed stops here")
    }

    /// Page `page`, fetched from `url`, names `next` as the page after it; throws if another
    /// page than the one after it was fetched there.
    func follow(_ next: PageLocation, after page: Int, url: URL, generation: Generation) throws(SourceError) {
        guard let earlier = place(next, page: page + 1, generation: generation) else { return }
        throw SourceError.rejected(
            "page \(page) (\(url.absoluteString)) names \(next.description) as its next page, where page \(earlier) was: "
                + "the pages go round in a cycle; the feed stops here")
    }

    /// Records `location` as page `page`; returns the other page it was, if any.
    private func place(_ location: PageLocation, page: Int, generation: Generation) -> Int? {
        // Pages by number are computed, and cannot come back round.
        guard let text = location.tokenText else { return nil }
        let hash = StableHash.fnv1a64(text.utf8)
        return state.withLock { state -> Int? in
            guard prepare(&state, generation: generation) else { return nil }
            if let earlier = state.pages[hash] { return earlier == page ? nil : earlier }
            state.pages[hash] = page
            if state.pages.count > Self.limit {
                let newest = state.pages.values.max() ?? page
                state.pages = state.pages.filter { $0.value > newest - Self.limit / 2 }
                save(&state)
            } else {
                append("\(page) \(String(hash, radix: 16))\n", &state)
            }
            return nil
        }
    }

    /// Loads the file the first time; starts afresh for a newer generation. False for an older one.
    private func prepare(_ state: inout State, generation: Generation) -> Bool {
        if !state.loaded {
            state.loaded = true
            load(into: &state)
        }
        if state.generation == generation { return true }
        if let current = state.generation, current.number > generation.number { return false }
        state.generation = generation
        state.pages = [:]
        save(&state)
        return true
    }

    /// The file: a JSON line naming the generation, then one line per location, `PAGE HASH`. A
    /// line cut short by a crash is skipped.
    private func load(into state: inout State) {
        guard let file, let data = FileManager.default.contents(atPath: file) else { return }
        var lines = data.split(separator: UInt8(ascii: "\n"))[...]
        guard let header = lines.popFirst().flatMap({ try? JSONValue(parsing: Array($0)) }),
            let number = header["generation"]?.integerValue, let seed = header["seed"]?.stringValue
        else {
            logger.warning("\(file) does not hold the pages of a generation; starting without them")
            return
        }
        state.generation = Generation(number: Int(number), seed: seed)
        for line in lines {
            let fields = line.split(separator: UInt8(ascii: " "))
            guard fields.count == 2, let page = Int(String(decoding: fields[0], as: UTF8.self)),
                let hash = UInt64(String(decoding: fields[1], as: UTF8.self), radix: 16)
            else { continue }
            state.pages[hash] = state.pages[hash] ?? page
        }
    }

    /// Writes the whole history to a temporary file renamed over the old one.
    private func save(_ state: inout State) {
        guard let file, let generation = state.generation else { return }
        let header: JSONValue = ["generation": .integer(Int64(generation.number)), "seed": .string(generation.seed)]
        var text = header.jsonText + "\n"
        for (hash, page) in state.pages { text += "\(page) \(String(hash, radix: 16))\n" }
        do {
            try FileManager.default.createDirectory(
                atPath: (file as NSString).deletingLastPathComponent, withIntermediateDirectories: true, attributes: [.posixPermissions: 0o700])
            try Data(text.utf8).write(to: URL(fileURLWithPath: file), options: .atomic)
        } catch {
            warnOnce(&state, "cannot save the pages seen to \(file): \(error.localizedDescription)")
        }
    }

    private func append(_ line: String, _ state: inout State) {
        guard let file else { return }
        let descriptor = open(file, O_WRONLY | O_APPEND | O_CLOEXEC)
        guard descriptor >= 0 else {
            return warnOnce(&state, "cannot add to \(file): \(String(cString: strerror(errno)))")
        }
        defer { close(descriptor) }
        let bytes = Array(line.utf8)
        if write(descriptor, bytes, bytes.count) != bytes.count {
            warnOnce(&state, "cannot add to \(file): \(String(cString: strerror(errno)))")
        }
    }

    /// A state directory that cannot be written costs cycle detection across restarts, not the
    /// feed: said once, not on every page.
    private func warnOnce(_ state: inout State, _ message: String) {
        guard !state.warned else { return }
        state.warned = true
        logger.warning(message + "; a cycle through pages fetched before a restart may go unnoticed")
    }
}

extension CursorHistory.Generation {
    /// The generation `request` is of.
    init(_ request: PageRequest) {
        self.init(number: request.generation, seed: request.seed)
    }
}
