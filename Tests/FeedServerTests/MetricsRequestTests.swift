import FeedKit
import Testing

@testable import FeedServer

/// `metrics` is a request like `status`: no feed, as JSON or as a word (SPEC §10).
@Suite struct MetricsRequestTests {
    @Test func metrics_decodes_as_json_and_as_a_word() throws {
        let json = try RequestDecoder.decode(Array(#"{"op":"metrics","id":3}"#.utf8)[...]).get()
        #expect(json.request == .metrics)
        #expect(json.id?.description == "3")
        #expect(try RequestDecoder.decode(Array("metrics".utf8)[...]).get().request == .metrics)
        #expect(Request.metrics.feed == nil)
    }

    @Test func metrics_takes_no_arguments() {
        guard case .failure(let error) = RequestDecoder.decode(Array("metrics users".utf8)[...]) else {
            Issue.record("metrics users was accepted")
            return
        }
        #expect(error.code == .badRequest)
    }
}
