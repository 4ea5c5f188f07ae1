import FeedKit
import FeedState
import Glibc

/// Where a feed stands with the fleet of its daemon (SPEC §8), and the rule that joining never
/// mixes generations.
///
/// A shared feed serves alone while it has not joined (or cannot reach the fleet when a page must
/// be fetched), and the pages it serves alone belong to a *local* generation, numbered past every
/// generation a fleet uses (``localGeneration(after:millisecondsSinceEpoch:)``): no (generation, page)
/// it hands out alone is ever one of the fleet's, so no client sees two item lists under one
/// address. When it joins, every subscriber gets `refreshed` into the fleet's generation
/// (duplicates, never a gap).
///
/// The feed owns the value and carries out the ``Action`` each change returns.
enum FleetMembership {
    /// Not shared: no `[cluster]`, `shared = false` (and `file` feeds), or a feed that gathers
    /// others (`merge`, computed on each instance from members that are shared themselves).
    case solo
    /// Shared, not joined yet: served alone under a local generation, joining tried every second.
    case joining(Attempt)
    /// Serving the fleet's generation, sharing its pages and cursors.
    case joined(Joined)
    /// Served alone: the fleet serves another definition of the feed (for good; the feed is then
    /// served like a solo one), or could not be reached when a page had to be fetched (until it can).
    case alone(Reason, Attempt)

    /// Why a shared feed is served alone.
    enum Reason: Equatable {
        /// The fleet's generation was made from another fingerprint (source, options or `wrap`).
        case otherDefinition(fleetFingerprint: String)
        /// The fleet could not be reached when a page had to be fetched.
        case unreachable
    }

    /// Joining: the link once the daemon has one, whether a join call is out, whether a failure
    /// with the fleet reachable was logged (once, not every second).
    struct Attempt {
        var link: FleetLink?
        var isAsking = false
        var failureLogged = false
    }

    /// Joined: refreshes of this instance on their way to the fleet, and the newest generation the
    /// fleet announced meanwhile, held back so the requester's `refreshed` carries its request's tag.
    struct Joined {
        let link: FleetLink
        var refreshesInFlight = 0
        var heldBack: FleetGeneration?
    }

    /// What the feed does after a change.
    enum Action {
        case none
        /// Ask `link` for the fleet's generation (``join(feed:fingerprint:generation:seed:)``).
        case join(FleetLink)
        /// Ask again in a second; log `warning` first, if set.
        case joinLater(warning: String?)
        /// Serve the fleet's generation: every subscription restarts in it. `joining`: the feed
        /// has just joined (else the fleet started a new generation).
        case enter(FleetGeneration, joining: Bool)
        /// Serve alone under a new local generation (or the stored one, for another definition).
        case serveAlone(Reason)
    }

    /// The number of a new local generation of a shared feed whose last one was `previous` (0:
    /// none): 2^40 plus the time it starts in milliseconds since 1970, so past 2^40, the highest
    /// generation a fleet uses (``StoredFeed/maximumGeneration``), after the one before, and
    /// reused by none after a restart, without anything stored (unless the clock was set back).
    /// At most 2^40 + 2^50, well within the integers a JSON reader keeps exact (2^53).
    static func localGeneration(after previous: Int, millisecondsSinceEpoch: Int) -> Int {
        max(previous + 1, StoredFeed.maximumGeneration + min(max(millisecondsSinceEpoch, 1), 1 << 50))
    }

    /// ``localGeneration(after:millisecondsSinceEpoch:)`` now, by the wall clock.
    static func localGeneration(after previous: Int) -> Int {
        var now = timespec()
        clock_gettime(CLOCK_REALTIME, &now)
        return localGeneration(after: previous, millisecondsSinceEpoch: now.tv_sec * 1000 + now.tv_nsec / 1_000_000)
    }

    // MARK: Where it stands

    /// The fleet's link while joined.
    var joinedLink: FleetLink? {
        if case .joined(let joined) = self { joined.link } else { nil }
    }

    /// Whether the feed serves the fleet's generation.
    var isJoined: Bool { joinedLink != nil }

    /// Whether the feed is a fleet's at all (its generation, pages and cursors are the fleet's
    /// once joined; until then, consumer operations answer `store_failed`).
    var isShared: Bool {
        switch self {
        case .solo, .alone(.otherDefinition, _): false
        case .joining, .joined, .alone(.unreachable, _): true
        }
    }

    /// Whether the feed serves a local generation while it is shared (numbered past the fleet's).
    var servesLocalGeneration: Bool {
        switch self {
        case .joining, .alone(.unreachable, _): true
        case .solo, .joined, .alone(.otherDefinition, _): false
        }
    }

