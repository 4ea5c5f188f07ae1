import FeedKit
import Testing

@Suite struct JSONValueTests {
    @Test func parses_every_json_type_and_keeps_integers_apart_from_other_numbers() throws {
        let value = try JSONValue(parsing: #"{"a":true,"b":1,"c":1.5,"d":"x","e":null,"f":[1,false],"g":-7}"#)
        #expect(value == ["a": true, "b": 1, "c": 1.5, "d": "x", "e": nil, "f": [1, false], "g": -7])
    }

    @Test func parses_top_level_scalars() throws {
        #expect(try JSONValue(parsing: "42") == 42)
        #expect(try JSONValue(parsing: #""text""#) == "text")
        #expect(try JSONValue(parsing: "true") == true)
    }

    @Test func rejects_text_that_is_not_json() {
        #expect(throws: JSONParseError.self) { try JSONValue(parsing: "{not json") }
        #expect(throws: JSONParseError.self) { try JSONValue(parsing: "") }
    }

    @Test func writes_compact_json_with_sorted_keys() {
        let value: JSONValue = ["b": [1, 2.5, nil], "a": ["z": false, "y": "s"]]
        #expect(value.jsonText == #"{"a":{"y":"s","z":false},"b":[1,2.5,null]}"#)
    }

    @Test func escapes_quotes_backslashes_and_control_characters_and_keeps_unicode() throws {
        let text = "quote \" backslash \\ newline \n tab \t bell \u{07} é 日本 🎉"
        let written = JSONValue.string(text).jsonText
        #expect(written == #""quote \" backslash \\ newline \n tab \t bell \u0007 é 日本 🎉""#)
        #expect(try JSONValue(parsing: written) == .string(text))
    }

    @Test func writes_integers_in_decimal_digits() {
        for integer in [0, 7, -1, 10, 1_000_000_007, Int64.max, Int64.min] {
            #expect(JSONValue.integer(integer).jsonText == String(integer))
        }
    }

    @Test func round_trips_numbers_exactly() throws {
        for number: JSONValue in [0, -1, 9_007_199_254_740_993, 0.1, 1e-7, 1.5e300, -2.25] {
            #expect(try JSONValue(parsing: number.jsonText) == number)
        }
    }
}

@Suite struct DurationTests {
    @Test func parses_the_config_units() {
        #expect(parseDuration("250ms") == .milliseconds(250))
        #expect(parseDuration("10s") == .seconds(10))
        #expect(parseDuration("5m") == .seconds(300))
        #expect(parseDuration("1.5h") == .seconds(5400))
    }

    @Test func rejects_anything_else() {
        for text in ["", "10", "s", "-1s", "10 s", "1d", "abc"] {
            #expect(parseDuration(text) == nil, "\(text)")
        }
    }
}

@Suite struct JSONNumberPrecisionTests {
    @Test func non_integral_numbers_are_read_exactly() throws {
        // JSONSerialization alone reads this as 2.2222222222200037e+120 (found by the fuzzer).
        let text = "2.2222222222200023e+120"
        #expect(try JSONValue(parsing: text) == .double(Double(text)!))
        #expect(try JSONValue(parsing: "[0.1, {\"x\": 1e-7}]") == [0.1, ["x": 1e-7]])
    }

    @Test func what_the_writer_writes_reads_back_as_the_same_text_up_to_int64s_edge() throws {
        // 9.222222222222222e18 is integral and below Int64.max; the fuzzer found it written with an
        // exponent that read back as an integer and wrote other digits.
        for number in [9.222222222222222e18, -9.222222222222222e18, 0x1p63, -0x1p63, 0x1p63.nextDown, 1e19] {
            let written = JSONValue.double(number).jsonText
            #expect(try JSONValue(parsing: written).jsonText == written, "\(number) written as \(written)")
        }
    }

    @Test func integers_beyond_int64_become_the_nearest_double() throws {
        #expect(try JSONValue(parsing: "18446744073709551616") == .double(18446744073709551616.0))
    }
}
