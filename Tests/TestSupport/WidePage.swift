/// An S3-feed page of many tiny items, `{"items":[{"id":"1000001"},…],"hasMorePages":…}` (17
/// bytes an item): what a page costs the daemon beyond its JSON shows on such pages.
public enum WidePage {
    public static func body(page: Int, items: Int, last: Bool) -> [UInt8] {
        var bytes = Array(#"{"items":["#.utf8)
        bytes.reserveCapacity(items * 17 + 64)
        for index in 0..<items {
            if index > 0 { bytes.append(UInt8(ascii: ",")) }
            bytes += Array(#"{"id":"\#(page * 1_000_000 + index)"}"#.utf8)
        }
        bytes += Array(#"],"hasMorePages":\#(!last)}"#.utf8)
        return bytes
    }
}
