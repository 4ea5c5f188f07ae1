import FeedKit
import Testing

@Suite struct HeaderFieldTests {
    static func split(_ line: String) -> [String]? {
        Array(line.utf8).withUnsafeBytes { HeaderField.split($0).map { [$0.name, $0.value] } }
    }

    @Test func a_name_is_lowercased_and_a_value_loses_the_whitespace_around_it() {
        #expect(Self.split("Content-Type: application/json\r\n") == ["content-type", "application/json"])
        #expect(Self.split("LINK:\t<https://x/?a=b:c>; rel=\"next\" \r\n") == ["link", "<https://x/?a=b:c>; rel=\"next\""])
        #expect(Self.split("ETag:\r\n") == ["etag", ""])
        #expect(Self.split("X-Naïve : Zoë\r\n") == ["x-naïve", "Zoë"])
    }

    @Test func a_line_without_a_colon_is_no_field() {
        #expect(Self.split("\r\n") == nil)
        #expect(Self.split("HTTP/1.1 200 OK\r\n") == nil)
    }
}
