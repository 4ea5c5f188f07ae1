import FeedKit
import Testing

@testable import FeedEngine
@testable import FeedState

/// The engine model test with a fleet: two instances of one shared feed on an in-memory
/// ``FleetLink``, each with a store whose writes fail at chosen points, under random schedules
/// that also cut an instance off the fleet and bring it back. Besides SPEC §4 and §5's promises
/// per reader, it checks the fleet's (SPEC §8, issue 22's "joining never mixes generations"): no
/// (generation, page) the fleet uses is ever served with two item lists, on any instance, and no
/// page of a local generation is served under a number the fleet uses. The source's items
/// depend on the generation's seed, as a seedless randomuser's do, so a mix would show.
extension EngineModelTests {
    @Test(arguments: 1...30)
    func random_schedules_with_a_fleet_and_a_failing_store_keep_the_invariants(seed: UInt64) async {
        var random = SplitMix64(seed: seed)
        let clock = ManualClock()
        let fleet = MemoryFleet(lease: .seconds(1))
        let worlds = ["a", "b"].map { instance in
            let world = ScriptedWorld(prefetch: Int(random.next() % 2), store: MemoryState(), clusterName: "memory", clock: clock, seededItems: true)
            world.directory.attach(fleet.link(instance: instance, clock: clock))
            return (instance: instance, world: world)
        }
        var readers: [(instance: Int, reader: Reader)] = []
        var steps: [String] = []
        var served = ServedPages()
        let settle = {
            await FeedEngineTests.settle {
                worlds.map { entry in
                    let world = entry.world
                    return "\(world.script.calls.count) \(world.script.pendingCalls.count) \(world.script.newDataWaiterCount) \(world.feed.generation) "
                        + "\(world.feed.fleetState ?? "-") \(world.store?.writesInFlight ?? 0) \(world.store?.committed.count ?? 0)"
                }.joined(separator: "|") + " \(clock.sleeperCount)"
            }
        }
        await settle()

        for _ in 0..<150 {
            let index = Int(random.next() % 2)
            let world = worlds[index].world
            switch random.next() % 100 {
            case 0..<10 where readers.count < 6:
                let consumer = random.next() % 3 == 0 ? "c\(random.next() % 2)" : nil
                readers.append((index, world.service.reader(of: "scripted", consumer: consumer, follows: random.next() % 6 == 0)))
                steps.append("subscribe \(worlds[index].instance) \(consumer ?? "-")")
            case 10..<36 where !readers.isEmpty:
                let reader = readers[Int(random.next() % UInt64(readers.count))].reader
                reader.next(Int(random.next() % 3) + 1)
                steps.append("next")
            case 36..<40 where !readers.isEmpty:
                let gone = Int(random.next() % UInt64(readers.count))
                readers[gone].reader.disconnect()
                readers.remove(at: gone)
                steps.append("unsubscribe")
            case 40..<62:
                guard let call = world.script.pendingCalls.randomElement(using: &random) else { continue }
                let ends = call.request.page >= 6 && random.next() % 6 == 0
                world.script.answer(.page(items: Int(random.next() % 3) + 1, next: ends ? .end : .more(token: "after-\(call.request.page)")), call: call.number)
                steps.append("answer \(worlds[index].instance) \(call.number)")
            case 62..<68:
                guard let call = world.script.pendingCalls.first else { continue }
                world.script.answer(.failure(.transient("flaky")), call: call.number)
                steps.append("fail \(call.number)")
            case 68..<80:
                clock.advance(by: .milliseconds(Int64(random.next() % 1_500) + 1))
                steps.append("time")
            case 80..<85:
                world.service.refresh("scripted") { _ in }
                steps.append("refresh \(worlds[index].instance)")
            case 85..<92:
                let reachable = random.next() % 2 == 0
                fleet.setReachable(worlds[index].instance, reachable)
                steps.append("\(reachable ? "reach" : "cut") \(worlds[index].instance)")
            case 92..<100:
                world.store?.faults = random.next() % 2 == 0 ? .none : .all
                steps.append("store \(worlds[index].instance) \(world.store?.faults.cursors == true ? "failing" : "ok")")
            default:
                continue
            }
            await settle()
            let context = "seed \(seed) after \(steps.suffix(8).joined(separator: ", "))"
            for (instance, reader) in readers { served.check(reader.log, instance: instance, context: context) }
            for entry in worlds { #expect(entry.world.script.overlaps.isEmpty, "\(context): \(entry.world.script.overlaps)") }
        }

        // Everything heals and the sources answer everything: every `next` must be answered.
        for entry in worlds {
            fleet.setReachable(entry.instance, true)
            entry.world.store?.faults = .none
        }
        for _ in 0..<80 where readers.contains(where: { $0.reader.hasPendingRequests }) {
            for entry in worlds {
                for _ in 0..<100 {
                    guard let call = entry.world.script.pendingCalls.first else { break }
                    entry.world.script.answer(.page(items: 1, next: .more(token: "after-\(call.request.page)")), call: call.number)
                    await settle()
                }
            }
            clock.advance(by: .seconds(2))
            await settle()
        }
        let context = "seed \(seed) at the end, after \(steps.suffix(8).joined(separator: ", "))"
        for (instance, reader) in readers { served.check(reader.log, instance: instance, context: context) }
        #expect(!readers.contains { $0.reader.hasPendingRequests }, "\(context): a next was never answered")
    }
}

/// Every page served to the model's readers, by address, to check that none is served twice
/// with different items: a fleet's address across instances, a local generation's per instance.
@MainActor
private struct ServedPages {
    private var items: [String: [String]] = [:]
    /// How many events of each reader were looked at already.
    private var seen: [ObjectIdentifier: Int] = [:]

    mutating func check(_ log: EventLog, instance: Int, context: String) {
        let start = seen[ObjectIdentifier(log), default: 0]
        seen[ObjectIdentifier(log)] = log.events.count
        expectInOrder(log, context: context) { page, index in
            let holdsItsOwn = page.items.allSatisfy { $0.split(separator: ":").last?.hasPrefix("\(page.number)-") == true }
            #expect(holdsItsOwn, "\(context): page \(page.number) holds \(page.items)")
            guard index >= start else { return }
            // A fleet's address holds one page for good; a local generation's pages may be
            // fetched again (the source reproduces them), but always of its own seed.
            let local = page.generation > StoredFeed.maximumGeneration
            let key = local ? "\(instance)/\(page.generation)" : "\(page.generation)/\(page.number)"
            let value = local ? page.items.map { String($0.prefix { $0 != ":" }) } : page.items
            if let first = items[key] {
                #expect(local ? Set(value).isSubset(of: first) : first == value, "\(context): \(key) was served as \(first) and as \(value)")
            } else {
                items[key] = local ? Array(Set(value)) : value
            }
        }
    }
}
