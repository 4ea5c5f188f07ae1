import FeedKit
import Testing

@testable import FeedEngine

/// A clock that moves only when a test advances it, so retry, timeout and poll timing are tested
/// without sleeping.
final class ManualClock: EngineClock {
    private struct Sleeper {
        let id: Int
        let deadline: ContinuousClock.Instant
        let continuation: CheckedContinuation<Void, any Error>
    }

    private struct State {
        var now = ContinuousClock.now
        var sleepers: [Sleeper] = []
        var lastID = 0
    }

    private let state = Locked(State())

    var now: ContinuousClock.Instant { state.withLock { $0.now } }

    var sleeperCount: Int { state.withLock { $0.sleepers.count } }

    func sleep(until deadline: ContinuousClock.Instant) async throws {
        let id = state.withLock { state -> Int in
            state.lastID += 1
            return state.lastID
        }
        try await withTaskCancellationHandler {
            try await withCheckedThrowingContinuation { (continuation: CheckedContinuation<Void, any Error>) in
                let due = state.withLock { state -> Bool in
                    if deadline <= state.now { return true }
                    state.sleepers.append(Sleeper(id: id, deadline: deadline, continuation: continuation))
                    return false
                }
                if due { continuation.resume() }
                if Task.isCancelled { wake(id, throwing: true) }
            }
        } onCancel: {
            wake(id, throwing: true)
        }
    }

    /// Moves time on and wakes every sleeper whose deadline has come.
    func advance(by duration: Duration) {
        let due = state.withLock { state -> [Sleeper] in
            state.now = state.now + duration
            let due = state.sleepers.filter { $0.deadline <= state.now }
            state.sleepers.removeAll { $0.deadline <= state.now }
            return due
        }
        for sleeper in due { sleeper.continuation.resume() }
    }

    private func wake(_ id: Int, throwing: Bool) {
        let sleeper = state.withLock { state -> Sleeper? in
            guard let index = state.sleepers.firstIndex(where: { $0.id == id }) else { return nil }
            return state.sleepers.remove(at: index)
        }
        sleeper?.continuation.resume(throwing: CancellationError())
    }
}

/// What a scripted fetch is answered with.
enum ScriptedAnswer: Sendable {
    case page(items: Int, next: NextPage)
    case failure(SourceError)
    case notYet
}

/// Adapter instances whose fetches wait until the test answers them, and who record every call:
/// how many were in flight at once per instance, and what each asked for. Instances made by the
/// same script share the record, so an instance replaced after a hang is still watched.
final class FetchScript: Sendable {
    struct Call: Sendable {
        let number: Int
        let instance: Int
        let request: PageRequest
    }

    private struct State {
        var pending: [(call: Call, continuation: CheckedContinuation<ScriptedAnswer, Never>)] = []
        var inFlight: [Int: Int] = [:]
        var overlaps: [String] = []
        var calls: [Call] = []
        var instances = 0
        var newDataWaiters: [CheckedContinuation<Void, Never>] = []
    }

    private let state = Locked(State())
    /// Whether a cancelled fetch returns at once (as HTTP does) or only when answered (a hung plugin).
    let honoursCancellation: Bool
    /// Whether items depend on the generation's seed too, as a seedless randomuser's do.
    let seededItems: Bool

    init(honoursCancellation: Bool = true, seededItems: Bool = false) {
        self.honoursCancellation = honoursCancellation
        self.seededItems = seededItems
    }

    var calls: [Call] { state.withLock { $0.calls } }
    var overlaps: [String] { state.withLock { $0.overlaps } }
    var pendingCalls: [Call] { state.withLock { $0.pending.map(\.call) } }
    var requestedPages: [Int] { calls.map(\.request.page) }

    func makeAdapter() -> ScriptedAdapter {
        let instance = state.withLock { state -> Int in
            state.instances += 1
            return state.instances
        }
        return ScriptedAdapter(script: self, instance: instance)
    }

    /// Answers the oldest pending call (or the one numbered `number`).
    @discardableResult
    func answer(_ answer: ScriptedAnswer, call number: Int? = nil) -> Call? {
        let found = state.withLock { state -> (Call, CheckedContinuation<ScriptedAnswer, Never>)? in
            guard let index = number.map({ number in state.pending.firstIndex { $0.call.number == number } }) ?? (state.pending.isEmpty ? nil : 0)
            else { return nil }
            return state.pending.remove(at: index)
        }
        guard let (call, continuation) = found else { return nil }
        continuation.resume(returning: answer)
        return call
    }

    /// How many adapter calls wait for new data (after `.later` or `.notYet`).
    var newDataWaiterCount: Int { state.withLock { $0.newDataWaiters.count } }

