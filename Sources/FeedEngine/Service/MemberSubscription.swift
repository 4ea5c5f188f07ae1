import FeedKit

/// One feed's reading of another (a `merge` feed's of one member): a client of the
/// ``FeedService`` that follows the member as any follower does, so a live member keeps being
/// looked at (its `poll`, its `follow`) and its pages are pushed here as they come, for as long
/// as the reader keeps using it and ``lease`` after.
///
/// It keeps the pages pushed to it from the one the reader reads next on, at most ``window`` of
/// them (flow control holds the rest back in the member, as for any follower). A page asked for
/// that is neither kept nor the next one (the reader went back, or jumped) starts the following
/// again just before it.
@MainActor
final class MemberSubscription: ClientHandle {
    /// What a read found: a page of the member, or that it has none there (for good, or for now).
    enum Answer {
        case page(Page)
        case none(generation: Int, final: Bool)
    }

    /// A read waiting for its page.
    struct PendingRead {
        let id: Int
        let page: Int
        let answer: (Result<Answer, SourceError>) -> Void
    }

    /// Pages kept ahead of the reader; more wait in the member until it takes these.
    static let window = 4
    /// How long the member stays followed after the reader's last read or wait ended.
    static let lease = Duration.seconds(10)

    /// Tags what answers this subscription's own `next`, as against what is pushed to it.
    private static let asked = ReplyTag(Array("member read".utf8))

    let clientID: ClientID
    let feed: String
    private let service: FeedService
    /// Called once the subscription has ended, by the lease or by the member going away.
    private let ended: (MemberSubscription) -> Void

    /// The generation followed, nil until subscribed (and again once ended).
    private var generation: Int?
    /// The last page the member delivered here.
    private var position = 0
    private var kept: [Int: Page] = [:]
    /// Whether a `next` is outstanding: it makes the member answer `end` past its newest page.
    private var asking = false
    private var reads: [PendingRead] = []
    private var lastRead = 0
    private var newsWaits: [NewsWait] = []
    /// What the member's source said last while failing, for a read's timeout message.
    private var lastFailure: String?
    /// Reads and waits under way, when the last one ended, and the timer that ends the
    /// subscription once it has been unused for ``lease``.
    private var users = 0
    private var lastUse = ContinuousClock.now
    private var expiry: Task<Void, Never>?

    init(service: FeedService, feed: String, ended: @escaping (MemberSubscription) -> Void) {
        self.service = service
        clientID = service.connect()
        self.feed = feed
        self.ended = ended
    }

    var canTakePage: Bool { kept.count < Self.window }

    func flush() {}

    // MARK: The reader's calls

    /// Page `number` of the member: kept already, or once the member has it, says it has none,
    /// or fails; at once with an error when the member's source is known to be failing.
    func read(_ number: Int, timeout: Duration, answer: @escaping (Result<Answer, SourceError>) -> Void) {
        use()
        let done: (Result<Answer, SourceError>) -> Void = { [self] in
            release()
            answer($0)
        }
        follow(from: number)
        if let page = kept[number] { return done(.success(.page(page))) }
        if let health = service.status(of: feed)?.health, health.state != .ok {
            return done(.failure(.transient("feed \(feed) is \(health.state.rawValue): \(health.lastError ?? "no answer yet")")))
        }
        lastRead += 1
        let id = lastRead
        reads.append(PendingRead(id: id, page: number, answer: done))
        if !asking {
            asking = true
            service.next(self, feed: feed, replyTo: Self.asked) { [self] in if case .failure(let error) = $0 { failReads(.transient(error.message)) } }
        }
        Task {
            try? await Task.sleep(for: timeout)
            let reason = lastFailure.map { ": \($0)" } ?? ""
            answerReads { $0.id == id ? .failure(.transient("feed \(feed): page \(number) not ready within \(timeout.wholeMilliseconds) ms\(reason)")) : nil }
        }
    }

    /// Follows the member from page `number` on and tells `wait` once there is news for it: the
    /// page is kept (at once if it is already), or the member ended, recovered, started a new
    /// generation or went away.
    func watch(from number: Int, for wait: NewsWait) {
        use()
        wait.onEnd { [weak self] in self?.release() }
        follow(from: number)
        if kept[number] != nil { return wait.tell() }
        newsWaits.append(wait)
    }

