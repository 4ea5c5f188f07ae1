import FeedEngine
import Glibc

/// What one connection has yet to write: shared buffers sent with one `sendmsg(2)` per batch, in order.
///
/// Pages are queued by reference, so a page queued on a thousand connections exists once.
struct OutputQueue {
    private struct Chunk {
        let bytes: SharedBytes
        /// The last chunk of a page line, which is what the page window counts.
        let endsPage: Bool
    }

    enum FlushResult {
        case drained
        case wouldBlock
        case failed(errno: Int32)
    }

    private var chunks: [Chunk] = []
    private var head = 0
    private var headOffset = 0
    private(set) var byteCount = 0
    private(set) var pageCount = 0
    /// Every byte written so far, for the metrics.
    private(set) var bytesWritten = 0

    var isEmpty: Bool { byteCount == 0 }

    /// Forgets what is still unsent (the connection is closing), keeping ``bytesWritten``.
    mutating func dropUnsent() {
        chunks = []
        (head, headOffset, byteCount, pageCount) = (0, 0, 0, 0)
    }

    mutating func append(_ bytes: SharedBytes, endsPage: Bool = false) {
        guard bytes.count > 0 else { return }
        chunks.append(Chunk(bytes: bytes, endsPage: endsPage))
        byteCount += bytes.count
        if endsPage { pageCount += 1 }
    }

    /// Writes as much as the socket takes.
    mutating func flush(to descriptor: Int32) -> FlushResult {
        while head < chunks.count {
            let written = writeBatch(to: descriptor)
            if written < 0 {
                if errno == EINTR { continue }
                return errno == EAGAIN || errno == EWOULDBLOCK ? .wouldBlock : .failed(errno: errno)
            }
            consume(written)
        }
        // Nothing queued: give the memory back, so an idle connection costs next to nothing.
        chunks = []
        head = 0
        return .drained
    }

    private func writeBatch(to descriptor: Int32) -> Int {
        let batch = min(chunks.count - head, 64)
        return withUnsafeTemporaryAllocation(of: iovec.self, capacity: batch) { vectors in
            for index in 0..<batch {
                let buffer = chunks[head + index].bytes.buffer
                let skip = index == 0 ? headOffset : 0
                vectors[index] = iovec(
                    iov_base: UnsafeMutableRawPointer(mutating: buffer.baseAddress! + skip), iov_len: buffer.count - skip)
            }
            // sendmsg rather than writev: MSG_NOSIGNAL turns a vanished reader into EPIPE, not SIGPIPE.
            var message = msghdr()
            message.msg_iov = vectors.baseAddress
            message.msg_iovlen = batch
            return sendmsg(descriptor, &message, Int32(MSG_NOSIGNAL))
        }
    }

    private mutating func consume(_ written: Int) {
        var remaining = written
        byteCount -= written
        bytesWritten += written
        while remaining > 0 {
            let available = chunks[head].bytes.count - headOffset
            if remaining < available {
                headOffset += remaining
                return
            }
            remaining -= available
            if chunks[head].endsPage { pageCount -= 1 }
            head += 1
            headOffset = 0
        }
        if head > 64, head * 2 > chunks.count {
            chunks.removeFirst(head)
            head = 0
        }
    }
}
