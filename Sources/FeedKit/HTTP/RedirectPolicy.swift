import Foundation

/// Which HTTP redirects a feed follows: the feed key `follow_redirects`.
///
/// At most ``maximumHops`` redirects are followed, over http and https only. The default,
/// ``sameHost``, keeps a feed on the host its config names, so a compromised or careless
/// upstream cannot point feedd at another machine or at a port on the loopback interface.
public enum RedirectPolicy: String, Sendable, Hashable, CaseIterable {
    /// A `3xx` is the answer: it is reported like any other unexpected status.
    case never
    /// Redirects to the same host and port only; `http://host` to `https://host` (an upgrade to
    /// TLS on the default ports) counts as the same host.
    case sameHost = "same_host"
    /// Redirects to any host.
    case anyHost = "any_host"

    /// The feed key that chooses the policy, for the declarations of the adapters that call
    /// ``AdapterContext/http(_:)``.
    public static let configKey = ConfigKey(
        "follow_redirects", .oneOf(allCases.map(\.rawValue)), .value("\"same_host\""),
        "which HTTP redirects are followed: none, to the same host and port, or to any host")

    /// The most redirects one request follows.
    public static let maximumHops = 5

    /// Whether a redirect from `origin` (that of the URL the request was made for) to `target` is allowed.
    public func allows(from origin: URLOrigin, to target: URLOrigin) -> Bool {
        switch self {
        case .never: return false
        case .anyHost: return true
        case .sameHost:
            guard origin.host == target.host else { return false }
            if origin.scheme == target.scheme { return origin.port == target.port }
            return origin.scheme == "http" && origin.port == 80 && target.scheme == "https" && target.port == 443
        }
    }
}

extension AdapterContext {
    /// The shared HTTP layer with this feed's timeout and its `follow_redirects` option (read from
    /// `options`, so a network adapter accepts that key by calling this).
    public func http(_ options: AdapterOptions) throws(OptionError) -> HTTPSource {
        var source = http
        if let name = try options.string("follow_redirects") {
            guard let policy = RedirectPolicy(rawValue: name) else {
                let names = RedirectPolicy.allCases.map { "\"\($0.rawValue)\"" }.joined(separator: ", ")
                throw options.invalid("follow_redirects", "\"\(name)\" is not a redirect policy (\(names))")
            }
            source.redirects = policy
        }
        return source
    }
}
