import FeedKit
import FeedCluster
import Foundation

/// Hands the page another instance published to the fetches waiting for it the moment the
/// subscription delivers it, rather than at their next look, and without reading it again from
/// the stream: NATS carries one copy of a page per instance. (A waiting fetch also looks again
/// every second, in case the publication came during an outage and was never delivered.)
final class PublicationBoard: Sendable {
    private let waiters = Locked<[PageAddress: [UUID: CheckedContinuation<PublishedPage?, Never>]]>([:])

    /// `published` arrived: every wait for its page ends with it.
    func published(_ published: PublishedPage) {
        guard let woken = waiters.withLock({ $0.removeValue(forKey: published.page) }) else { return }
        for waiter in woken.values { waiter.resume(returning: published) }
    }

    /// The page at `address` once it is published; nil after `timeout`, or when the task is cancelled.
    func wait(for address: PageAddress, atMost timeout: Duration) async -> PublishedPage? {
        let id = UUID()
        return await withTaskCancellationHandler {
            await withCheckedContinuation { (continuation: CheckedContinuation<PublishedPage?, Never>) in
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
        let waiter = waiters.withLock { waiters -> CheckedContinuation<PublishedPage?, Never>? in
            defer { if waiters[address]?.isEmpty == true { waiters[address] = nil } }
            return waiters[address]?.removeValue(forKey: id)
        }
        waiter?.resume(returning: nil)
    }
}
