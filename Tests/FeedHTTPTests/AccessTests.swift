import FeedEngine
import FeedKit
import Testing

@testable import FeedHTTP

/// Bearer tokens, CORS and entity tags.
@Suite struct AccessTests {
    let tokens = BearerTokens(["users": SecretText(Array("t0k3n".utf8)), "_metrics": SecretText(Array("m".utf8))])

    @Test func only_the_exact_bearer_token_opens_a_protected_feed() {
        #expect(tokens.verdict(for: "users", authorization: "Bearer t0k3n") == .allowed)
        #expect(tokens.verdict(for: "users", authorization: "bearer   t0k3n") == .allowed, "the scheme in any case (RFC 7235)")
        #expect(tokens.verdict(for: "users", authorization: nil) == .missing)
        #expect(tokens.verdict(for: "users", authorization: "Basic dXNlcjp0MGszbg==") == .missing)
        #expect(tokens.verdict(for: "users", authorization: "Bearer") == .missing)
        for wrong in ["Bearer t0k3", "Bearer t0k3n0", "Bearer T0K3N", "Bearer m", "Bearert0k3n"] {
            #expect(tokens.verdict(for: "users", authorization: wrong) != .allowed, "\(wrong)")
        }
    }

    @Test func a_feed_without_a_token_is_open() {
        #expect(!tokens.isProtected("other"))
        #expect(tokens.verdict(for: "other", authorization: nil) == .allowed)
        #expect(tokens.isProtected("_metrics"))
    }

    @Test func a_listed_origin_gets_cors_fields_and_others_none() {
        let policy = CrossOriginPolicy(origins: ["https://app.example.com"])
        let fields = Dictionary(uniqueKeysWithValues: policy.headers(for: "https://app.example.com").map { ($0.name, $0.value) })
        #expect(fields["Access-Control-Allow-Origin"] == "https://app.example.com" && fields["Vary"] == "Origin")
        #expect(policy.headers(for: "https://app.example.com.evil.org").isEmpty)
        #expect(policy.headers(for: "http://app.example.com").isEmpty, "another scheme is another origin")
        #expect(policy.headers(for: nil).isEmpty)
        let preflight = Dictionary(uniqueKeysWithValues: policy.preflightHeaders(for: "https://app.example.com", methods: ["POST"]).map { ($0.name, $0.value) })
        #expect(preflight["Access-Control-Allow-Methods"] == "POST" && preflight["Access-Control-Allow-Headers"]?.contains("Authorization") == true)
        let any = CrossOriginPolicy(origins: ["*"])
        #expect(any.headers(for: "https://anything.example").first?.value == "*")
    }

    @Test func an_etag_names_the_generation_and_pages_and_if_none_match_compares_weakly() {
        let tag = PageGathering.entityTag(generation: 2, after: 4, pages: [], end: true)
        #expect(tag == #""2-4-4-end""#)
        #expect(PageGathering.matches(tag, tag))
        #expect(PageGathering.matches(#""x", W/"2-4-4-end""#, tag))
        #expect(PageGathering.matches("*", tag))
        #expect(!PageGathering.matches(#""2-4-4""#, tag))
        #expect(!PageGathering.matches(nil, tag))
    }
}