    /// Drops the pages before `number` and makes sure the member delivers `number` next.
    private func follow(from number: Int) {
        let wasFull = !canTakePage
        kept = kept.filter { $0.key >= number }
        if generation == nil || (kept[number] == nil && number != position + 1) {
            resubscribe(after: number - 1)
        } else if wasFull, canTakePage {
            service.resume(self)
        }
    }

    private func resubscribe(after page: Int) {
        kept = [:]
        position = page
        asking = false
        answerReads { $0.page != page + 1 ? .failure(.transient("feed \(feed): the read of page \($0.page) was superseded")) : nil }
        service.subscribe(self, to: feed, after: page, follow: true) { [self] result in
            switch result {
            case .success(let subscribed): generation = subscribed.generation
            case .failure(let error): end(.rejected(error.message))
            }
        }
    }

    // MARK: What the member sends

    func receive(_ event: ClientEvent) {
        switch event {
        case .page(let page, let replyTo):
            if replyTo != nil { asking = false }
            position = page.number
            kept[page.number] = page
            lastFailure = nil
            answerReads { $0.page == page.number ? .success(.page(page)) : nil }
            tellNews()
        case .end(_, let page, let replyTo):
            if replyTo != nil { asking = false }
            let status = service.status(of: feed)
            let none = Answer.none(generation: status?.generation ?? generation ?? 0, final: status?.reachedEnd ?? false)
            answerReads { $0.page > page ? .success(none) : nil }
            if replyTo == nil { tellNews() }
        case .upstreamFailing(_, let message, _, _):
            lastFailure = message
            answerReads { _ in .failure(.transient("feed \(self.feed): \(message)")) }
        case .refreshed(_, let newGeneration, _):
            generation = newGeneration
            (position, kept) = (0, [:])
            failReads(.transient("feed \(feed) started generation \(newGeneration)"))
            tellNews()
        case .unsubscribed:
            end(.rejected("feed \(feed) was removed"))
        }
    }

    // MARK: Helpers

    /// Answers the reads `outcome` has a result for; the others keep waiting.
    private func answerReads(_ outcome: (PendingRead) -> Result<Answer, SourceError>?) {
        var due: [(PendingRead, Result<Answer, SourceError>)] = []
        reads.removeAll { read in
            guard let result = outcome(read) else { return false }
            due.append((read, result))
            return true
        }
        for (read, result) in due { read.answer(result) }
    }

    private func failReads(_ error: SourceError) {
        answerReads { _ in .failure(error) }
    }

    private func tellNews() {
        let waits = newsWaits
        newsWaits = []
        for wait in waits { wait.tell() }
    }

    private func use() {
        users += 1
    }

    /// One use ended; once none is left for ``lease``, the subscription ends (one timer at a time).
    private func release() {
        users -= 1
        lastUse = .now
        guard expiry == nil else { return }
        expiry = Task {
            while users == 0, generation != nil {
                let idle = lastUse.duration(to: .now)
                guard idle >= Self.lease else {
                    try? await Task.sleep(for: Self.lease - idle)
                    continue
                }
                end(nil)
            }
            expiry = nil
        }
    }

    /// Stops following: reads still waiting fail with `error` (or as superseded).
    private func end(_ error: SourceError?) {
        generation = nil
        kept = [:]
        failReads(error ?? .transient("feed \(feed): the read was given up"))
        tellNews()
        service.disconnect(self)
        ended(self)
    }
}

/// One reader's wait for news of any of the feeds it reads: the first news, or its timeout, ends it.
@MainActor
final class NewsWait {
    private var continuation: CheckedContinuation<Void, Never>?
    private var endings: [() -> Void] = []

    init(_ continuation: CheckedContinuation<Void, Never>, timeout: Duration) {
        self.continuation = continuation
        Task {
            try? await Task.sleep(for: timeout)
            self.tell()
        }
    }

    /// Runs `ending` when the wait ends.
    func onEnd(_ ending: @escaping () -> Void) {
        endings.append(ending)
    }

    /// Ends the wait (once).
    func tell() {
        guard let continuation else { return }
        self.continuation = nil
        for ending in endings { ending() }
        continuation.resume()
    }
}
