import FeedEngine
import FeedKit
import Testing

@testable import FeedHTTP

/// Server-Sent Events: framing, where a reconnecting client resumes, and the queue that holds a
/// stream's bytes until libmicrohttpd takes them.
@Suite struct EventStreamTests {
    @Test func a_last_event_id_of_the_current_generation_resumes_after_its_page() {
        #expect(EventFraming.start(lastEventID: "4:17", after: 2, currentGeneration: 4) == .init(after: 17, announcesGeneration: false))
        #expect(EventFraming.start(lastEventID: " 4:0 ", after: nil, currentGeneration: 4) == .init(after: 0, announcesGeneration: false))
    }

    @Test func one_of_a_generation_that_is_gone_starts_the_current_one_and_says_so() {
        #expect(EventFraming.start(lastEventID: "3:17", after: nil, currentGeneration: 4) == .init(after: 0, announcesGeneration: true))
        #expect(EventFraming.start(lastEventID: "9:1", after: 5, currentGeneration: 4) == .init(after: 0, announcesGeneration: true))
    }

    @Test func without_one_the_stream_starts_after_the_after_parameter() {
        #expect(EventFraming.start(lastEventID: nil, after: 5, currentGeneration: 4) == .init(after: 5, announcesGeneration: false))
        #expect(EventFraming.start(lastEventID: "", after: nil, currentGeneration: 4) == .init(after: 0, announcesGeneration: false))
    }

    @Test func a_last_event_id_of_another_form_is_refused() {
        for bad in ["17", "a:b", "1:2:3", "-1:2", "1:-2", "1:", ":1", "1:99999999999"] {
            #expect(EventFraming.start(lastEventID: bad, after: nil, currentGeneration: 1) == nil, "\(bad)")
        }
    }

    @Test func events_carry_their_id_and_one_line_of_data() {
        #expect(String(decoding: EventFraming.refreshed(feed: "f", generation: 3), as: UTF8.self)
            == "event: refreshed\nid: 3:0\ndata: {\"type\":\"refreshed\",\"feed\":\"f\",\"generation\":3}\n\n")
        #expect(String(decoding: EventFraming.end(feed: "f", generation: 3, page: 9), as: UTF8.self)
            == "event: end\nid: 3:9\ndata: {\"type\":\"end\",\"feed\":\"f\",\"page\":9}\n\n")
        let upstream = String(decoding: EventFraming.upstream(feed: "f", message: "HTTP 503\nfrom x", retryIn: .seconds(2)), as: UTF8.self)
        #expect(upstream.hasPrefix("event: upstream\ndata: {") && !upstream.contains("id:"), "the reading has not moved")
        #expect(upstream.split(separator: "\n").count == 2, "a newline in a message stays escaped inside the data line")
        #expect(String(decoding: EventFraming.pageHead(generation: 2, page: 5), as: UTF8.self) == "event: page\nid: 2:5\ndata: ")
    }

    @Test func the_queue_hands_out_bytes_in_order_across_pieces_and_counts_whole_pages() {
        var queue = OutgoingQueue()
        queue.append(Array("ab".utf8), endsPage: false)
        queue.append(PageBytes(Array("cdef".utf8)), endsPage: false)
        queue.append(Array("g".utf8), endsPage: true)
        queue.append(Array("hij".utf8), endsPage: true)
        #expect(queue.pageCount == 2)
        var taken: [UInt8] = []
        var buffer = [UInt8](repeating: 0, count: 3)
        while !queue.isEmpty {
            let count = buffer.withUnsafeMutableBytes { queue.take(into: $0) }
            taken += buffer[0..<count]
            if taken.count == 3 { #expect(queue.pageCount == 2) }
            if taken.count == 6 { #expect(queue.pageCount == 2, "g is not taken yet") }
        }
        #expect(String(decoding: taken, as: UTF8.self) == "abcdefghij")
        #expect(queue.pageCount == 0)
    }
}
