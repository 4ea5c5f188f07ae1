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
}
