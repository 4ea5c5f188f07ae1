import Foundation

/// Runs `body`, failing if it takes longer than `limit`.
public func within<Value: Sendable>(_ limit: Duration, _ what: String, _ body: @escaping @Sendable () async throws -> Value) async throws -> Value {
    try await withThrowingTaskGroup(of: Value?.self) { group in
        group.addTask { try await body() }
        group.addTask {
            try await Task.sleep(for: limit)
            return nil
        }
        defer { group.cancelAll() }
        guard let first = try await group.next(), let value = first else { throw TestFailure("no \(what) within \(limit)") }
        return value
    }
}

/// The next element of `sequence` that satisfies `matching`, within `limit`.
public func next<Element: Sendable>(
    of sequence: AsyncStream<Element>, within limit: Duration = .seconds(5), _ what: String, matching: @escaping @Sendable (Element) -> Bool = { _ in true }
) async throws -> Element {
    try await within(limit, what) {
        for await element in sequence where matching(element) { return element }
        throw TestFailure("the stream ended before \(what)")
    }
}
