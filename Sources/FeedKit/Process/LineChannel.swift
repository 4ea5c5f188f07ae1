import Foundation

/// What reading a child's output gives.
public enum LineEvent: Sendable, Equatable {
    case line([UInt8])
    /// A line longer than the limit (it is skipped).
    case tooLong
    /// The child exited, or closed its output.
    case closed
    /// Nothing within the timeout.
    case timedOut
}

/// Cuts a stream of output into lines; a line longer than `maxBytes` becomes one ``LineEvent/tooLong``
/// and the rest of it is skipped.
struct LineSplitter {
    let maxBytes: Int
    private var pending: [UInt8] = []
    private var discarding = false

    init(maxBytes: Int) {
        self.maxBytes = maxBytes
    }

    /// The lines `bytes` completes, and a ``LineEvent/tooLong`` for one that grew past the limit.
    mutating func split(_ bytes: ArraySlice<UInt8>) -> [LineEvent] {
        var events: [LineEvent] = []
        var rest = bytes
        while let newline = rest.firstIndex(of: UInt8(ascii: "\n")) {
            if discarding {
                discarding = false
            } else {
                events.append(.line(pending + rest[..<newline]))
            }
            pending = []
            rest = rest[(newline + 1)...]
        }
        if !discarding { pending += rest }
        if pending.count > maxBytes {
            pending = []
            discarding = true
            events.append(.tooLong)
        }
        return events
    }
}

/// Lines from a reader thread to one async reader at a time.
final class LineChannel: Sendable {
    private struct State {
        var queued: [LineEvent] = []
        var closed = false
        var waiter: CheckedContinuation<LineEvent, Never>?
        var waiterNumber = 0
    }

    private let state = Locked(State())

    func push(_ event: LineEvent) {
        let waiter = state.withLock { state -> CheckedContinuation<LineEvent, Never>? in
            if event == .closed { state.closed = true }
            if let waiter = state.waiter {
                state.waiter = nil
                return waiter
            }
            if event != .closed { state.queued.append(event) }
            return nil
        }
        waiter?.resume(returning: event)
    }

    /// The next line, or `.timedOut` after `timeout` or once the calling task is cancelled: either
    /// way the line that may still come belongs to an abandoned request, and the caller must not
    /// read on as if it answered the next one.
    func next(timeout: Duration) async -> LineEvent {
        let number = state.withLock { state -> Int in
            state.waiterNumber += 1
            return state.waiterNumber
        }
        return await withTaskCancellationHandler {
            await withCheckedContinuation { continuation in
                let (immediate, replaced) = state.withLock { state -> (LineEvent?, CheckedContinuation<LineEvent, Never>?) in
                    if !state.queued.isEmpty { return (state.queued.removeFirst(), nil) }
                    if state.closed { return (.closed, nil) }
                    // One reader at a time; a second one would otherwise leak the first's continuation.
                    let replaced = state.waiter
                    state.waiter = continuation
                    return (nil, replaced)
                }
                replaced?.resume(returning: .timedOut)
                if let immediate {
                    continuation.resume(returning: immediate)
                    return
                }
                // Cancelled before the waiter was registered: the handler found nothing to end.
                if Task.isCancelled { expire(waiter: number) }
                Task {
                    try? await Task.sleep(for: timeout)
                    self.expire(waiter: number)
                }
            }
        } onCancel: {
            expire(waiter: number)
        }
    }

    private func expire(waiter number: Int) {
        let waiter = state.withLock { state -> CheckedContinuation<LineEvent, Never>? in
            guard state.waiterNumber == number, let waiter = state.waiter else { return nil }
            state.waiter = nil
            return waiter
        }
        waiter?.resume(returning: .timedOut)
    }
}
