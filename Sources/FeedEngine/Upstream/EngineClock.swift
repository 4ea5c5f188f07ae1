/// The engine's source of time: when a retry may start, when a fetch has run too long, when a
/// live source is looked at again. Injected so that tests can run those rules without sleeping.
public protocol EngineClock: Sendable {
    /// The current instant.
    var now: ContinuousClock.Instant { get }
    /// Returns at `deadline`, or throws `CancellationError` once the calling task is cancelled.
    func sleep(until deadline: ContinuousClock.Instant) async throws
}

/// Real time: `ContinuousClock`, which keeps counting while the machine is suspended.
public struct SystemClock: EngineClock {
    /// The system's clock.
    public init() {}

    public var now: ContinuousClock.Instant { ContinuousClock.now }

    public func sleep(until deadline: ContinuousClock.Instant) async throws {
        try await ContinuousClock().sleep(until: deadline, tolerance: nil)
    }
}
