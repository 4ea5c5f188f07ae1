import Testing

@testable import FeedServer

/// The event loop's timers on instants the test picks: they fire earliest first, a cancelled one
/// never fires, and the timerfd is set again only when a timer is due before it would wake.
struct TimerQueueTests {
    let start = ContinuousClock.now

    func at(_ milliseconds: Int) -> ContinuousClock.Instant { start + .milliseconds(milliseconds) }

    @Test func due_timers_fire_earliest_first_and_those_with_one_deadline_in_scheduling_order() {
        var queue = TimerQueue<String>()
        for (token, (deadline, name)) in [(30, "c"), (10, "a"), (20, "b1"), (20, "b2"), (40, "d")].enumerated() {
            _ = queue.schedule(UInt64(token), at: at(deadline), name)
        }
        #expect(queue.takeDue(at: at(5)).isEmpty)
        #expect(queue.takeDue(at: at(30)) == ["a", "b1", "b2", "c"])
        #expect(queue.count == 1)
        #expect(queue.takeDue(at: at(100)) == ["d"])
        #expect(queue.takeDue(at: at(1_000)).isEmpty)
    }

    @Test func a_cancelled_timer_never_fires_and_cancelling_twice_or_after_firing_is_harmless() {
        var queue = TimerQueue<String>()
        _ = queue.schedule(1, at: at(10), "kept")
        _ = queue.schedule(2, at: at(10), "cancelled")
        _ = queue.schedule(3, at: at(20), "fired")
        queue.cancel(2)
        queue.cancel(2)
        #expect(queue.takeDue(at: at(10)) == ["kept"])
        #expect(queue.takeDue(at: at(20)) == ["fired"])
        queue.cancel(3)
        queue.cancel(99)
        #expect(queue.count == 0)
        #expect(queue.earliestDeadline == nil)
    }

    @Test func the_timerfd_is_set_again_only_for_a_timer_due_before_it_would_wake() {
        var queue = TimerQueue<Int>()
        #expect(queue.schedule(1, at: at(50), 1) == at(50), "the first timer sets it")
        #expect(queue.schedule(2, at: at(80), 2) == nil, "a later one does not")
        #expect(queue.schedule(3, at: at(50), 3) == nil, "nor one due when it wakes anyway")
        #expect(queue.schedule(4, at: at(20), 4) == at(20), "an earlier one does")
        // Cancelling the earliest leaves the timerfd alone: it wakes once for nothing, and is
        // then set to the earliest timer still live.
        queue.cancel(4)
        #expect(queue.rearm() == nil)
        #expect(queue.takeDue(at: at(20)).isEmpty)
        #expect(queue.rearm() == at(50))
        #expect(queue.takeDue(at: at(50)) == [1, 3])
        #expect(queue.rearm() == at(80))
        queue.cancel(2)
        #expect(queue.takeDue(at: at(80)).isEmpty)
        #expect(queue.rearm() == nil, "nothing left to wake for")
        #expect(queue.schedule(5, at: at(500), 5) == at(500), "once it fired, the next timer sets it again")
    }

    @Test func timers_set_and_cancelled_again_and_again_do_not_pile_up() {
        var queue = TimerQueue<Int>()
        _ = queue.schedule(0, at: at(1), 0)
        // Like a thousand stall timers, each set when output blocks and cancelled when it drains,
        // all due far later than any fires.
        for token in 1...100_000 {
            _ = queue.schedule(UInt64(token), at: at(30_000 + token), token)
            queue.cancel(UInt64(token))
        }
        #expect(queue.count == 1)
        #expect(queue.placesHeld <= 130)
        #expect(queue.takeDue(at: at(1_000_000)) == [0])
    }

    @Test func any_mix_of_scheduling_cancelling_and_firing_matches_a_sorted_list() {
        // Fibonacci hashing of the step: a fixed mix that a failure replays.
        func roll(_ step: UInt64, _ salt: UInt64, below bound: Int) -> Int {
            Int(((step &* 4 &+ salt) &* 0x9E37_79B9_7F4A_7C15) >> 33) % bound
        }
        var queue = TimerQueue<UInt64>()
        var model: [(deadline: Int, token: UInt64)] = []
        var now = 0
        for token in UInt64(1)...5_000 {
            switch roll(token, 0, below: 10) {
            case 0..<6:
                let deadline = now + roll(token, 1, below: 200)
                _ = queue.schedule(token, at: at(deadline), token)
                model.append((deadline, token))
            case 6..<8:
                guard !model.isEmpty else { continue }
                let cancelled = model[roll(token, 2, below: model.count)]
                queue.cancel(cancelled.token)
                model.removeAll { $0.token == cancelled.token }
            default:
                now += roll(token, 3, below: 50)
                let expected = model.filter { $0.deadline <= now }.sorted { ($0.deadline, $0.token) < ($1.deadline, $1.token) }
                model.removeAll { $0.deadline <= now }
                #expect(queue.takeDue(at: at(now)) == expected.map(\.token))
            }
            #expect(queue.count == model.count)
            #expect(queue.earliestDeadline == model.map(\.deadline).min().map(at))
        }
    }
}
