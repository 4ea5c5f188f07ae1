import FeedKit

extension Item {
    /// The item's data as subscribers are sent it: the JSON text the page line holds.
    public var dataText: String {
        var writer = JSONWriter()
        writeData(to: &writer)
        return String(decoding: writer.bytes, as: UTF8.self)
    }
}
