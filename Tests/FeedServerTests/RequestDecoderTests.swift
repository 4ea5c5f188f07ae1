import FeedKit
import Testing

@testable import FeedServer

@Suite struct RequestDecoderTests {
    func decode(_ line: String) -> Result<(request: Request, id: RequestID?), RequestError> {
        RequestDecoder.decode(Array(line.utf8)[...])
    }

    func request(_ line: String) -> Request? {
        try? decode(line).get().request
    }

    func errorCode(_ line: String) -> ErrorCode? {
        if case .failure(let error) = decode(line) { return error.code }
        return nil
    }

    @Test func decodes_every_json_op() {
        #expect(request(#"{"op":"subscribe","feed":"f","consumer":"c","after":3,"follow":true}"#) == .subscribe(feed: "f", consumer: "c", after: 3, follow: true))
        #expect(request(#"{"op":"subscribe","feed":"f"}"#) == .subscribe(feed: "f", consumer: nil, after: nil, follow: false))
        #expect(request(#"{"op":"next","feed":"f"}"#) == .next(feed: "f", count: 1))
        #expect(request(#"{"op":"next","feed":"f","count":5}"#) == .next(feed: "f", count: 5))
        #expect(request(#"{"op":"ack","feed":"f","page":2}"#) == .ack(feed: "f", page: 2))
        #expect(request(#"{"op":"unsubscribe","feed":"f"}"#) == .unsubscribe(feed: "f"))
        #expect(request(#"{"op":"refresh","feed":"f"}"#) == .refresh(feed: "f"))
        #expect(request(#"{"op":"status"}"#) == .status)
        #expect(request(#"{"op":"ping"}"#) == .ping)
        #expect(request(#"{"op":"quit"}"#) == .quit)
    }

    @Test func keeps_the_id_of_any_json_type() throws {
        #expect(try decode(#"{"op":"ping","id":{"a":[1]}}"#).get().id?.description == #"{"a":[1]}"#)
        #expect(try decode(#"{"op":"ping"}"#).get().id == nil)
    }

    @Test func decodes_the_inline_words() {
        #expect(request("next users") == .next(feed: "users", count: 1))
        #expect(request("next users 5") == .next(feed: "users", count: 5))
        #expect(request("follow donny") == .subscribe(feed: "donny", consumer: nil, after: nil, follow: true))
        #expect(request("subscribe donny 4") == .subscribe(feed: "donny", consumer: nil, after: 4, follow: false))
        #expect(request("ack users 3") == .ack(feed: "users", page: 3))
        #expect(request("status") == .status)
        #expect(request("  ping\t") == .ping)
    }

    @Test func names_what_is_wrong() {
        #expect(errorCode("{nope") == .badJSON)
        #expect(errorCode("[1,2]") == .unknownOp, "only a line starting with { is JSON")
        #expect(errorCode(#"{"feed":"f"}"#) == .badRequest)
        #expect(errorCode(#"{"op":7}"#) == .badRequest)
        #expect(errorCode(#"{"op":"next"}"#) == .badRequest)
        #expect(errorCode(#"{"op":"next","feed":"f","count":0}"#) == .badRequest)
        #expect(errorCode(#"{"op":"next","feed":"f","count":"2"}"#) == .badRequest)
        #expect(errorCode(#"{"op":"ack","feed":"f"}"#) == .badRequest)
        #expect(errorCode(#"{"op":"subscribe","feed":"f","follow":"yes"}"#) == .badRequest)
        #expect(errorCode(#"{"op":"fly"}"#) == .unknownOp)
        #expect(errorCode("fly away") == .unknownOp)
        #expect(errorCode("next") == .badRequest)
        #expect(errorCode("next users many") == .badRequest)
        #expect(errorCode("next users 1 2") == .badRequest)
        #expect(errorCode("status now") == .badRequest)
        #expect(errorCode("ack users") == .badRequest)
    }

    /// Two readers of the same line could take either value of a member named twice.
    @Test func a_member_named_twice_is_bad_json() {
        #expect(errorCode(#"{"op":"ack","feed":"f","page":2,"page":9}"#) == .badJSON)
        #expect(errorCode(#"{"op":"ping","id":1,"id":2}"#) == .badJSON)
    }

    @Test func a_whole_number_written_with_a_fraction_or_an_exponent_is_a_count() {
        #expect(request(#"{"op":"ack","feed":"f","page":3.0}"#) == .ack(feed: "f", page: 3))
        #expect(request(#"{"op":"next","feed":"f","count":1e1}"#) == .next(feed: "f", count: 10))
        #expect(errorCode(#"{"op":"ack","feed":"f","page":2.5}"#) == .badRequest)
        #expect(errorCode(#"{"op":"ack","feed":"f","page":1e400}"#) == .badRequest)
    }

    @Test func the_id_is_echoed_as_written_and_the_escaped_values_are_read() throws {
        let decoded = try decode(#"{ "id" : 123456789012345678901234567890 , "op":"subscribe","feed":"f","consumer":"c\u0031"}"#).get()
        #expect(decoded.id?.description == "123456789012345678901234567890")
        #expect(decoded.request == .subscribe(feed: "f", consumer: "c1", after: nil, follow: false))
    }

    @Test func rejects_bytes_that_are_not_utf8() {
        if case .failure(let error) = RequestDecoder.decode([0xFF, 0xFE, 0x41][...]) {
            #expect(error.code == .badRequest)
        } else {
            Issue.record("decoded invalid UTF-8")
        }
    }
}
