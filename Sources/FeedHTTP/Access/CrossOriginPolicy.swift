/// Which browser origins may call the API (`cors_origins`, SPEC §11), and the CORS fields that
/// say so. A request from an origin not listed gets no CORS fields, so the browser withholds the
/// answer from the page that asked.
struct CrossOriginPolicy {
    private let origins: Set<String>
    private let allowsAny: Bool

    init(origins: [String]) {
        allowsAny = origins.contains("*")
        self.origins = Set(origins)
    }

    /// The fields for an answer to a request from `origin` (its `Origin` field).
    func headers(for origin: String?) -> [(name: String, value: String)] {
        guard let origin, allows(origin) else { return [] }
        return [
            ("Access-Control-Allow-Origin", allowsAny ? "*" : origin),
            // The fields a page may read: a revalidating client needs the ETag, one that was
            // refused needs the challenge, one told to wait needs Retry-After.
            ("Access-Control-Expose-Headers", "ETag, WWW-Authenticate, Retry-After"),
        ] + (allowsAny ? [] : [("Vary", "Origin")])
    }

    /// The fields answering a preflight (`OPTIONS` with `Access-Control-Request-Method`) from
    /// `origin` for a resource that takes `methods`.
    func preflightHeaders(for origin: String?, methods: [String]) -> [(name: String, value: String)] {
        let allowed = headers(for: origin)
        guard !allowed.isEmpty else { return [] }
        return allowed + [
            ("Access-Control-Allow-Methods", methods.joined(separator: ", ")),
            ("Access-Control-Allow-Headers", "Authorization, Content-Type, If-None-Match, Last-Event-ID"),
            ("Access-Control-Max-Age", "600"),
        ]
    }

    private func allows(_ origin: String) -> Bool { allowsAny || origins.contains(origin) }
}
