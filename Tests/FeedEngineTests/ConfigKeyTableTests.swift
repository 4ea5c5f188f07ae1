import FeedKit
import FileAdapter
import Foundation
import Testing

@testable import FeedEngine

/// One table of keys (issue 28): what it documents is what the loader reads, and every mistake
/// in a table is found in one pass.
@Suite struct ConfigKeyTableTests {
    let loader = ConfigurationLoader(registry: AdapterRegistry([FileSource.self]), logger: Logger(sink: NoLog()), transport: CurlTransport())

    func load(_ text: String) throws(ConfigError) -> Configuration {
        try loader.load(text: text, named: "test.toml", dropInDirectory: nil)
    }

    func messages(_ text: String) -> [String] {
        do {
            _ = try load(text)
            return []
        } catch {
            return error.problems.map(\.message)
        }
    }

    static let fileFeed = "[feeds.a]\nsource = \"file\"\npath = \"/a\"\n"

    @Test func every_documented_default_of_the_daemon_table_is_its_default() throws {
        for key in DaemonTable.keys.map(\.declaration) {
            guard case .value(let text) = key.defaultValue else { continue }
            #expect(try load("[daemon]\n\(key.name) = \(text)\n").daemon == DaemonSettings(), "daemon.\(key.name) = \(text)")
        }
    }

    @Test func every_documented_default_of_a_feed_table_is_its_default() throws {
        let plain = try load(Self.fileFeed).feeds[0].settings
        for key in FeedTable.keys.map(\.declaration) {
            guard case .value(let text) = key.defaultValue else { continue }
            #expect(try load(Self.fileFeed + "\(key.name) = \(text)\n").feeds[0].settings == plain, "\(key.name) = \(text)")
        }
    }

    /// Each declared key, written with its example or default, is a key the loader knows.
    @Test func every_declared_key_is_read_by_the_loader() {
        let reference = ConfigReference(registry: AdapterRegistry([FileSource.self]))
        for section in reference.sections {
            let table = ["daemon", "cluster", "http"].contains(section.name) ? "[\(section.name)]\n" : Self.fileFeed
            for key in section.keys {
                let text: String
                switch key.defaultValue {
                case .required(let example), .value(let example): text = example
                case .unset, .described: text = key.type == .boolean ? "true" : key.type == .integer ? "3" : key.type == .duration ? "\"5s\"" : "\"x\""
                }
                let found = messages(table + "\(key.name) = \(text)\n")
                #expect(!found.contains { $0.contains("unknown key") }, "\(section.heading) \(key.name): \(found)")
            }
        }
    }

    @Test func an_unknown_key_or_table_is_said_with_the_closest_name() {
        #expect(messages("[daemon]\nprefech = 3\n") == ["daemon.prefech: unknown key; did you mean \"prefetch\"?"])
        #expect(messages("[daemon]\ncolour = 3\n") == ["daemon.colour: unknown key"])
        #expect(messages(Self.fileFeed + "page-size = 3\n") == ["feeds.a.page-size: unknown key for source \"file\"; did you mean \"page_size\"?"])
        #expect(messages(Self.fileFeed + "cache_byte = \"1MiB\"\n") == ["feeds.a.cache_byte: unknown key for source \"file\"; did you mean \"cache_bytes\"?"])
        #expect(messages("[feed.a]\nsource = \"file\"\n") == ["feed: unknown table (expected [daemon], [cluster], [http] or [feeds.NAME]); did you mean \"feeds\"?"])
        #expect(messages("[daemon]\nlog_level = \"warn\"\n") == [
            "daemon.log_level: \"warn\" is not a log level (debug, info, notice, warning, error); did you mean \"warning\"?"
        ])
    }

    /// Before, the first wrong common key kept the adapter's keys from being looked at, and the
    /// adapter's first refusal hid the rest.
    @Test func every_mistake_of_one_feed_is_found_in_one_pass() {
        #expect(messages("[feeds.a]\nsource = \"file\"\npath = \"a\"\npage_size = 0\nfollow = \"yes\"\ntimeout = \"soon\"\nwrap = 1\n") == [
            "feeds.a.path: must be an absolute path, got \"a\"",
            "feeds.a.page_size: must be from 1 to 1000000, got 0",
            "feeds.a.follow: expected a boolean, got a string",
            "feeds.a.timeout: \"soon\" is not a duration (write e.g. \"250ms\", \"10s\", \"5m\", \"1h\")",
            "feeds.a.wrap: expected a boolean, got an integer",
        ])
    }

    /// A required key that is missing is said once, and the keys after it are still checked.
    @Test func a_missing_required_key_does_not_hide_the_others() {
        #expect(messages("[feeds.a]\nsource = \"file\"\npage_size = 0\nfolow = true\n") == [
            "feeds.a.path: is required",
            "feeds.a.page_size: must be from 1 to 1000000, got 0",
            "feeds.a.folow: unknown key for source \"file\"; did you mean \"follow\"?",
        ])
    }

    @Test func a_missing_file_and_an_unwritable_metrics_file_are_warnings() throws {
        let configuration = try load("""
            [daemon]
            metrics_file = "/nonexistent-dir/feedd.prom"
            state_dir = "/nonexistent-state"
            [feeds.a]
            source = "file"
            path = "/nonexistent-file"
            [feeds.b]
            source = "file"
            path = "/etc/passwd"
            """)
        #expect(configuration.warnings.map(\.description) == [
            "test.toml:2:1: daemon.metrics_file: the directory /nonexistent-dir does not exist, so /nonexistent-dir/feedd.prom cannot be written",
            "test.toml:6:1: feeds.a.path: /nonexistent-file does not exist (yet)",
        ])
    }

    @Test func a_value_on_a_command_line_is_read_as_toml_else_as_a_string() {
        #expect(JSONValue(tomlValue: "30") == 30)
        #expect(JSONValue(tomlValue: "true") == true)
        #expect(JSONValue(tomlValue: "[\"a\", 2]") == ["a", 2])
        #expect(JSONValue(tomlValue: "\"/srv/docs\"") == "/srv/docs")
        #expect(JSONValue(tomlValue: "/srv/docs") == nil)
    }
}
