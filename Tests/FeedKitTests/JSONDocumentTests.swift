import FeedKit
import Testing

/// JSONDocument: simdjson's checks, values read in place, numbers kept as written.
@Suite struct JSONDocumentTests {
    static func document(_ text: String) throws -> JSONDocument { try JSONDocument(parsing: Array(text.utf8)) }

    static func raw(_ element: JSONElement?) -> String? { element.map { String(decoding: $0.raw.bytes, as: UTF8.self) } }

    @Test func values_are_found_by_name_and_path_and_keep_their_bytes() throws {
        let body = try Self.document(#"{"results": [ {"login": {"uuid": "u-1"}, "n": 1.50 }, {"login":{"uuid":"u-2"}} ], "info": {"page": 3}}"#)
        let users = try #require(body.root["results"]?.elements)
        #expect(users.count == 2)
        #expect(users.map { $0.value(at: DotPath("login.uuid")!)?.stringValue } == ["u-1", "u-2"])
        #expect(Self.raw(users.first(where: { _ in true })) == #"{"login": {"uuid": "u-1"}, "n": 1.50 }"#)
        #expect(body.root.value(at: DotPath("results.1.login")!).map(Self.raw) == #"{"uuid":"u-2"}"#)
        #expect(body.root.value(at: DotPath("info.page")!)?.integerValue == 3)
        #expect(body.root.value(at: DotPath("results.2")!) == nil)
        #expect(body.root.value(at: DotPath("info.page.x")!) == nil)
        #expect(body.root["missing"] == nil)
    }

    @Test func escaped_strings_and_names_are_read_as_their_values() throws {
        let body = try Self.document(#"{"na\"me": "O\"Brien\\1", "caf\u00e9": "\ud83d\ude00 ok", "plain": "Zoë"}"#)
        #expect(body.root[#"na"me"#]?.stringValue == #"O"Brien\1"#)
        #expect(body.root["café"]?.stringValue == "😀 ok")
        #expect(body.root["plain"]?.stringValue == "Zoë")
        #expect(body.root.members?.map(\.key) == [#"na"me"#, "café", "plain"])
    }

    @Test func numbers_of_any_size_are_kept_exactly_as_written() throws {
        let body = try Self.document(#"[123456789012345678901234567890, 1e400, -1E-400, 17, -0.5e3, 9223372036854775808]"#)
        let numbers = try #require(body.root.elements).map { $0 }
        #expect(numbers.map { $0.numberText } == ["123456789012345678901234567890", "1e400", "-1E-400", "17", "-0.5e3", "9223372036854775808"])
        #expect(numbers.map(\.isInteger) == [true, false, false, true, false, true])
        #expect(numbers.map(\.integerValue) == [nil, nil, nil, 17, nil, nil])
        #expect(Self.raw(body.root) == #"[123456789012345678901234567890, 1e400, -1E-400, 17, -0.5e3, 9223372036854775808]"#)
    }

    @Test(arguments: [
        ("", "holds no value"), ("   ", "holds no value"), ("{", "missing"), (#"{"a" 1}"#, "missing"), ("[1,]", "out of place"),
        ("[1 2]", "out of place"), (#"{"a":1,"a":2}"#, "two members of the same name"), (#"{"a":1,"\u0061":2}"#, "two members of the same name"),
        ("[tru]", "not a string"), ("[nul]", "not a string"), ("falseU", "not a string"), ("nullx", ""), ("[truex]", ""), ("[nulll]", ""), ("[01]", "number"), ("[1.]", "number"), ("[-]", "number"), ("[1e4x]", "number"),
        (#"["\ud800"]"#, "escape"), (#"["\x"]"#, "escape"), ("[\"a\u{01}\"]", "control character"), (#"["abc"#, "not closed"),
        ("[1] 2", "out of place"), (#"{"a":1}}"#, "more follows"),
        // On-Demand alone took this one (found by fuzzing) for an array of two values.
        (#"{"r":[{"a":1},"name":{"b":2}],"x":1}"#, "out of place"), (#"{"a":1,}"#, "out of place"), ("[,1]", "out of place"),
        (#"{,"a":1}"#, "out of place"), (#"{"a":1,,"b":2}"#, "out of place"), (#"[1,,2]"#, "out of place"), (#"{"a":}"#, ""), ("1 2", "more follows"), ("1e400 x", "more follows"), (#""a" "b""#, "more follows"),
        (String(repeating: "[", count: 513) + String(repeating: "]", count: 513), "too deeply"),
    ])
    func anything_but_one_json_text_is_refused_with_a_reason(_ text: String, _ reason: String) {
        let error = #expect(throws: JSONParseError.self) { try Self.document(text) }
        #expect(reason.isEmpty || error?.description.contains(reason) == true, "\(text): \(String(describing: error))")
        #expect(error?.description.contains("at byte") == true)
    }

    @Test func invalid_utf8_is_refused() {
        let error = #expect(throws: JSONParseError.self) { try JSONDocument(parsing: Array(#"["a"#.utf8) + [0xFF] + Array(#""]"#.utf8)) }
        #expect(error?.description.contains("UTF-8") == true)
    }

    @Test func nesting_up_to_the_limit_is_read() throws {
        let depth = JSONDocument.maximumDepth
        let body = try Self.document(String(repeating: "[", count: depth) + String(repeating: "]", count: depth))
        #expect(body.root.count == 1)
    }

    @Test func objects_with_many_members_are_checked_for_repeated_names() throws {
        let members = (0..<100).map { #""k\#($0)":\#($0)"# }
        let body = try Self.document("{" + members.joined(separator: ",") + "}")
        #expect(body.root["k99"]?.integerValue == 99)
        #expect(throws: JSONParseError.self) { try Self.document("{" + (members + [#""k7":0"#]).joined(separator: ",") + "}") }
    }

    @Test func a_value_spanning_lines_is_compacted_onto_one() throws {
        let body = try Self.document("{\"items\": [\n  {\n    \"id\": \"a b\",\n    \"n\": [1,\r\n 2]\n  }\n]}")
        let item = try #require(body.root["items"]?.elements?.first(where: { _ in true }))
        #expect(Self.raw(item) == #"{"id":"a b","n":[1,2]}"#)
    }

    @Test func scalars_at_the_root_are_read() throws {
        #expect(try Self.document(" \"x\" ").root.stringValue == "x")
        #expect(try Self.document("true").root.boolValue == true)
        #expect(try Self.document("false\r\r\r").root.boolValue == false)
        #expect(try Self.document("null").root.isNull)
        #expect(try Self.document("1e400").root.numberText == "1e400")
        #expect(try Self.document("[]").root.count == 0)
        #expect(Self.raw(try Self.document(" { } ").root) == "{ }")
    }

    @Test func a_text_checked_without_an_index_is_held_to_the_same_rules() {
        #expect(RawJSON(validating: Array(#"{"n":123456789012345678901234567890,"x":1e400}"#.utf8)) != nil)
        #expect(RawJSON(validating: Array(#"{"a":{"b":1,"c":[{"d":1,"d":2}]}}"#.utf8)) == nil, "a repeated name, however deep")
        #expect(RawJSON(validating: Array((String(repeating: "[", count: 513) + String(repeating: "]", count: 513)).utf8)) == nil)
        #expect(RawJSON(validating: Array((String(repeating: "[", count: 512) + String(repeating: "]", count: 512)).utf8)) != nil)
        #expect(RawJSON(validating: Array("[1,\r\n2]".utf8)) == nil, "a line break")
    }

    @Test func a_text_checked_without_an_index_refuses_every_repeated_name_and_only_those() {
        let many = (0..<40).map { #""k\#($0)":\#($0)"# }
        #expect(RawJSON(validating: Array(("{" + many.joined(separator: ",") + "}").utf8)) != nil)
        #expect(RawJSON(validating: Array(("{" + (many + [#""k39":0"#]).joined(separator: ",") + "}").utf8)) == nil, "among many members")
        #expect(RawJSON(validating: Array(#"{"name":1,"tags":2,"nam":3,"ame":4,"names":5}"#.utf8)) != nil, "names alike in length or bytes")
        #expect(RawJSON(validating: Array(#"{"a":1,"b":[{"a":1},{"a":2,"b":3}],"c":{"a":{"a":3}}}"#.utf8)) != nil, "one name in several objects")
        #expect(RawJSON(validating: Array(#"{"a":1,"b":{"x":[1,2],"y":{"z":{}}},"\u0061":2}"#.utf8)) == nil, "a repeat after a nested object")
        #expect(RawJSON(validating: Array(#"[1,{"x":1,"y":[{"z":1,"z":2}]}]"#.utf8)) == nil, "a repeat inside an array")
        #expect(RawJSON(validating: Array(#"{"":1,"":2}"#.utf8)) == nil, "two empty names")
    }

    /// The walks tell most names apart by their length and last byte alone; names alike in both
    /// are compared in full, and an object grown past that first glance's reach keeps its names
    /// in a set. Each path is tried with and without an index.
    @Test func names_alike_in_length_and_last_byte_are_told_apart_and_their_repeats_found() throws {
        func accepted(_ members: [String]) -> (indexed: Bool, checked: Bool) {
            let text = "{" + members.joined(separator: ",") + "}"
            return ((try? Self.document(text)) != nil, RawJSON(validating: Array(text.utf8)) != nil)
        }
        let alike = (UInt8(ascii: "a")...UInt8(ascii: "t")).map { #""\#(Character(UnicodeScalar($0)))z":1"# }
        #expect(accepted(alike) == (true, true))
        #expect(accepted(alike + [#""cz":2"#]) == (false, false))
        #expect(accepted(alike + [#""tz":2"#]) == (false, false), "the last of them, spelt with an escape")
        for count in 22...28 {
            let members = (0..<count).map { #""k\#($0)":\#($0)"# }
            #expect(accepted(members) == (true, true), "\(count) members")
            #expect(accepted(members + [#""k0":0"#]) == (false, false), "the first repeated after \(count)")
            #expect(accepted(members + [#""k\#(count - 1)":0"#]) == (false, false), "the last repeated after \(count)")
        }
    }

    @Test func a_text_checked_without_an_index_counts_objects_and_arrays_alike_in_its_depth() {
        let half = JSONDocument.maximumDepth / 2
        let (open, close) = (String(repeating: #"{"a":["#, count: half), String(repeating: "]}", count: half))
        #expect(RawJSON(validating: Array((open + "1" + close).utf8)) != nil)
        #expect(RawJSON(validating: Array((open + "{}" + close).utf8)) == nil)
        #expect(RawJSON(validating: Array((open + "[]" + close).utf8)) == nil)
    }

    @Test func the_tree_holds_the_same_values() throws {
        let text = #"{"a":true,"b":1,"c":1.5,"d":"x\n","e":null,"f":[1,false,{}],"g":-7}"#
        #expect(try Self.document(text).root.value == (try JSONValue(parsing: text)))
    }

    @Test func a_hash_of_an_item_does_not_depend_on_spacing_member_order_or_escapes() throws {
        let spaced = try Self.document(#"{ "b" : [1, 2.50, "\u00e9"], "a": {"y": null, "x": true} }"#).root
        let compact = try Self.document(#"{"a":{"x":true,"y":null},"b":[1,2.5,"é"]}"#).root
        #expect(Item(hashing: spaced).id == Item(hashing: compact).id)
        #expect(Item(hashing: compact).id == Item(hashing: JSONValue.object(["a": ["x": true, "y": nil], "b": [1, 2.5, "é"]])).id)
        let big = try Self.document("[123456789012345678901234567890]").root
        let bigger = try Self.document("[123456789012345678901234567891]").root
        #expect(Item(hashing: big).id != Item(hashing: bigger).id, "numbers beyond a double's precision keep their own text")
    }
}
