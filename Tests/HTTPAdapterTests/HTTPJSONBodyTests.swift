import FeedKit
import Foundation
import HTTPAdapter
import Testing
import TestSupport

/// How the `http` adapter reads bodies: items keep the API's bytes, and hostile bodies are
/// refused with the URL and the reason (issue 23, item 3).
@Suite struct HTTPJSONBodyTests {
    static func source(_ upstream: LoopbackUpstream, _ options: [String: JSONValue]) throws -> HTTPJSONSource {
        try HTTPJSONSourceTests.source(upstream, options)
    }

    @Test func numbers_of_any_size_are_kept_exactly_as_sent_in_items_ids_and_cursors() async throws {
        let upstream = try LoopbackUpstream()
        let posts = [#"{"id":123456789012345678901234567890,"n":1e400}"#, #"{"id": "x", "n": [1.0, -0, 2.5E-3]}"#]
        let body = #"{"data":{"posts":[\#(posts.joined(separator: ", "))]},"next":123456789012345678901234567891}"#
        upstream.setResource("/posts?after=", .text(body, contentType: "application/json"))
        let source = try Self.source(upstream, ["url": "/posts?after={cursor}", "items": "data.posts", "id": "id", "next": "next"])
        guard case .page(let items, .more(let token?)) = try await source.fetch(HTTPJSONSourceTests.request(1)) else {
            Issue.record("no page with a next cursor"); return
        }
        #expect(items.map(\.id) == ["123456789012345678901234567890", "x"])
        #expect(items.map(\.dataText) == posts)
        #expect(token.contains("123456789012345678901234567891"), "the cursor as written, not a double: \(token)")
    }

    @Test func a_pretty_printed_body_gives_items_on_one_line_each() async throws {
        let upstream = try LoopbackUpstream()
        upstream.setResource("/posts?page=1", .text("[\n  {\n    \"id\": \"a\",\n    \"tags\": [\"x\",\r\n \"y\"]\n  }\n]\n", contentType: "application/json"))
        let source = try Self.source(upstream, ["url": "/posts?page={page}", "id": "id"])
        guard case .page(let items, _) = try await source.fetch(HTTPJSONSourceTests.request(1)) else { Issue.record("no page"); return }
        #expect(items.map(\.dataText) == [#"{"id":"a","tags":["x","y"]}"#])
    }

    static let hostile: [(name: String, body: [UInt8], reason: String)] = [
        ("two members named alike", Array(#"[{"id":"a","id":"b"}]"#.utf8), "two members of the same name"),
        ("the same name spelt with an escape", Array(#"[{"id":"a","\u0069d":"b"}]"#.utf8), "two members of the same name"),
        ("600 nested arrays", Array((String(repeating: "[", count: 600) + String(repeating: "]", count: 600)).utf8), "too deeply"),
        ("invalid UTF-8", Array(#"[{"id":"a"#.utf8) + [0xC3, 0x28] + Array(#""}]"#.utf8), "UTF-8"),
        ("a lone surrogate", Array(#"[{"id":"\ud800"}]"#.utf8), "escape"),
        ("an array of two that is not one", Array(#"[{"id":"a"},"id":{"x":1}]"#.utf8), "out of place"),
        ("two texts", Array(#"[] []"#.utf8), "more follows"),
    ]

    @Test(arguments: hostile.indices)
    func a_hostile_body_is_rejected_with_the_url_and_what_is_wrong(_ index: Int) async throws {
        let (name, body, reason) = Self.hostile[index]
        let upstream = try LoopbackUpstream()
        upstream.setResource("/posts?page=1", LoopbackUpstream.Resource(body: body, contentType: "application/json"))
        let source = try Self.source(upstream, ["url": "/posts?page={page}", "id": "id"])
        let error = await #expect(throws: SourceError.self, "\(name)") { try await source.fetch(HTTPJSONSourceTests.request(1)) }
        #expect(error?.kind == .rejected, "\(name)")
        #expect(error?.message.hasPrefix("the body from \(upstream.baseURL)/posts?page=1 is not valid JSON (") == true, "\(name): \(String(describing: error))")
        #expect(error?.message.contains(reason) == true, "\(name): \(String(describing: error))")
    }

    @Test func a_huge_string_is_read_like_any_other() async throws {
        let upstream = try LoopbackUpstream()
        let text = String(repeating: "é\\\"x", count: 2_000_000)
        upstream.setResource("/posts?page=1", .text(#"[{"id":"big","text":"\#(text)"}]"#, contentType: "application/json"))
        let source = try Self.source(upstream, ["url": "/posts?page={page}", "id": "id"])
        guard case .page(let items, _) = try await source.fetch(HTTPJSONSourceTests.request(1)) else { Issue.record("no page"); return }
        #expect(items.map(\.id) == ["big"])
        #expect(items.first?.data["text"]?.stringValue?.utf8.count == 2_000_000 * 4)
    }
}