    /// Whether the state directory keeps the feed's pages (their records and, for a source that
    /// cannot fetch a page again, their items): a feed served by this instance alone, for good.
    /// A shared feed's pages are the fleet's stream's.
    var keepsPagesLocally: Bool {
        if case .solo = self { true } else { false }
    }

    /// `joined`, `joining` or `alone` for `status`; nil for a feed that is not shared.
    var label: String? {
        switch self {
        case .solo: nil
        case .joining: "joining"
        case .joined: "joined"
        case .alone: "alone"
        }
    }

    // MARK: Changes

    /// The daemon's link to the fleet exists now: start joining.
    mutating func attach(_ link: FleetLink) -> Action {
        switch self {
        case .joining(var attempt) where attempt.link == nil:
            attempt.link = link
            self = .joining(attempt)
            return ask()
        default:
            return .none
        }
    }

    /// A second passed since a failed join: ask again.
    mutating func retry() -> Action { ask() }

    private mutating func ask() -> Action {
        switch self {
        case .joining(var attempt) where !attempt.isAsking:
            guard let link = attempt.link else { return .none }
            attempt.isAsking = true
            self = .joining(attempt)
            return .join(link)
        case .alone(.unreachable, var attempt) where !attempt.isAsking:
            guard let link = attempt.link else { return .none }
            attempt.isAsking = true
            self = .alone(.unreachable, attempt)
            return .join(link)
        default:
            return .none
        }
    }

    /// The fleet answered the join with its generation.
    mutating func joinAnswered(_ generation: FleetGeneration, fingerprint: String) -> Action {
        guard let attempt else { return .none }
        guard let link = attempt.link else { return .none }
        guard generation.fingerprint == fingerprint else {
            let reason = Reason.otherDefinition(fleetFingerprint: generation.fingerprint)
            self = .alone(reason, Attempt(link: link))
            return .serveAlone(reason)
        }
        self = .joined(Joined(link: link))
        return .enter(generation, joining: true)
    }

    /// The join failed; `reachable`: the fleet could be reached all the same (say, without JetStream).
    mutating func joinFailed(_ error: FleetError, reachable: Bool, fleetName: String) -> Action {
        guard var attempt else { return .none }
        attempt.isAsking = false
        var warning: String?
        if reachable, !attempt.failureLogged {
            attempt.failureLogged = true
            warning = "cannot join the fleet \"\(fleetName)\" yet, serving alone and trying again every second: \(error)"
        }
        replace(attempt)
        return .joinLater(warning: warning)
    }

    /// A page had to be fetched and the fleet could not be reached: serve alone until it can.
    mutating func fleetUnreachable() -> Action {
        guard case .joined(let joined) = self else { return .none }
        self = .alone(.unreachable, Attempt(link: joined.link))
        return .serveAlone(.unreachable)
    }

    /// The fleet announced `generation` (a refresh on any instance) while this serves `current`.
    mutating func generationAnnounced(_ generation: FleetGeneration, current: Int) -> Action {
        guard case .joined(var joined) = self, generation.number > current else { return .none }
        guard joined.refreshesInFlight == 0 else {
            if generation.number > joined.heldBack?.number ?? 0 { joined.heldBack = generation }
            self = .joined(joined)
            return .none
        }
        return .enter(generation, joining: false)
    }

    /// A refresh of this instance goes to the fleet: returns the link, nil if not joined.
    mutating func refreshStarted() -> FleetLink? {
        guard case .joined(var joined) = self else { return nil }
        joined.refreshesInFlight += 1
        self = .joined(joined)
        return joined.link
    }

    /// A refresh came back: returns a generation held back meanwhile, once none is in flight.
    mutating func refreshEnded() -> FleetGeneration? {
        guard case .joined(var joined) = self else { return nil }
        joined.refreshesInFlight -= 1
        let held = joined.refreshesInFlight == 0 ? joined.heldBack : nil
        if held != nil { joined.heldBack = nil }
        self = .joined(joined)
        return held
    }

    // MARK: Helpers

    /// The join attempt of a feed that is joining or alone for want of the fleet.
    private var attempt: Attempt? {
        switch self {
        case .joining(let attempt), .alone(.unreachable, let attempt): attempt
        case .solo, .joined, .alone(.otherDefinition, _): nil
        }
    }

    private mutating func replace(_ attempt: Attempt) {
        switch self {
        case .joining: self = .joining(attempt)
        case .alone(.unreachable, _): self = .alone(.unreachable, attempt)
        case .solo, .joined, .alone(.otherDefinition, _): break
        }
    }
}
