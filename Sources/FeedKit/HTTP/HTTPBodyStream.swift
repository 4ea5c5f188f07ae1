import Dispatch

/// A response body read while it downloads: the transport appends what comes off the connection,
/// and one reader takes it in order, waiting when it has caught up.
///
/// The transport delivers every byte up to its body limit and then ends the body: finished, or
/// failed with why (the connection broke, the limit was passed, the request was cancelled). A
/// reader that stops early ``abandon()``s the body, and the transfer stops.
///
/// Reads wait for the network, so they belong on a thread that may wait: never on the
/// transport's own thread, which delivers the bytes, nor on Swift's shared pool, of which a slow
/// upstream would hold a thread for as long as its body takes. ``HTTPSource`` runs its reader
/// on a thread of the reader's own.
public final class HTTPBodyStream: Sendable {
    private struct State {
        /// What has arrived and is not read yet: `chunks[head...]`, the first from `offset` on.
        var chunks: [[UInt8]] = []
        var head = 0
        var offset = 0
        /// Set once the transport has delivered all it will.
        var end: End?
        /// Set by ``HTTPBodyStream/abandon()``: reads throw `CancellationError`.
        var abandoned = false
        /// Whether the reader waits on `arrived` for more.
        var readerWaits = false
        /// The failure a read has thrown, if one has.
        var failureRead: (any Error)?
        /// How many bytes have arrived and are not read yet.
        var unread = 0
        /// Whether the transport waits (its transfer paused) for the reader to catch up.
        var transportWaits = false

        /// Adds `bytes` after the unread ones: to the last unread chunk while that is under
        /// ``HTTPBodyStream/smallChunk``, else as a chunk of its own. An upstream that sends its
        /// body a byte a piece would otherwise cost an array (a header and an allocation) per
        /// byte, many times the body cap in memory before the reader catches up.
        mutating func add(_ bytes: UnsafeBufferPointer<UInt8>) {
            unread += bytes.count
            if head < chunks.count, chunks[chunks.count - 1].count < HTTPBodyStream.smallChunk {
                chunks[chunks.count - 1].append(contentsOf: bytes)
            } else {
                chunks.append(Array(bytes))
            }
        }

        /// What a read gets now: bytes copied into `buffer`, the end (0) or a failure; nil when it
        /// must wait for more.
        mutating func read(into buffer: UnsafeMutableRawBufferPointer) -> Result<Int, any Error>? {
            if abandoned { return fail(CancellationError()) }
            if head < chunks.count { return .success(copy(into: buffer)) }
            switch end {
            case .finished?: return .success(0)
            case .failed(let error)?: return fail(error)
            case nil:
                readerWaits = true
                return nil
            }
        }

        private mutating func fail(_ error: any Error) -> Result<Int, any Error> {
            failureRead = error
            return .failure(error)
        }

        /// Copies what fits of the unread chunks into `buffer`, freeing each chunk once read.
        private mutating func copy(into buffer: UnsafeMutableRawBufferPointer) -> Int {
            var copied = 0
            while copied < buffer.count, head < chunks.count {
                let count = chunks[head].withUnsafeBytes { chunk in
                    let count = min(chunk.count - offset, buffer.count - copied)
                    UnsafeMutableRawBufferPointer(rebasing: buffer[copied..<copied + count])
                        .copyMemory(from: UnsafeRawBufferPointer(rebasing: chunk[offset..<offset + count]))
                    return count
                }
                copied += count
                offset += count
                if offset == chunks[head].count {
                    chunks[head] = []
                    head += 1
                    offset = 0
                }
            }
            if head == chunks.count {
                chunks.removeAll(keepingCapacity: true)
                head = 0
            }
            unread -= copied
            return copied
        }
    }

    private enum End {
        case finished
        case failed(any Error)
    }

    private let state = Locked(State())
    /// The size under which a chunk still takes the next piece's bytes.
    static let smallChunk = 16 << 10

    /// The chunks holding what is unread, for the tests.
    var unreadChunks: Int { state.withLock { $0.chunks.count - $0.head } }
    /// How many bytes have arrived and are not read yet, for the tests.
    package var unreadBytes: Int { state.withLock { $0.unread } }
    /// Signalled for a waiting reader when bytes or the end arrive.
    private let arrived = DispatchSemaphore(value: 0)
    private let stopTransfer: @Sendable () -> Void
    /// Lets a transfer that ``offer(_:)`` found the body full of go on.
    private let resumeTransfer: @Sendable () -> Void
    /// How many unread bytes a body holds before ``offer(_:)`` says it is full; the transport
    /// goes on once the reader has taken half of them. perf of a 20k-item (9 MB) rss read: the
    /// reader parses slower than loopback delivers, so the whole body was copied into fresh
    /// chunks, each first touch a page fault (a tenth of the read's CPU, on the transport's
    /// thread); held to this, the chunks' memory is used again as the reader frees it.
    package static let heldBytes = 1 << 20
    /// The size the transport expects the body to have (its `Content-Length`), for ``readAll(appendingTo:)``.
    private let expectedBytes: Int?

