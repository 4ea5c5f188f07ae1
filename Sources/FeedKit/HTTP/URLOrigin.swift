import CCurl
import Foundation

/// The origin of a URL (RFC 6454): its scheme, host and port, the scheme's default port filled in.
///
/// Read by libcurl's URL parser, the one that makes the requests, so that no URL can look like
/// one origin here and reach another there (a parser differential such as
/// `http://api.example.com\@elsewhere/`). Hosts compare without regard to case; anything else
/// that differs (another port on the loopback interface, `http` against `https`, `127.1` against
/// `127.0.0.1`) is another origin.
public struct URLOrigin: Sendable, Hashable, CustomStringConvertible {
    public let scheme: String
    public let host: String
    public let port: Int

    public init(scheme: String, host: String, port: Int) {
        self.scheme = scheme.lowercased()
        self.host = host.lowercased()
        self.port = port
    }

    /// The origin of `url`; nil if libcurl does not read it as an absolute URL with a host.
    public init?(_ url: URL) {
        guard let origin = CurlURL(url.absoluteString)?.origin else { return nil }
        self = origin
    }

    /// Whether requests to this origin may be made at all: http and https only.
    public var isHTTP: Bool { scheme == "http" || scheme == "https" }

    /// `https://api.example.com:443`.
    public var description: String { "\(scheme)://\(host):\(port)" }

    /// The fields of `headers` that may go to another origin than the one they were configured
    /// for: `Accept` alone, since any other (an `X-API-Key` in a feed's `headers`) may be a secret.
    public static func headersForOtherOrigins(_ headers: [String: String]) -> [String: String] {
        headers.filter { $0.key.lowercased() == "accept" }
    }
}

/// A URL parsed by libcurl's URL API.
final class CurlURL {
    private let handle: OpaquePointer

    init?(_ text: String) {
        handle = curl_url()
        guard curl_url_set(handle, CURLUPART_URL, text, 0) == CURLUE_OK else { return nil }
    }

    deinit { curl_url_cleanup(handle) }

    /// `reference` (absolute, or relative to this URL) as an absolute URL.
    func resolving(_ reference: String) -> CurlURL? {
        guard let base = text, let resolved = CurlURL(base), curl_url_set(resolved.handle, CURLUPART_URL, reference, 0) == CURLUE_OK else {
            return nil
        }
        return resolved
    }

    var text: String? { part(CURLUPART_URL) }

    var origin: URLOrigin? {
        guard let scheme = part(CURLUPART_SCHEME), let host = part(CURLUPART_HOST),
            let port = part(CURLUPART_PORT, flags: UInt32(CURLU_DEFAULT_PORT)).flatMap({ Int($0) })
        else { return nil }
        return URLOrigin(scheme: scheme, host: host, port: port)
    }

    private func part(_ which: CURLUPart, flags: UInt32 = 0) -> String? {
        var value: UnsafeMutablePointer<CChar>?
        guard curl_url_get(handle, which, &value, flags) == CURLUE_OK, let value else { return nil }
        defer { curl_free(value) }
        return String(cString: value)
    }
}
