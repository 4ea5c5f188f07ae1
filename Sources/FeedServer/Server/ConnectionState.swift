/// Where a connection is in its life: one value instead of a handful of flags that had to agree.
///
/// Input and closing are one sequence: a connection reads, may pause while its client's unread
/// answers are over the bound, stops reading when the client half-closes or when it is told to
/// finish, and ends closed. The transitions are the mutating methods; each says whether it
/// changed anything, and none leads out of ``closed``.
enum ConnectionState: Hashable {
    /// Reading and answering requests.
    case reading
    /// Not reading: the answers the client has not read yet are over the bound. Reading resumes
    /// (first with the input already read) once they drain.
    case paused
    /// The client half-closed: its requests are answered, then the connection closes.
    case inputEnded
    /// A final line (`bye`) is queued: nothing more is read, and the connection closes once
    /// everything queued is written.
    case finishing
    case closed

    /// Whether the event loop should watch the socket for requests.
    var isReading: Bool { self == .reading }

    var isClosed: Bool { self == .closed }

    /// The client's backlog went over the bound: stop reading.
    mutating func pause() -> Bool {
        guard self == .reading else { return false }
        self = .paused
        return true
    }

    /// The backlog drained: read again.
    mutating func resume() -> Bool {
        guard self == .paused else { return false }
        self = .reading
        return true
    }

    /// The client sent end of file.
    mutating func endInput() -> Bool {
        guard self == .reading || self == .paused else { return false }
        self = .inputEnded
        return true
    }

    /// A final line was queued (`bye` on `quit` or shutdown).
    mutating func finish() -> Bool {
        guard self != .closed, self != .finishing else { return false }
        self = .finishing
        return true
    }

    /// Closes for good; false if it already was.
    mutating func close() -> Bool {
        guard self != .closed else { return false }
        self = .closed
        return true
    }

    /// Whether the connection may be done soon (its input ended, or a final line is queued):
    /// only then is ``isFinished(outputEmpty:requestsPending:)`` worth asking.
    var mayFinish: Bool { self == .inputEnded || self == .finishing }

    /// Whether the connection has nothing left to do, given whether output is all written and
    /// whether a `next` still waits for pages.
    func isFinished(outputEmpty: Bool, requestsPending: Bool) -> Bool {
        switch self {
        case .inputEnded: return outputEmpty && !requestsPending
        case .finishing: return outputEmpty
        case .reading, .paused, .closed: return false
        }
    }
}
