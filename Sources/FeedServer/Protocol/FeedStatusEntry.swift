import FeedEngine
import FeedKit

/// One feed's entry of the `status` reply (SPEC §5), for the other fronts: the HTTP front
/// answers `GET /v1/feeds/F` with it.
public enum FeedStatusEntry {
    /// `name`, `source`, `state`, `generation` … as `status` lists them.
    @MainActor
    public static func json(_ feed: Feed) -> JSONValue { FeedStatus(feed).json }
}
