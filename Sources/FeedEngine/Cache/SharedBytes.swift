/// An immutable byte buffer at a fixed address, shared by every connection a line is sent to.
///
/// A page line is encoded once and the same buffer goes into each subscriber's output queue;
/// its fixed address is what lets `writev(2)` send it without copying.
public final class SharedBytes: @unchecked Sendable {
    // Sendable by construction: the bytes are copied in by `init` and never written again, and the
    // memory is freed only in `deinit`, when no reference remains.
    public let buffer: UnsafeRawBufferPointer

    public init(_ bytes: [UInt8]) {
        let storage = UnsafeMutableRawBufferPointer.allocate(byteCount: max(bytes.count, 1), alignment: 1)
        bytes.withUnsafeBytes { storage.copyMemory(from: $0) }
        buffer = UnsafeRawBufferPointer(rebasing: storage[0..<bytes.count])
    }

    deinit {
        buffer.deallocate()
    }

    public var count: Int { buffer.count }
}