    /// An empty body the transport will deliver; `stopTransfer` stops its transfer when the reader
    /// abandons it first (it is called at most once, from any thread).
    /// `resumeTransfer` lets the transfer go on after an ``offer(_:)`` found the body full; it is
    /// called at most once per such offer, from the reader's thread.
    package init(expectedBytes: Int?, stopTransfer: @escaping @Sendable () -> Void, resumeTransfer: @escaping @Sendable () -> Void = {}) {
        self.expectedBytes = expectedBytes
        self.stopTransfer = stopTransfer
        self.resumeTransfer = resumeTransfer
    }

    /// A body that has arrived whole: `bytes`, then the end.
    public convenience init(whole bytes: [UInt8]) {
        self.init(expectedBytes: bytes.count, stopTransfer: {})
        if !bytes.isEmpty { state.withLock { $0.chunks.append(bytes) } }
        finish()
    }

    // MARK: The transport's side

    /// Adds `bytes` to the body; false when the reader has abandoned it (the transfer can stop).
    package func append(_ bytes: UnsafeBufferPointer<UInt8>) -> Bool {
        let wake = state.withLock { state -> Bool? in
            guard state.end == nil, !state.abandoned else { return nil }
            state.add(bytes)
            defer { state.readerWaits = false }
            return state.readerWaits
        }
        if wake == true { arrived.signal() }
        return wake != nil
    }

    /// What became of bytes offered to the body.
    package enum Offer {
        /// Added to the body.
        case taken
        /// Not taken: the body holds ``HTTPBodyStream/heldBytes`` unread. The transport offers
        /// them again once the body calls its `resumeTransfer`.
        case full
        /// Not taken: the reader has abandoned the body (the transfer can stop).
        case abandoned
    }

    /// Adds `bytes` to the body unless it holds ``heldBytes`` unread already, or has said so and
    /// not yet called `resumeTransfer` (the transport waits for that), or the reader has abandoned it.
    package func offer(_ bytes: UnsafeBufferPointer<UInt8>) -> Offer {
        let (offer, wake) = state.withLock { state -> (Offer, Bool) in
            guard state.end == nil, !state.abandoned else { return (.abandoned, false) }
            if state.transportWaits || state.unread >= Self.heldBytes {
                state.transportWaits = true
                return (.full, false)
            }
            state.add(bytes)
            defer { state.readerWaits = false }
            return (.taken, state.readerWaits)
        }
        if wake { arrived.signal() }
        return offer
    }

    /// Ends the body after what has been appended.
    package func finish() {
        end(.finished)
    }

    /// Ends the body after what has been appended, with `error`: a read that reaches the end throws it.
    package func fail(_ error: any Error) {
        end(.failed(error))
    }

    private func end(_ end: End) {
        let wake = state.withLock { state -> Bool in
            guard state.end == nil else { return false }
            state.end = end
            defer { state.readerWaits = false }
            return state.readerWaits
        }
        if wake { arrived.signal() }
    }

    // MARK: The reader's side

    /// Copies the next bytes of the body into `buffer`, as many as have arrived up to its size,
    /// waiting until some have; 0 at the end of the body. Throws the transport's error once the
    /// bytes before it are read, and `CancellationError` after ``abandon()``. `buffer` must not
    /// be empty: 0 would read as the end.
    public func read(into buffer: UnsafeMutableRawBufferPointer) throws -> Int {
        precondition(!buffer.isEmpty, "a body is read into room for at least one byte")
        while true {
            let (outcome, resume) = state.withLock { state in
                let outcome = state.read(into: buffer)
                guard state.transportWaits, state.unread <= Self.heldBytes / 2 else { return (outcome, false) }
                state.transportWaits = false
                return (outcome, true)
            }
            if resume { resumeTransfer() }
            if let outcome { return try outcome.get() }
            arrived.wait()
        }
    }

    /// The body's next `count` bytes, or fewer if it ends first, waiting for them.
    public func read(upTo count: Int) throws -> [UInt8] {
        var bytes = [UInt8](repeating: 0, count: count)
        var filled = 0
        while filled < count {
            let read = try bytes.withUnsafeMutableBytes { try self.read(into: UnsafeMutableRawBufferPointer(rebasing: $0[filled...])) }
            if read == 0 { break }
            filled += read
        }
        bytes.removeSubrange(filled...)
        return bytes
    }

    /// Appends the rest of the body to `bytes` (the body's start, or nothing), waiting for all of it.
    public func readAll(appendingTo bytes: inout [UInt8]) throws {
        if let expectedBytes { bytes.reserveCapacity(expectedBytes) }
        var piece = [UInt8](repeating: 0, count: 64 << 10)
        while case let count = try piece.withUnsafeMutableBytes({ try read(into: $0) }), count > 0 {
            bytes.append(contentsOf: piece[..<count])
        }
    }

    /// Stops the body where the reader is: what is unread is freed, a transfer still running
    /// stops, and every later read throws `CancellationError`. Any thread may call it, a waiting
    /// read then throws at once.
    public func abandon() {
        let (stopping, wake) = state.withLock { state in
            defer {
                state.abandoned = true
                state.chunks = []
                state.head = 0
                state.unread = 0
                state.transportWaits = false
                state.readerWaits = false
            }
            return (state.end == nil && !state.abandoned, state.readerWaits)
        }
        if wake { arrived.signal() }
        if stopping { stopTransfer() }
    }

    /// The error a read threw (the transfer's failure, or `CancellationError` after ``abandon()``);
    /// nil if no read has thrown.
    public var failureRead: (any Error)? {
        state.withLock { $0.failureRead }
    }
}
