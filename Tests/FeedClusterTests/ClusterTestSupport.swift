import FeedCluster
import FeedKit
import Foundation
import TestSupport

/// A store connected to `servers` as instance `instance`, impatient enough for tests: calls
/// give up after a second and a frozen server is noticed within about a second and a half.
func connectedStore(
    _ servers: [NATSServer], instance: String, name: String = "test", replicas: Int = 1, lease: Duration = .seconds(10),
    _ configure: (inout ClusterStore.Configuration) -> Void = { _ in }
) async throws -> ClusterStore {
    var configuration = ClusterStore.Configuration(servers: servers.map(\.url), name: name, replicas: replicas, lease: lease, instance: instance)
    configuration.requestTimeout = .seconds(1)
    configuration.pingInterval = .milliseconds(500)
    configure(&configuration)
    let store = try await ClusterStore.connect(configuration, logger: testLogger)
    try await waitForState(.connected, of: store)
    // A new cluster elects its JetStream leader a moment after it accepts clients.
    _ = try await retryingWhileUnavailable { try await store.cursor(feed: "warm-up", consumer: "none") }
    return store
}

/// The stores' logger in tests: lines are dropped (tests read rejections from the counts).
let testLogger = Logger(sink: DiscardingSink())

/// Waits until `store` reports `state`.
func waitForState(_ state: ConnectionState, of store: ClusterStore, within limit: Duration = .seconds(15)) async throws {
    try await within(limit, "the cluster connection to become \(state)") {
        for await current in store.states() where current == state { return }
        throw TestFailure("the state stream ended before \(state)")
    }
}

/// Runs `operation` again while it fails with `unavailable` (a cluster electing leaders).
func retryingWhileUnavailable<Value: Sendable>(
    within limit: Duration = .seconds(20), _ operation: @escaping @Sendable () async throws -> Value
) async throws -> Value {
    let deadline = ContinuousClock.now + limit
    while true {
        do {
            return try await operation()
        } catch let error as NATSError where error.code == .unavailable && ContinuousClock.now < deadline {
            try await Task.sleep(for: .milliseconds(200))
        }
    }
}

extension Array where Element == UInt8 {
    var text: String { String(decoding: self, as: UTF8.self) }
}

/// Waits until a lease that runs `until` (wall-clock milliseconds, as leases carry it) has expired.
func sleepPastLease(until: Int64) async throws {
    try await Task.sleep(for: .milliseconds(max(0, until - Int64(Date().timeIntervalSince1970 * 1_000)) + 50))
}
