/// An immutable byte buffer at a fixed address, shared by every connection a line is sent to.
///
/// A page line is encoded once and the same buffer goes into each subscriber's output queue, into
/// the fleet's publication and into the state directory; its fixed address is what lets
/// `writev(2)` send it without copying. ``prefix(_:)`` gives a part of it without copying either.
public final class SharedBytes: @unchecked Sendable {
    // Sendable by construction: the bytes are copied in by `init` and never written again, and the
    // memory is freed only in `deinit` of the buffer that allocated it, which every view of it
    // keeps alive through `owner`.
    /// The bytes.
    public let buffer: UnsafeRawBufferPointer
    /// The buffer whose memory a view shows; nil for a buffer that owns its memory.
    private let owner: SharedBytes?

    /// A buffer holding a copy of `bytes`.
    public convenience init(_ bytes: [UInt8]) {
        self.init(count: bytes.count) { storage in bytes.withUnsafeBytes { storage.copyMemory(from: $0) } }
    }

    /// A buffer holding a copy of `bytes`.
    public convenience init(copying bytes: UnsafeRawBufferPointer) {
        self.init(count: bytes.count) { storage in if !bytes.isEmpty { storage.copyMemory(from: bytes) } }
    }

    private init(count: Int, fill: (UnsafeMutableRawBufferPointer) -> Void) {
        let storage = UnsafeMutableRawBufferPointer.allocate(byteCount: max(count, 1), alignment: 1)
        fill(storage)
        buffer = UnsafeRawBufferPointer(rebasing: storage[0..<count])
        owner = nil
    }

    private init(viewing owner: SharedBytes, count: Int) {
        buffer = UnsafeRawBufferPointer(rebasing: owner.buffer[0..<count])
        self.owner = owner.owner ?? owner
    }

    deinit {
        if owner == nil { buffer.deallocate() }
    }

    /// How many bytes the buffer holds.
    public var count: Int { buffer.count }

    /// The first `count` bytes (all of them if there are fewer), sharing this buffer's memory.
    public func prefix(_ count: Int) -> SharedBytes {
        SharedBytes(viewing: self, count: min(max(count, 0), buffer.count))
    }
}