    /// Ends every wait for new data: the source may have more now.
    func signalNewData() {
        let waiters = state.withLock { state in
            defer { state.newDataWaiters = [] }
            return state.newDataWaiters
        }
        for waiter in waiters { waiter.resume() }
    }

    fileprivate func waitForNewData() async {
        await withCheckedContinuation { continuation in state.withLock { $0.newDataWaiters.append(continuation) } }
    }

    fileprivate func fetch(_ request: PageRequest, instance: Int) async -> ScriptedAnswer? {
        let number = state.withLock { state -> Int in
            let number = state.calls.count + 1
            state.calls.append(Call(number: number, instance: instance, request: request))
            state.inFlight[instance, default: 0] += 1
            if state.inFlight[instance]! > 1 {
                state.overlaps.append("call \(number) (page \(request.page)) started on instance \(instance) while another was in flight")
            }
            return number
        }
        defer { state.withLock { $0.inFlight[instance, default: 1] -= 1 } }
        let answer = await withTaskCancellationHandler {
            await withCheckedContinuation { continuation in
                state.withLock { $0.pending.append((Call(number: number, instance: instance, request: request), continuation)) }
                if Task.isCancelled, honoursCancellation { self.answer(.failure(.transient("cancelled")), call: number) }
            }
        } onCancel: {
            if honoursCancellation { self.answer(.failure(.transient("cancelled")), call: number) }
        }
        return answer
    }
}

/// One instance of a scripted source. Items of source page P are `P-1`, `P-2`, … (`SEED:P-1`, …
/// for a script with seeded items); pages are directly addressable when `direct`.
struct ScriptedAdapter: SourceAdapter {
    static let sourceName = "scripted"
    let script: FetchScript
    let instance: Int
    var pageAddressing: PageAddressing = .sequential
    /// False: a source whose pages are kept, as an `rss` poll's or an exec plugin's that says so.
    var reproducesPages = true

    init(script: FetchScript, instance: Int) {
        self.script = script
        self.instance = instance
    }

    init(options: AdapterOptions, context: AdapterContext) throws {
        fatalError("made by a FetchScript")
    }

    func fetch(_ request: PageRequest) async throws -> FetchResult {
        switch await script.fetch(request, instance: instance) {
        case .page(let count, let next)?:
            let prefix = script.seededItems ? "\(request.seed.prefix(6)):" : ""
            return .page((1...max(count, 1)).prefix(count).map { Item(id: "\(prefix)\(request.page)-\($0)", data: .integer(Int64($0))) }, next: next)
        case .failure(let error)?:
            throw error
        case .notYet?, nil:
            return .notYet
        }
    }

    func waitForNewData(after request: PageRequest, pollInterval: Duration) async throws {
        await script.waitForNewData()
    }
}

/// Encodes a page as `{"type":"page" generation page item-ids item-count}`, so a test can tell
/// which items a delivered page holds without the server's encoder. It starts and ends as every
/// page line does (which is what the engine checks of a page the fleet published).
struct DescribingEncoder: PageEncoder {
    /// Pads each page to this many bytes per item, to give pages a size.
    var bytesPerItem = 0

    func encode(feed: String, generation: Int, number: Int, items: [Item], isLast: Bool) -> SharedBytes {
        let ids = items.isEmpty ? "-" : items.map(\.id).joined(separator: ",")
        let description = Array(#"{"type":"page""#.utf8) + Array(" \(generation) \(number) \(ids) \(items.count)".utf8)
        let padding = max(items.count * bytesPerItem - description.count, 0)
        return SharedBytes(description + [UInt8](repeating: UInt8(ascii: " "), count: padding) + Array("}\n".utf8))
    }
}

/// Encodes a page's items as the server's page line does (`"items":[{"id":…,"data":…}]`), for
/// readers that look inside cached pages.
struct ItemsEncoder: PageEncoder {
    func encode(feed: String, generation: Int, number: Int, items: [Item], isLast: Bool) -> SharedBytes {
        let entries = JSONValue.array(items.map { .object(["id": .string($0.id), "data": $0.data]) })
        return SharedBytes(JSONValue.object(["generation": .integer(Int64(generation)), "items": entries]).serialized + [UInt8(ascii: "\n")])
    }
}

/// What a delivered page says about itself, as ``DescribingEncoder`` wrote it.
struct PageDescription: Equatable {
    let generation: Int
    let number: Int
    /// Every item's id, in order.
    let items: [String]
    let itemCount: Int

    var firstItem: String { items.first ?? "-" }

