import FeedKit
import FileAdapter
import Testing

@testable import FeedEngine

@Suite struct ConfigurationLoaderTests {
    let loader = ConfigurationLoader(registry: AdapterRegistry([FileSource.self]), logger: Logger(sink: NoLog()))

    func load(_ text: String) throws(ConfigError) -> Configuration {
        try loader.load(text: text, named: "test.toml", dropInDirectory: nil)
    }

    @Test func an_empty_config_is_all_defaults() throws {
        let configuration = try load("")
        #expect(configuration.daemon == DaemonSettings())
        #expect(configuration.daemon.prefetch == 2)
        #expect(configuration.daemon.maxClients == 10_000)
        #expect(configuration.daemon.maxLineBytes == 65_536)
        #expect(configuration.daemon.socketMode == 0o660)
        #expect(configuration.feeds.isEmpty)
    }

    @Test func feeds_read_their_common_keys_and_leave_the_rest_to_the_adapter() throws {
        let configuration = try load("""
            [daemon]
            prefetch = 4
            [feeds.b]
            source = "file"
            path = "/b"
            [feeds.a]
            source = "file"
            path = "/a"
            prefetch = 0
            wrap = true
            poll = "250ms"
            timeout = "2s"
            retry_max_delay = "1m"
            cache_pages = 7
            """)
        #expect(configuration.feeds.map(\.settings.name) == ["a", "b"])
        let a = configuration.feeds[0].settings
        #expect(a.prefetch == 0 && a.wrap && a.poll == .milliseconds(250) && a.timeout == .seconds(2))
        #expect(a.retryMaxDelay == .seconds(60) && a.cachePages == 7)
        #expect(a.options == ["path": "/a"])
        let b = configuration.feeds[1].settings
        #expect(b.prefetch == 4 && !b.wrap && b.poll == nil && b.timeout == .seconds(10) && b.retryMaxDelay == .seconds(60) && b.cachePages == 256)
    }

    @Test func problems_carry_file_line_and_column() {
        #expect(throws: ConfigError.self) { try load("[feeds.a]\nsource = \"file\"\npath = \"/a\"\nwrap = \"yes\"\n") }
        do {
            _ = try load("[feeds.a]\nsource = \"file\"\npath = \"/a\"\nwrap = \"yes\"\n")
        } catch {
            #expect(error.problems == [ConfigProblem(file: "test.toml", line: 4, column: 1, message: "feeds.a.wrap: expected a boolean, got a string")])
        }
    }

    @Test func unknown_tables_and_zero_durations_are_rejected() {
        do {
            _ = try load("[feeds.a]\nsource = \"file\"\npath = \"/a\"\npoll = \"0s\"\n[extra]\nx = 1\n")
            Issue.record("accepted")
        } catch {
            let messages = error.problems.map(\.message)
            #expect(messages.contains("feeds.a.poll: must be longer than zero"))
            #expect(messages.contains("extra: unknown table (expected [daemon], [cluster] or [feeds.NAME])"))
        }
    }

    @Test func a_carriage_return_in_a_table_header_is_a_syntax_error_not_a_crash() {
        // Found by the config fuzz target: toml++'s debug assertion aborted on it.
        do {
            _ = try load("[\r\0\0\0\0\0\0\0\0\nsource = \"nope\"\n")
            Issue.record("accepted")
        } catch {
            #expect(error.problems.first?.line == 1)
            #expect(error.problems.first?.message.contains("expected bare key starting character") == true)
        }
    }

    @Test func feed_names_follow_the_spec_pattern() {
        #expect(FeedName.isValid("users"))
        #expect(FeedName.isValid("0-a_b"))
        #expect(FeedName.isValid(String(repeating: "a", count: 64)))
        #expect(!FeedName.isValid(String(repeating: "a", count: 65)))
        #expect(!FeedName.isValid("_users"))
        #expect(!FeedName.isValid("Users"))
        #expect(!FeedName.isValid(""))
        #expect(!FeedName.isValid("a.b"))
    }
}

struct NoLog: LogSink {
    func write(_ level: LogLevel, _ message: String) {}
}
