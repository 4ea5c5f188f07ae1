import FeedKit

/// Member feeds for a `merge` adapter under test: each a script of pages the test can change
/// between fetches (add a page, fail, start a new generation), read as the engine's
/// ``FeedReader`` would serve them.
final class ScriptedFeeds: FeedReader {
    struct Member {
        var generation = 1
        var pages: [[Item]]
        /// A live member may publish more pages: past its last one it has nothing yet.
        var live = false
        /// Whether its last page says so, or the page after it answers that there is none.
        var lastPageSaysSo = true
        var failing = false
        /// Answers nothing until the read's timeout has passed, then fails.
        var slow = false
    }

    private let members: Locked<[String: Member]>
    private let readLog = Locked<[String]>([])
    private let waitLog = Locked<[[String: Int]]>([])

    init(_ members: [String: Member]) {
        self.members = Locked(members)
    }

    /// A finite member whose pages hold items with these ids (data `{"n": ID}`).
    static func finite(_ pages: [[String]]) -> Member {
        Member(pages: pages.map { $0.map(item) })
    }

    static func item(_ id: String) -> Item {
        Item(id: id, data: ["n": .string(id)])
    }

    /// Changes member `name`'s script.
    func change(_ name: String, _ edit: (inout Member) -> Void) {
        members.withLock { edit(&$0[name]!) }
    }

    /// Every read so far, as `MEMBER#PAGE`.
    var reads: [String] { readLog.withLock { $0 } }

    /// Every wait for news so far: the pages the reader would read next.
    var newsWaits: [[String: Int]] { waitLog.withLock { $0 } }

    func waitForNews(of pages: [String: Int], for reader: String, timeout: Duration) async {
        waitLog.withLock { $0.append(pages) }
    }

    func page(_ page: Int, of feed: String, for reader: String, timeout: Duration) async throws(SourceError) -> FeedPage {
        readLog.withLock { $0.append("\(feed)#\(page)") }
        guard let member = members.withLock({ $0[feed] }) else { throw SourceError.rejected("no feed \(feed)") }
        if member.failing { throw SourceError.transient("\(feed) is down") }
        if member.slow {
            try? await Task.sleep(for: timeout)
            throw SourceError.transient("\(feed): no answer in time")
        }
        guard member.pages.indices.contains(page - 1) else {
            return .none(generation: member.generation, final: !member.live)
        }
        let isLast = !member.live && member.lastPageSaysSo && page == member.pages.count
        return .page(generation: member.generation, items: member.pages[page - 1], isLast: isLast)
    }
}

/// Keeps every line a logger writes, with its level.
final class RecordingSink: LogSink {
    private let lines = Locked<[(LogLevel, String)]>([])

    func write(_ level: LogLevel, _ message: String) {
        lines.withLock { $0.append((level, message)) }
    }

    var warnings: [String] { lines.withLock { $0.filter { $0.0 == .warning }.map(\.1) } }
}
