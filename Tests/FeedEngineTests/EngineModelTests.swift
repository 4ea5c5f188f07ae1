import FeedKit
import Testing

@testable import FeedEngine

/// The engine under random schedules: fetches that complete, fail, hang or are cancelled at
/// chosen points, interleaved with `next`, refresh, reloads, unsubscribes and time passing.
/// After every step it checks SPEC §4 and §5's promises:
/// - no two fetches to one adapter instance overlap;
/// - every page holds its own items (page N of a generation holds source page N's);
/// - within a generation each subscriber gets pages 1, 2, 3, … with none skipped or repeated;
/// and at the end, once the source answers everything, that every `next` was answered.
/// A failing seed is named in the failure, and replays the same schedule.
@MainActor
@Suite(.timeLimit(.minutes(3))) struct EngineModelTests {
    @Test(arguments: 1...40)
    func random_schedules_keep_the_engine_invariants(seed: UInt64) async {
        await runSchedule(seed: seed, turns: nil)
    }

    /// As in the daemon, a feed's looks for upstream work wait for the end of the event loop's
    /// turn, which comes after a step or after several.
    @Test(arguments: 1...20)
    func random_schedules_with_looks_deferred_to_the_turns_end_keep_the_engine_invariants(seed: UInt64) async {
        await runSchedule(seed: seed, turns: ManualTurns())
    }

    private func runSchedule(seed: UInt64, turns: ManualTurns?) async {
        var random = SplitMix64(seed: seed)
        let world = ScriptedWorld(prefetch: Int(random.next() % 3), honoursCancellation: random.next() % 2 == 0, afterTurn: turns?.afterTurn)
        var readers: [(log: EventLog, subscription: Reader)] = []
        var steps: [String] = []

        for _ in 0..<120 {
            let roll = random.next() % 100
            switch roll {
            case 0..<12 where readers.count < 4:
                readers.append(world.subscribe(follows: random.next() % 8 == 0))
                steps.append("subscribe")
            case 12..<40 where !readers.isEmpty:
                let reader = readers[Int(random.next() % UInt64(readers.count))]
                reader.subscription.next(Int(random.next() % 3) + 1)
                steps.append("next")
            case 40..<44 where !readers.isEmpty:
                let index = Int(random.next() % UInt64(readers.count))
                readers[index].subscription.disconnect()
                readers.remove(at: index)
                steps.append("unsubscribe")
            case 44..<68:
                let pending = world.script.pendingCalls
                guard !pending.isEmpty else { continue }
                let call = pending[Int(random.next() % UInt64(pending.count))]
                let ends = call.request.page >= 6 && random.next() % 6 == 0
                world.script.answer(.page(items: Int(random.next() % 3) + 1, next: ends ? .end : .more(token: "after-\(call.request.page)")), call: call.number)
                steps.append("answer \(call.number)")
            case 68..<76:
                guard let call = world.script.pendingCalls.first else { continue }
                world.script.answer(.failure(random.next() % 3 == 0 ? .rejected("no") : .transient("flaky")), call: call.number)
                steps.append("fail \(call.number)")
            case 76..<88:
                world.clock.advance(by: .milliseconds(Int64(random.next() % 2_500) + 1))
                steps.append("time")
            case 88..<93:
                world.directory.refresh("scripted")
                steps.append("refresh")
            case 93..<97:
                world.settings.timeout = world.settings.timeout == .seconds(1) ? .milliseconds(1_500) : .seconds(1)
                world.apply()
                steps.append("reload timeout")
            case 97..<100:
                world.settings.options = ["version": .integer(Int64(random.next() % 1_000))]
                world.apply()
                steps.append("reload pages")
            default:
                continue
            }
            if let turns, random.next() % 3 != 0 { turns.end() }
            await world.settle()
            check(world, readers, seed: seed, steps: steps)
        }

        // The source recovers and answers everything: every `next` must be answered.
        // Every call is answered before time moves on, as a healthy source would answer it: a
        // call left pending while 3 s pass times out, and counts as one more failure.
        for _ in 0..<60 where readers.contains(where: { $0.subscription.hasPendingRequests }) {
            for _ in 0..<200 {
                if let turns, turns.isWaiting {
                    turns.end()
                    await world.settle()
                }
                guard let call = world.script.pendingCalls.first else { break }
                world.script.answer(.page(items: 1, next: .more(token: "after-\(call.request.page)")), call: call.number)
                await world.settle()
            }
            world.clock.advance(by: .seconds(3))
            await world.settle()
        }
        check(world, readers, seed: seed, steps: steps)
        #expect(!readers.contains { $0.subscription.hasPendingRequests }, "seed \(seed): a next was never answered")
    }

    private func check(_ world: ScriptedWorld, _ readers: [(log: EventLog, subscription: Reader)], seed: UInt64, steps: [String]) {
        let context = "seed \(seed) after \(steps.suffix(8).joined(separator: ", "))"
        #expect(world.script.overlaps.isEmpty, "\(context): \(world.script.overlaps)")
        for (index, reader) in readers.enumerated() {
            expectInOrder(reader.log, context: "\(context), reader \(index)") { page, _ in
                #expect(page.firstItem == "\(page.number)-1", "\(context): page \(page.number) holds \(page.firstItem)")
            }
        }
    }
}

/// A small seeded generator, so a failing schedule can be replayed.
struct SplitMix64: RandomNumberGenerator {
    private var state: UInt64

    init(seed: UInt64) {
        state = seed
    }

    mutating func next() -> UInt64 {
        state &+= 0x9E37_79B9_7F4A_7C15
        var z = state
        z = (z ^ (z >> 30)) &* 0xBF58_476D_1CE4_E5B9
        z = (z ^ (z >> 27)) &* 0x94D0_49BB_1331_11EB
        return z ^ (z >> 31)
    }
}
