import FeedKit
import Foundation

/// Where an `http` feed may send its requests, and with what (SPEC §9).
///
/// Every URL the adapter fetches is judged here, whatever named it: the `url` template, a `Link`
/// header, a next-page URL in a body, or a page token read back from the state store or sent by
/// another instance of a fleet (a token is only text: whoever can write the store or the stream
/// can write any URL into it). The bearer token and the `headers` table go only to the origin
/// (scheme, host and port) of the feed's `url`. A URL on another origin, another port on the
/// loopback interface included, is refused, unless the feed says `follow_other_hosts = true`; then
/// it is fetched with neither the token nor the table (only its `Accept`), as a redirect to
/// another origin is (``CurlTransport``).
struct OriginPolicy: Sendable {
    /// The origin of the feed's `url`.
    let home: URLOrigin
    let followsOtherHosts: Bool

    /// Reads `follow_other_hosts`; `firstPage` is the URL of page 1, whose origin is the feed's.
    init(firstPage: URL, options: AdapterOptions) throws(OptionError) {
        guard let home = URLOrigin(firstPage), home.isHTTP else {
            throw options.invalid("url", "\"\(firstPage.absoluteString)\" is not an http(s) URL")
        }
        self.home = home
        followsOtherHosts = try options.bool("follow_other_hosts") ?? false
    }

    /// The client to GET page `page` at `url` with: `http` itself on the feed's origin, `http`
    /// without the token and the feed's header fields on another origin the feed follows.
    func client(_ http: HTTPSource, for url: URL, page: Int) throws(SourceError) -> HTTPSource {
        guard let origin = URLOrigin(url), origin.isHTTP else {
            throw SourceError.rejected("page \(page) would be fetched from \(url.absoluteString), which is not an http(s) URL; not fetched")
        }
        if origin == home { return http }
        guard followsOtherHosts else {
            throw SourceError.rejected(
                "page \(page) would be fetched from \(url.absoluteString), on another origin than the feed's url (\(home)); "
                    + "not fetched (follow_other_hosts = true fetches it, without the bearer token)")
        }
        var stranger = http
        stranger.bearerToken = nil
        stranger.headers = URLOrigin.headersForOtherOrigins(http.headers)
        return stranger
    }
}
