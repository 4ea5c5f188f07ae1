import FeedEngine
import FeedKit
import Testing

@testable import FeedHTTP

/// What a request's path and parameters say (SPEC §11), before anything reaches the engine.
@Suite struct RequestTests {
    @Test func paths_name_their_routes() {
        #expect(HTTPRoute(path: "/") == .scrollPage)
        #expect(HTTPRoute(path: "/healthz") == .health)
        #expect(HTTPRoute(path: "/metrics") == .metrics)
        #expect(HTTPRoute(path: "/v1/feeds") == .feeds)
        #expect(HTTPRoute(path: "/v1/feeds/users") == .feed("users"))
        #expect(HTTPRoute(path: "/v1/feeds/users/pages") == .pages("users"))
        #expect(HTTPRoute(path: "/v1/feeds/users/events") == .events("users"))
        #expect(HTTPRoute(path: "/v1/feeds/users/ack") == .acknowledge("users"))
        #expect(HTTPRoute(path: "/v1/feeds/users/refresh") == .refresh("users"))
    }

    @Test func anything_else_names_nothing_or_no_feed() {
        for path in ["", "/v1", "/v1/feed", "/v1/feeds/users/pages/2", "/v1/feeds/users/other", "/index.html", "//v1/feeds"] {
            #expect(HTTPRoute(path: path) == nil, "\(path)")
        }
        #expect(HTTPRoute(path: "/v1/feeds/Users") == .badFeedName("Users"))
        #expect(HTTPRoute(path: "/v1/feeds/../etc") == .badFeedName(".."))
        #expect(HTTPRoute(path: "/v1/feeds/a b/pages") == .badFeedName("a b"))
    }

    @Test func each_route_takes_its_methods() {
        #expect(HTTPRoute.refresh("f").methods == ["POST", "OPTIONS"])
        #expect(HTTPRoute.acknowledge("f").methods == ["POST", "OPTIONS"])
        #expect(HTTPRoute.events("f").methods == ["GET", "OPTIONS"])
        #expect(HTTPRoute.pages("f").methods == ["GET", "HEAD", "OPTIONS"])
    }

    @Test func page_parameters_default_and_are_bounded() throws {
        let none: [String: String] = [:]
        #expect(try RequestParameters.pages { none[$0] } == .init(after: nil, count: 1, consumer: nil))
        let all = ["after": "7", "count": "100", "consumer": "app.v2_x-1"]
        #expect(try RequestParameters.pages { all[$0] } == .init(after: 7, count: 100, consumer: "app.v2_x-1"))
        for bad in [["count": "101"], ["count": "0"], ["count": ""], ["after": "-1"], ["after": "+3"], ["after": "1e3"], ["after": "99999999999999"],
                    ["after": String(FeedAccess.maximumPage + 1)], ["consumer": ""], ["consumer": ".x"], ["consumer": "a/b"]]
        {
            #expect(throws: HTTPError.self, "\(bad)") { try RequestParameters.pages { bad[$0] } }
        }
    }

    @Test func an_acknowledgement_needs_a_consumer_and_a_page() throws {
        #expect(try RequestParameters.acknowledgement(Array(#"{"consumer":"c1","page":3}"#.utf8)) == ("c1", 3))
        for bad in [#"{"page":3}"#, #"{"consumer":"c1"}"#, #"{"consumer":"c1","page":"3"}"#, #"{"consumer":"c1","page":3.5}"#,
                    #"{"consumer":"c1","page":-1}"#, #"{"consumer":7,"page":1}"#, "[]", "", "{"]
        {
            #expect(throws: HTTPError.self, "\(bad)") { try RequestParameters.acknowledgement(Array(bad.utf8)) }
        }
    }
}

extension RequestParameters.Pages: CustomTestStringConvertible {
    public var testDescription: String { "after \(after.map(String.init) ?? "-") count \(count) consumer \(consumer ?? "-")" }
}
