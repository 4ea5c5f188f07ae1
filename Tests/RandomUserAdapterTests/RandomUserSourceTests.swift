import FeedKit
import RandomUserAdapter
import Testing
import TestSupport

@Suite struct RandomUserSourceTests {
    func adapter(_ upstream: LoopbackUpstream, path: String = "/api/", seed: String? = nil) throws -> RandomUserSource {
        var values: [String: JSONValue] = ["url": .string(upstream.baseURL + path), "results": 4]
        if let seed { values["seed"] = .string(seed) }
        return try RandomUserSource(options: AdapterOptions(feed: "users", values: values), context: AdapterConformance.context())
    }

    @Test func conforms() async throws {
        let upstream = try LoopbackUpstream()
        try await AdapterConformance.check(try adapter(upstream), pages: .endless(checking: 3), failing: try adapter(upstream, path: "/missing"))
    }

    @Test func a_fixed_seed_pages_the_same_users_every_generation() async throws {
        let upstream = try LoopbackUpstream()
        let source = try adapter(upstream, seed: "fixed")
        let first = try await source.fetch(PageRequest(page: 1, token: nil, generation: 1, seed: "test"))
        let later = try await source.fetch(PageRequest(page: 1, token: nil, generation: 7, seed: "test"))
        #expect(first == later)
    }

    @Test func users_keep_the_upstream_bytes_numbers_of_any_size_included() async throws {
        let upstream = try LoopbackUpstream()
        let user = #"{"login":{"uuid":"u-1"},"id":123456789012345678901234567890,"score":1e400,"name":"Zo\u00eb"}"#
        upstream.setResource("/api/?results=4&page=1&seed=s", .text(#"{"results":[\#(user)],"info":{"page":1}}"#, contentType: "application/json"))
        let result = try await adapter(upstream, seed: "s").fetch(PageRequest(page: 1, token: nil, generation: 1, seed: "test"))
        guard case .page(let items, _) = result else { Issue.record("no page: \(result)"); return }
        #expect(items.map(\.id) == ["u-1"])
        #expect(items.map(\.dataText) == [user])
    }

    @Test func the_url_keeps_its_own_query_and_the_seed_arrives_as_given() async throws {
        let upstream = try LoopbackUpstream()
        _ = try await adapter(upstream, path: "/api/?nat=ch", seed: "a b&c=d/é").fetch(PageRequest(page: 7, token: nil, generation: 1, seed: "x"))
        let query = try #require(upstream.received.first?.query)
        #expect(query == ["nat": "ch", "results": "4", "page": "7", "seed": "a b&c=d/é"])
    }

    @Test func options_are_validated() {
        #expect(throws: OptionError.self) {
            try RandomUserSource(options: AdapterOptions(feed: "u", values: ["url": "ftp://x"]), context: AdapterConformance.context())
        }
        #expect(throws: OptionError.self) {
            try RandomUserSource(options: AdapterOptions(feed: "u", values: ["results": 0]), context: AdapterConformance.context())
        }
    }
}
