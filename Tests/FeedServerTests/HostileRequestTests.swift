import FeedKit
import Testing

@testable import FeedServer

/// Numbers, names and ids from a client are checked where they enter (issue 14, SPEC §5).
@Suite struct HostileRequestTests {
    func errorCode(_ line: String) -> ErrorCode? {
        if case .failure(let error) = RequestDecoder.decode(Array(line.utf8)[...]) { return error.code }
        return nil
    }

    func request(_ line: String) -> Request? {
        try? RequestDecoder.decode(Array(line.utf8)[...]).get().request
    }

    @Test func after_and_page_beyond_the_documented_bound_are_bad_requests() {
        for line in [
            #"{"op":"subscribe","feed":"f","after":9223372036854775807}"#,
            #"{"op":"subscribe","feed":"f","after":9223372036854775806}"#,
            #"{"op":"subscribe","feed":"f","after":1000000001}"#,
            #"{"op":"subscribe","feed":"f","after":-1}"#,
            #"{"op":"subscribe","feed":"f","after":1e300}"#,
            #"{"op":"ack","feed":"f","page":9223372036854775807}"#,
            #"{"op":"next","feed":"f","count":10001}"#,
            "subscribe f 9223372036854775807",
            "follow f 1000000001",
            "ack f 9223372036854775807",
        ] {
            #expect(errorCode(line) == .badRequest, "\(line)")
        }
        #expect(request(#"{"op":"subscribe","feed":"f","after":1000000000}"#) == .subscribe(feed: "f", consumer: nil, after: 1_000_000_000, follow: false))
        #expect(request("subscribe f 1000000000") == .subscribe(feed: "f", consumer: nil, after: 1_000_000_000, follow: false))
        #expect(request(#"{"op":"next","feed":"f","count":10000}"#) == .next(feed: "f", count: 10_000))
    }

    @Test func consumer_names_follow_the_documented_pattern_and_length() {
        for name in ["../x\\n", "", ".hidden", "a/b", "a b", "ünï", String(repeating: "a", count: 129), String(repeating: "x", count: 60_000)] {
            #expect(errorCode(#"{"op":"subscribe","feed":"f","consumer":"\#(name)"}"#) == .badRequest, "\(name.prefix(20))")
            #expect(errorCode(#"{"op":"forget","feed":"f","consumer":"\#(name)"}"#) == .badRequest, "\(name.prefix(20))")
        }
        for name in ["c", "C1", "reader-2.prod_x", String(repeating: "a", count: 128)] {
            #expect(request(#"{"op":"subscribe","feed":"f","consumer":"\#(name)"}"#) == .subscribe(feed: "f", consumer: name, after: nil, follow: false))
        }
    }

    @Test func the_id_is_kept_as_the_exact_json_text_sent() throws {
        func id(_ line: String) throws -> String? {
            try RequestDecoder.decode(Array(line.utf8)[...]).get().id?.description
        }
        #expect(try id(#"{"op":"ping","id":123456789012345678901234567890}"#) == "123456789012345678901234567890")
        #expect(try id(#"{"op":"ping","id":1.50}"#) == "1.50")
        #expect(try id(#"{"op":"ping","id":-0.0e+10 }"#) == "-0.0e+10")
        #expect(try id(#"{ "id" : "a,\"}" , "op":"ping"}"#) == #""a,\"}""#)
        #expect(try id(#"{"op":"ping","nested":{"id":1},"id":[1,{"id":2}]}"#) == #"[1,{"id":2}]"#)
        #expect(try id(#"{"op":"ping","\u0069d":7}"#) == "7")
        #expect(try id(#"{"op":"ping"}"#) == nil)
        if case .failure(let error) = RequestDecoder.decode(Array(#"{"op":"fly","id":18446744073709551616}"#.utf8)[...]) {
            #expect(error.id?.description == "18446744073709551616")
        } else {
            Issue.record("an unknown op was decoded")
        }
    }

    @Test func a_reply_echoes_the_id_text() {
        let id = RequestID(json: Array("123456789012345678901234567890".utf8))
        #expect(String(decoding: Message.simple("pong", id: id), as: UTF8.self) == #"{"type":"pong","id":123456789012345678901234567890}"# + "\n")
        #expect(RequestID(replyTag: id.replyTag) == id, "the engine carries it back unchanged")
    }
}
