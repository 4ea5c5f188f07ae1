import FeedKit
import FeedCluster
import Foundation

/// Wakes the fetches that wait for another instance's publication of a page the moment it
/// arrives, rather than at their next look (a waiting fetch also looks again every second, in
/// case the publication came during an outage and was never delivered).
final class PublicationBoard: Sendable {
    private let waiters = Locked<[PageAddress: [UUID: CheckedContinuation<Void, Never>]]>([:])

    /// `address` was published: every wait for it ends.
    func published(_ address: PageAddress) {
        guard let woken = waiters.withLock({ $0.removeValue(forKey: address) }) else { return }
        for waiter in woken.values { waiter.resume() }
    }

    /// Returns when `address` is published, after `timeout`, or when the task is cancelled.
    func wait(for address: PageAddress, atMost timeout: Duration) async {
        let id = UUID()
        await withTaskCancellationHandler {
            await withCheckedContinuation { (continuation: CheckedContinuation<Void, Never>) in
                waiters.withLock { $0[address, default: [:]][id] = continuation }
                // A cancellation before the line above found nothing to resume.
                if Task.isCancelled { end(address, id) }
                Task {
                    try? await Task.sleep(for: timeout)
                    self.end(address, id)
                }
            }
        } onCancel: {
            end(address, id)
        }
    }

    private func end(_ address: PageAddress, _ id: UUID) {
        let waiter = waiters.withLock { waiters -> CheckedContinuation<Void, Never>? in
            defer { if waiters[address]?.isEmpty == true { waiters[address] = nil } }
            return waiters[address]?.removeValue(forKey: id)
        }
        waiter?.resume()
    }
}
