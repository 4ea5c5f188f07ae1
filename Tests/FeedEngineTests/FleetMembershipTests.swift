import FeedKit
import Testing

@testable import FeedEngine
import FeedState

/// ``FleetMembership`` alone: every state, what each change leads to, and the numbers of local
/// generations.
@Suite struct FleetMembershipTests {
    let link = MemoryFleet().link(instance: "a", clock: ManualClock())
    let fingerprint = "same"
    func generation(_ number: Int, fingerprint: String = "same") -> FleetGeneration {
        FleetGeneration(feed: "users", number: number, seed: "s\(number)", fingerprint: fingerprint)
    }

    func joining(attached: Bool = true, asking: Bool = false) -> FleetMembership {
        .joining(FleetMembership.Attempt(link: attached ? link : nil, isAsking: asking))
    }

    @Test func a_solo_feed_stays_solo_whatever_the_fleet_says() {
        var membership = FleetMembership.solo
        #expect(membership.attach(link).isNone)
        #expect(membership.joinAnswered(generation(3), fingerprint: fingerprint).isNone)
        #expect(membership.generationAnnounced(generation(4), current: 1).isNone)
        #expect(membership.fleetUnreachable().isNone)
        #expect(membership.label == nil && !membership.isShared && membership.keepsPagesLocally)
    }

    @Test func joining_asks_once_the_link_exists_and_once_at_a_time() {
        var membership = joining(attached: false)
        #expect(membership.retry().isNone, "no link yet: nothing to ask")
        guard case .join = membership.attach(link) else {
            Issue.record("attaching did not ask")
            return
        }
        #expect(membership.retry().isNone, "a join is out already")
        guard case .joinLater(let warning) = membership.joinFailed(FleetError("no JetStream"), reachable: true, fleetName: "test") else {
            Issue.record("a failed join is not tried again")
            return
        }
        #expect(warning?.contains("no JetStream") == true)
        guard case .join = membership.retry() else {
            Issue.record("no second try")
            return
        }
        guard case .joinLater(nil) = membership.joinFailed(FleetError("again"), reachable: true, fleetName: "test") else {
            Issue.record("the failure is logged once, not every second")
            return
        }
        #expect(membership.label == "joining" && membership.isShared && membership.servesLocalGeneration)
    }

    @Test func joining_the_same_definition_enters_the_fleets_generation() {
        var membership = joining(asking: true)
        guard case .enter(let entered, joining: true) = membership.joinAnswered(generation(7), fingerprint: fingerprint) else {
            Issue.record("the fleet's generation was not entered")
            return
        }
        #expect(entered.number == 7 && membership.isJoined && membership.label == "joined" && !membership.servesLocalGeneration)
    }

    @Test func another_definition_is_served_alone_for_good() {
        var membership = joining(asking: true)
        guard case .serveAlone(.otherDefinition(let theirs)) = membership.joinAnswered(generation(7, fingerprint: "other"), fingerprint: fingerprint) else {
            Issue.record("another definition was joined")
            return
        }
        #expect(theirs == "other" && membership.label == "alone" && !membership.isShared)
        #expect(membership.retry().isNone && membership.generationAnnounced(generation(8), current: 1).isNone)
    }

    @Test func a_fleet_out_of_reach_when_a_page_is_needed_means_alone_until_joined_again() {
        var membership = joining(asking: true)
        _ = membership.joinAnswered(generation(7), fingerprint: fingerprint)
        guard case .serveAlone(.unreachable) = membership.fleetUnreachable() else {
            Issue.record("still joined without the fleet")
            return
        }
        #expect(membership.isShared && membership.servesLocalGeneration && membership.label == "alone" && membership.joinedLink == nil)
        guard case .join = membership.retry() else {
            Issue.record("no rejoin")
            return
        }
        guard case .enter(_, joining: true) = membership.joinAnswered(generation(7), fingerprint: fingerprint) else {
            Issue.record("no rejoin")
            return
        }
    }

    @Test func a_generation_announced_during_a_refresh_of_this_instance_waits_for_it() {
        var membership = joining(asking: true)
        _ = membership.joinAnswered(generation(7), fingerprint: fingerprint)
        #expect(membership.generationAnnounced(generation(7), current: 7).isNone, "not newer")
        #expect(membership.refreshStarted() != nil)
        #expect(membership.generationAnnounced(generation(9), current: 7).isNone, "held back")
        #expect(membership.generationAnnounced(generation(8), current: 7).isNone)
        #expect(membership.refreshEnded()?.number == 9, "the newest one held back")
        guard case .enter(let next, joining: false) = membership.generationAnnounced(generation(10), current: 9) else {
            Issue.record("an announced generation was not entered")
            return
        }
        #expect(next.number == 10)
    }

    @Test func local_generations_are_numbered_past_every_generation_a_fleet_uses() {
        let now = 1_800_000_000_000
        let first = FleetMembership.localGeneration(after: 0, millisecondsSinceEpoch: now)
        #expect(first == StoredFeed.maximumGeneration + now)
        #expect(FleetMembership.localGeneration(after: first, millisecondsSinceEpoch: now) == first + 1, "two in the same millisecond")
        #expect(FleetMembership.localGeneration(after: first, millisecondsSinceEpoch: now - 60_000) == first + 1, "a clock set back reuses none")
        #expect(FleetMembership.localGeneration(after: 0, millisecondsSinceEpoch: -5) == StoredFeed.maximumGeneration + 1)
        #expect(FleetMembership.localGeneration(after: 0, millisecondsSinceEpoch: .max) == StoredFeed.maximumGeneration + (1 << 50), "no overflow")
        #expect(FleetMembership.localGeneration(after: 0) > StoredFeed.maximumGeneration + 1_700_000_000_000, "the wall clock, in milliseconds")
    }
}

extension FleetMembership.Action {
    var isNone: Bool {
        if case .none = self { true } else { false }
    }
}
