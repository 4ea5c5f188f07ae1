import Foundation

/// A value behind a pthread mutex (`NSLock`), for state that threads share.
///
/// `Synchronization.Mutex` would do, but on Linux it waits with raw futex calls that
/// ThreadSanitizer cannot see, so CI's sanitizer pass took the accesses it protects for races.
/// A pthread mutex it understands. Everything in feedd that threads share goes through this.
public final class Locked<Value>: @unchecked Sendable {
    // Sendable by the lock: `value` is only read or written while `lock` is held, and only
    // inside `withLock`, whose body cannot keep a reference to it.
    private let lock = NSLock()
    private var value: Value

    /// `value`, behind its lock.
    public init(_ value: Value) {
        self.value = value
    }

    /// Runs `body` on the value with the lock held, and returns what it returned.
    public func withLock<Result, Failure: Error>(_ body: (inout Value) throws(Failure) -> Result) throws(Failure) -> Result {
        lock.lock()
        defer { lock.unlock() }
        return try body(&value)
    }
}
