import FeedKit
import Testing

/// RFC 8288 `Link` fields, as APIs send them and as they may be written.
@Suite struct LinkHeaderTests {
    @Test(arguments: [
        (#"<https://api.example.com/items?page=2>; rel="next""#, "https://api.example.com/items?page=2"),
        (#"</items?page=2>; rel=next, </items?page=9>; rel=last"#, "/items?page=2"),
        (#"</first>; rel="first", </prev>; rel="prev", </next>; rel="next""#, "/next"),
        (#"</n>; rel="prefetch NEXT""#, "/n"),
        (#"</a>; title="a, b; rel=next"; rel="last", </b>; rel="next""#, "/b"),
        (#"</a>;rel=next;title="x""#, "/a"),
        (#"< /spaced >  ;  rel = "next""#, "/spaced"),
        (#"</esc>; title="a \"quoted\", b"; rel=next"#, "/esc"),
        (#"</a>; rel="last"; rel="next", </b>; rel="next""#, "/b"),
        (#"</bad>; rel="next, </good>; rel=next"#, nil),
        (#"garbage, </good>; rel=next"#, "/good"),
        (#"</a>; ; rel=next;"#, "/a"),
        (#"</semi;colon,comma>; rel=next"#, "/semi;colon,comma"),
    ] as [(String, String?)])
    func the_next_target_is_read_by_the_grammar(_ field: String, _ next: String?) {
        #expect(LinkHeader(field).target(relation: "next") == next, "\(field)")
    }

    @Test func parameters_are_kept_in_order_with_lowercased_names() {
        let links = LinkHeader(#"</x>; Rel="next"; TITLE="A \"b\"", </y>; hreflang=de; anchor"#).links
        #expect(links == [
            .init(target: "/x", parameters: [.init(name: "rel", value: "next"), .init(name: "title", value: #"A "b""#)]),
            .init(target: "/y", parameters: [.init(name: "hreflang", value: "de"), .init(name: "anchor", value: nil)]),
        ])
    }
}

/// Dot paths into JSON (the `http` adapter's `items`, `id` and `next`).
@Suite struct DotPathTests {
    static let body: JSONValue = ["data": ["posts": [["id": 7], ["id": "b"]], "0": "member named 0"], "list": [[1, 2], [3]]]

    @Test(arguments: [
        ("", body), ("data.posts.1.id", "b"), ("data.posts.0.id", 7), ("data.0", "member named 0"), ("list.1.0", 3),
        ("data.posts.2", nil), ("data.posts.-1", nil), ("data.posts.01x", nil), ("list.0.0.0", nil), ("missing", nil),
    ] as [(String, JSONValue?)])
    func a_path_finds_members_and_array_elements(_ path: String, _ found: JSONValue?) throws {
        #expect(try #require(DotPath(path)).value(in: Self.body) == found)
    }

    @Test(arguments: ["a..b", ".a", "a.", "."])
    func a_path_with_an_empty_component_is_refused(_ path: String) {
        #expect(DotPath(path) == nil)
    }
}
