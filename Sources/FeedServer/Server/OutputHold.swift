/// When a connection's queued answers wait instead of being written at once.
///
/// While the requests of one read are handled, their answers are queued and written together
/// after the last of them. An `ack` among them that must wait to be durable holds the answers
/// queued before it until it is answered: a consumer that sends `next` and `ack` together then
/// gets the page and the ack in one write when the ack is durable, not the page at once and the
/// ack a group commit later, so each round trip costs the daemon one write and the client one
/// wake-up. (A consumer that acks first and then asks waits for the same commit already: `next`
/// acknowledges what was delivered before it, durably, before it delivers.) An ack that comes
/// alone, with nothing queued before it, holds nothing: a follower that acks as it reads keeps
/// getting its pages as they come.
struct OutputHold {
    /// Whether the requests of a read are being handled.
    private var isAnswering = false
    /// Acks that hold the output until they are answered.
    private var acknowledgementsAwaited = 0

    /// Whether queued answers are to stay queued now.
    var isHolding: Bool { isAnswering || acknowledgementsAwaited > 0 }

    mutating func startAnswering() {
        isAnswering = true
    }

    mutating func stopAnswering() {
        isAnswering = false
    }

    /// An ack is handled; returns whether it holds the output (answers of the same read are
    /// queued), in which case ``release()`` must follow once it is answered.
    mutating func holdForAcknowledgement(answersQueued: Bool) -> Bool {
        guard isAnswering, answersQueued else { return false }
        acknowledgementsAwaited += 1
        return true
    }

    /// An ack that held the output is answered.
    mutating func release() {
        assert(acknowledgementsAwaited > 0, "an output hold released that was never taken")
        acknowledgementsAwaited -= 1
    }
}