    init(_ page: Page) {
        let fields = String(decoding: page.body.buffer, as: UTF8.self).split(separator: " ").dropFirst()
        generation = Int(fields[1])!
        number = Int(fields[2])!
        items = fields[3] == "-" ? [] : fields[3].split(separator: ",").map(String.init)
        itemCount = Int(fields[4])!
    }
}

/// A client stand-in that records every event in order.
@MainActor
final class EventLog: ClientHandle {
    let clientID: ClientID
    private(set) var events: [ClientEvent] = []
    /// What the service answered with an error, in order.
    private(set) var failures: [ServiceError] = []
    /// Each `subscribed` answer, with the number of events that came before it.
    private(set) var subscriptions: [(before: Int, subscribed: Subscribed)] = []
    init(clientID: ClientID) {
        self.clientID = clientID
    }

    var canTakePage: Bool { true }

    func receive(_ event: ClientEvent) {
        events.append(event)
    }

    func flush() {}

    func failed(_ error: ServiceError) {
        failures.append(error)
    }

    func subscribed(_ subscribed: Subscribed) {
        subscriptions.append((events.count, subscribed))
    }

    var pages: [PageDescription] {
        events.compactMap { if case .page(let page, _) = $0 { PageDescription(page) } else { nil } }
    }

    var ends: Int {
        events.filter { if case .end = $0 { true } else { false } }.count
    }
}

/// One client of a feed, through the ``FeedService``, as a front would be.
@MainActor
struct Reader {
    let service: FeedService
    let feed: String
    let log: EventLog
    /// The client, whose sink is its log.
    var client: EventLog { log }

    /// Asks for `count` pages; a failure goes to the log.
    func next(_ count: Int = 1, replyTo: ReplyTag? = nil) {
        service.next(client, feed: feed, count: count, replyTo: replyTo) { [log] result in
            switch result {
            case .success(let subscribed?): log.subscribed(subscribed)
            case .success(nil): break
            case .failure(let error): log.failed(error)
            }
        }
    }

    /// Acknowledges pages up to `page`; the answer goes to `answer`.
    func acknowledge(_ page: Int, answer: @escaping (Result<Int, ServiceError>) -> Void = { _ in }) {
        service.acknowledge(client, feed: feed, through: page, answer: answer)
    }

    func disconnect() {
        service.disconnect(client)
    }

    var hasPendingRequests: Bool { service.hasPendingRequests(client) }
}

extension FeedService {
    /// Subscribes a new client to `feed` and returns it once subscribed (the answer of a durable
    /// start comes later: it is recorded in the log then).
    func reader(of feed: String, consumer: String? = nil, after: Int? = nil, follows: Bool = false) -> Reader {
        let log = EventLog(clientID: connect())
        subscribe(log, to: feed, consumer: consumer, after: after, follow: follows) { result in
            switch result {
            case .success(let subscribed): log.subscribed(subscribed)
            case .failure(let error): log.failed(error)
            }
        }
        return Reader(service: self, feed: feed, log: log)
    }
}

/// Lets every task the last step started run to where it waits on the script or the clock.
/// The tasks hop between the main actor and the global executor, so this yields until nothing
/// has changed for several rounds in a row.
@MainActor
func settle(_ signature: () -> String) async {
    var last = signature()
    var quietRounds = 0
    for _ in 0..<2_000 where quietRounds < 20 {
        await Task.yield()
        if quietRounds > 10 { try? await Task.sleep(for: .microseconds(200)) }
        let now = signature()
        quietRounds = now == last ? quietRounds + 1 : 0
        last = now
    }
}

/// Checks a reader's events against SPEC §5's promise: within a generation, pages after where the
/// subscription started (1 after a `refreshed`), each once, none skipped; a subscription taken over
/// may start anew. Calls `visit` with each page and the index of its event.
@MainActor
func expectInOrder(_ log: EventLog, context: String, visit: (PageDescription, Int) -> Void = { _, _ in }) {
    var expected = 1
    var generation: Int?
    let answers = log.subscriptions
    for (index, event) in log.events.enumerated() {
        // A subscription (a consumer's resumes after its cursor) starts where it was told.
        if let subscribed = answers.last(where: { $0.before == index })?.subscribed {
            generation = subscribed.generation
            expected = subscribed.after + 1
        }
        switch event {
        case .refreshed(_, let newGeneration, _):
            generation = newGeneration
            expected = 1
        case .unsubscribed:
            // Taken over: the reader's next `next` subscribes it anew, after page 0.
            generation = nil
            expected = 1
        case .page(let page, _):
            let described = PageDescription(page)
            if let generation { #expect(described.generation == generation, "\(context): a page of another generation") }
            generation = described.generation
            #expect(described.number == expected, "\(context): page \(described.number), expected \(expected)")
            expected = described.number + 1
            visit(described, index)
        default:
            break
        }
    }
}
