import Foundation

/// The validators (`ETag`, `Last-Modified`) of the one URL a polled feed looks at again, so that
/// each look is a conditional GET and an unchanged resource costs a `304` with no body.
///
/// Kept per generation: the first fetch of a new generation (after a `refresh`) always gets the
/// whole resource.
public final class RevalidationMemory: Sendable {
    private struct Entry {
        let generation: Int
        let url: URL
        let validators: HTTPValidators
    }

    private let entry = Locked<Entry?>(nil)

    /// An empty memory: the first request is unconditional.
    public init() {}

    /// What to send when GETting `url` again in `generation`; nil for a plain GET.
    public func validators(for url: URL, generation: Int) -> HTTPValidators? {
        entry.withLock { entry in
            guard let entry, entry.generation == generation, entry.url == url else { return nil }
            return entry.validators
        }
    }

    /// Remembers the validators of `response` from `url`, replacing any others.
    public func remember(_ response: HTTPResponse, from url: URL, generation: Int) {
        entry.withLock { $0 = response.validators.map { Entry(generation: generation, url: url, validators: $0) } }
    }
}
