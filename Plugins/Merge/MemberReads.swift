import FeedKit

/// The members of a merged feed as one fetch sees them: their positions, advanced as items are
/// taken, and the member pages read for this fetch only (the engine caches member pages, so a
/// page asked for again re-reads the same ones and comes back the same).
struct MemberReads {
    /// Why a member gives nothing to the page being built, though it has not ended.
    enum Skip: Hashable {
        /// A live member at its newest page, with nothing past it yet.
        case nothingYet
        /// Reading it failed (its source is known to be failing, or it did not answer within the timeout).
        case failed(SourceError)
        /// The fetch's time ran out before its next page could be read.
        case outOfTime
    }

    let members: [String]
    /// The merged feed, which reads the members.
    let feed: String
    private(set) var positions: [MemberPosition]
    /// The members left out of this page, and why.
    private(set) var skipped: [Int: Skip] = [:]
    private var pages: [Int: (items: [Item], isLast: Bool)] = [:]
    private let reader: any FeedReader
    private let readTimeout: Duration
    private let deadline: ContinuousClock.Instant

    /// - Parameters:
    ///   - readTimeout: how long one member read may take.
    ///   - deadline: when the fetch must have finished reading members, so that it answers
    ///     within its own timeout even when several members are slow one after another.
    init(feed: String, members: [String], token: MergeToken, reader: any FeedReader, readTimeout: Duration, deadline: ContinuousClock.Instant) {
        self.feed = feed
        self.members = members
        positions = members.map(token.position(of:))
        self.reader = reader
        self.readTimeout = readTimeout
        self.deadline = deadline
    }

    /// Whether every member has ended and all its items are taken.
    var allEnded: Bool { positions.allSatisfy(\.ended) }

    /// The positions, as the next page's token carries them.
    func token(turn: Int) -> MergeToken {
        MergeToken(members: Dictionary(uniqueKeysWithValues: zip(members, positions)), turn: turn)
    }

    /// Reads the current page of every member still going at once, so that one slow member
    /// costs the fetch one read timeout, not one per member.
    mutating func readAllAtOnce() async throws(SourceError) {
        let pending = members.indices.filter { !positions[$0].ended && pages[$0] == nil && skipped[$0] == nil }
        let (timeout, feed) = (readTimeout, feed)
        let reads = await withTaskGroup(of: (Int, Result<FeedPage, SourceError>).self) { group in
            for index in pending {
                let (reader, member, page) = (reader, members[index], positions[index].page)
                group.addTask { (index, await Self.read(page, of: member, for: feed, from: reader, timeout: timeout)) }
            }
            return await group.reduce(into: [(Int, Result<FeedPage, SourceError>)]()) { $0.append($1) }
        }
        for (index, result) in reads.sorted(by: { $0.0 < $1.0 }) { try apply(result, to: index) }
    }

    /// The next item of member `index` (gathered: id `MEMBER:ID`), reading its pages as needed;
    /// nil when it has ended or is skipped for this page.
    mutating func head(_ index: Int) async throws(SourceError) -> Item? {
        while !positions[index].ended, skipped[index] == nil {
            guard let page = pages[index] else {
                try await readCurrentPage(of: index)
                continue
            }
            if positions[index].offset < page.items.count {
                return page.items[positions[index].offset].gathered(from: members[index])
            }
            settle(index)
        }
        return nil
    }

    /// Takes the item ``head(_:)`` returned. A member whose last page is used up ends here, so
    /// that the page taking the last items of every member can say it is the end.
    mutating func take(_ index: Int) {
        positions[index].offset += 1
        settle(index)
    }

    /// Moves past a used-up page: to the next one, or to the member's end after its last page.
    private mutating func settle(_ index: Int) {
        guard let page = pages[index], positions[index].offset >= page.items.count else { return }
        if page.isLast {
            positions[index].ended = true
        } else {
            positions[index].page += 1
            positions[index].offset = 0
        }
        pages[index] = nil
    }

    private mutating func readCurrentPage(of index: Int) async throws(SourceError) {
        let left = ContinuousClock.now.duration(to: deadline)
        guard left > .milliseconds(1) else {
            skipped[index] = .outOfTime
            return
        }
        let result = await Self.read(positions[index].page, of: members[index], for: feed, from: reader, timeout: min(readTimeout, left))
        try apply(result, to: index)
    }

    private static func read(
        _ page: Int, of member: String, for feed: String, from reader: any FeedReader, timeout: Duration
    ) async -> Result<FeedPage, SourceError> {
        do throws(SourceError) {
            return .success(try await reader.page(page, of: member, for: feed, timeout: timeout))
        } catch {
            return .failure(error)
        }
    }

    /// Records what a read of member `index`'s current page found. A page of another generation
    /// than the one this merged generation started with ends this merged generation.
    private mutating func apply(_ result: Result<FeedPage, SourceError>, to index: Int) throws(SourceError) {
        switch result {
        case .failure(let error):
            skipped[index] = .failed(error)
        case .success(.none(let generation, let final)):
            try check(generation, of: index)
            if final { positions[index].ended = true } else { skipped[index] = .nothingYet }
        case .success(.page(let generation, let items, let isLast)):
            try check(generation, of: index)
            pages[index] = (items, isLast)
        }
    }

    private mutating func check(_ generation: Int, of index: Int) throws(SourceError) {
        if let known = positions[index].generation, known != generation {
            throw SourceError.transient("member \(members[index]) started generation \(generation); the merged feed starts a new one")
        }
        positions[index].generation = generation
    }
}
