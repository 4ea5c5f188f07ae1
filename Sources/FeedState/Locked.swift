import Foundation

/// A value behind a pthread mutex (`NSLock`), for what the writer thread shares with everyone else.
///
/// `Synchronization.Mutex` would do, but on Linux it waits with raw futex calls that
/// ThreadSanitizer cannot see, so CI's sanitizer pass took the accesses it protects for races.
/// A pthread mutex it understands.
final class Locked<Value: Sendable>: @unchecked Sendable {
    // Sendable by the lock: `value` is only read or written while `lock` is held.
    private let lock = NSLock()
    private var value: Value

    init(_ value: Value) {
        self.value = value
    }

    func withLock<Result>(_ body: (inout Value) throws -> Result) rethrows -> Result {
        lock.lock()
        defer { lock.unlock() }
        return try body(&value)
    }
}
