import Testing

@testable import FeedKit

/// A body read while it downloads holds what has arrived in few chunks, however the upstream cuts it.
struct HTTPBodyStreamTests {
    /// An upstream that sends a byte a piece (chunked encoding allows it) must not cost an array
    /// per byte before the reader catches up: that would be many times the body cap in memory.
    @Test func a_body_sent_a_byte_a_piece_is_held_in_few_chunks_and_read_back_whole() throws {
        let body = HTTPBodyStream(expectedBytes: nil, stopTransfer: {})
        let bytes = (0..<100_000).map { UInt8(truncatingIfNeeded: $0 &* 31) }
        bytes.withUnsafeBufferPointer { all in
            for index in all.indices { #expect(body.append(UnsafeBufferPointer(rebasing: all[index...index]))) }
        }
        body.finish()
        #expect(body.unreadChunks <= bytes.count / HTTPBodyStream.smallChunk + 1)
        var read: [UInt8] = []
        try body.readAll(appendingTo: &read)
        #expect(read == bytes)
    }

    /// Bytes added while the reader is partway through the last chunk land after what it has not
    /// read yet, and a large piece starts a chunk of its own.
    @Test func pieces_appended_between_reads_come_out_in_order() throws {
        let body = HTTPBodyStream(expectedBytes: nil, stopTransfer: {})
        func append(_ bytes: [UInt8]) { _ = bytes.withUnsafeBufferPointer { body.append($0) } }
        append(Array(0..<10))
        #expect(try body.read(upTo: 4) == Array(0..<4))
        append(Array(10..<20))
        let large = [UInt8](repeating: 7, count: HTTPBodyStream.smallChunk * 2)
        append(large)
        append([1, 2, 3])
        body.finish()
        var rest: [UInt8] = []
        try body.readAll(appendingTo: &rest)
        #expect(rest == Array(4..<20) + large + [1, 2, 3])
    }

    /// A body holding ``HTTPBodyStream/heldBytes`` unread takes no more: the transport waits, and
    /// is let go on once, when the reader has taken half; what the reader gets is every byte
    /// taken, in order. Abandoned, it takes nothing and never lets the transport go on.
    @Test func a_full_body_takes_nothing_more_until_the_reader_has_taken_half() throws {
        let resumed = Locked(0)
        let body = HTTPBodyStream(expectedBytes: nil, stopTransfer: {}, resumeTransfer: { resumed.withLock { $0 += 1 } })
        let piece = (0..<16_384).map { UInt8(truncatingIfNeeded: $0 &* 7 &+ 3) }
        var offered: [UInt8] = []
        func offer() -> HTTPBodyStream.Offer {
            let outcome = piece.withUnsafeBufferPointer { body.offer($0) }
            if outcome == .taken { offered += piece }
            return outcome
        }
        while offer() == .taken {}
        #expect(body.unreadBytes >= HTTPBodyStream.heldBytes && body.unreadBytes < HTTPBodyStream.heldBytes + piece.count)
        #expect(offer() == .full, "still full")
        var read = try body.read(upTo: body.unreadBytes - HTTPBodyStream.heldBytes / 2 - 1)
        #expect(resumed.withLock { $0 } == 0, "not under half yet")
        #expect(offer() == .full)
        read += try body.read(upTo: 1)
        #expect(resumed.withLock { $0 } == 1, "let go on at half")
        read += try body.read(upTo: 1)
        #expect(resumed.withLock { $0 } == 1, "once")
        #expect(offer() == .taken)
        body.finish()
        try body.readAll(appendingTo: &read)
        #expect(read == offered)
        #expect(resumed.withLock { $0 } == 1)

        let abandoned = HTTPBodyStream(expectedBytes: nil, stopTransfer: {}, resumeTransfer: { resumed.withLock { $0 += 1 } })
        while piece.withUnsafeBufferPointer({ abandoned.offer($0) }) == .taken {}
        abandoned.abandon()
        #expect(piece.withUnsafeBufferPointer { abandoned.offer($0) } == .abandoned)
        #expect(throws: CancellationError.self) { try abandoned.read(upTo: 1) }
        #expect(resumed.withLock { $0 } == 1, "an abandoned body lets nothing go on")
    }
}
