import FeedKit
import Foundation
import FileAdapter
import Testing

@testable import FeedEngine

@Suite struct ConfigurationLoaderTests {
    let loader = ConfigurationLoader(registry: AdapterRegistry([FileSource.self]), logger: Logger(sink: NoLog()), transport: CurlTransport())

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
            #expect(messages.contains("extra: unknown table (expected [daemon], [cluster], [http] or [feeds.NAME])"))
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

/// Issue 14: a config can neither open the socket by mistake nor be read half-way silently.
@Suite struct HostileConfigurationTests {
    let loader = ConfigurationLoader(registry: AdapterRegistry([FileSource.self]), logger: Logger(sink: NoLog()), transport: CurlTransport())

    func problems(_ text: String) -> [ConfigProblem] {
        do {
            _ = try loader.load(text: text, named: "test.toml", dropInDirectory: nil)
            return []
        } catch {
            return error.problems
        }
    }

    @Test func allow_lists_take_names_or_ids_resolved_at_load() throws {
        let configuration = try loader.load(
            text: "[daemon]\nallow_uids = [1000, \"root\", \"daemon\"]\nallow_groups = [\"root\", 4]\n", named: "test.toml", dropInDirectory: nil)
        #expect(configuration.daemon.allowUIDs == [1000, 0, 1])
        #expect(configuration.daemon.allowGIDs == [0, 4])
    }

    @Test func state_page_bytes_is_a_size_up_to_1_tib_and_its_problems_name_the_line() throws {
        #expect(DaemonSettings().statePageBytes == 16 << 20)
        let configuration = try loader.load(text: "[daemon]\nstate_page_bytes = \"256MiB\"\n", named: "test.toml", dropInDirectory: nil)
        #expect(configuration.daemon.statePageBytes == 256 << 20)
        #expect(try loader.load(text: "[daemon]\nstate_page_bytes = 0\n", named: "test.toml", dropInDirectory: nil).daemon.statePageBytes == 0)
        #expect(problems("[daemon]\nprefetch = 1\nstate_page_bytes = \"lots\"\n") == [
            ConfigProblem(
                file: "test.toml", line: 3, column: 1, message: "daemon.state_page_bytes: expected a size such as \"512KiB\", \"64MiB\" or \"1GiB\"")
        ])
        #expect(problems("[daemon]\nstate_page_bytes = \"2TiB\"\n").first?.message == "daemon.state_page_bytes: must be from 0B to 1TiB")
    }

    @Test func a_name_that_does_not_resolve_is_an_error_never_an_open_door() {
        #expect(problems("[daemon]\nallow_groups = [\"feedreaders-nowhere\"]\n") == [
            ConfigProblem(file: "test.toml", line: 2, column: 1, message: "daemon.allow_groups: no group named \"feedreaders-nowhere\" on this host")
        ])
        #expect(problems("[daemon]\nprefetch = 1\nallow_uids = [0, \"nobody-here\"]\n") == [
            ConfigProblem(file: "test.toml", line: 3, column: 1, message: "daemon.allow_uids: no user named \"nobody-here\" on this host")
        ])
        #expect(problems("[daemon]\nsocket_group = \"no-such-group\"\n").first?.message == "daemon.socket_group: no group named \"no-such-group\" on this host")
        #expect(problems("[daemon]\nallow_uids = [-1]\n").first?.message == "daemon.allow_uids: -1 is not a user id")
        #expect(problems("[daemon]\nallow_groups = [1.5]\n").first?.message.hasPrefix("daemon.allow_groups: expected an array of group ids") == true)
    }

    @Test func only_a_toml_integer_is_an_integer() {
        for value in ["2.0", "1e3", "inf", "nan", "-inf", "1979-05-27", "1979-05-27T07:32:00Z", "07:32:00", "\"3\"", "2.5"] {
            let found = problems("[daemon]\nprefetch = \(value)\n")
            #expect(found.count == 1 && found[0].message.hasPrefix("daemon.prefetch: expected an integer, got"), "\(value): \(found)")
        }
        #expect(problems("[daemon]\nprefetch = 3\nmax_clients = 1_000\n").isEmpty)
    }

    @Test func a_socket_path_longer_than_a_unix_socket_takes_is_an_error() {
        let long = "/run/" + String(repeating: "s", count: 103)
        #expect(problems("[daemon]\nsocket = \"\(long)\"\n") == [
            ConfigProblem(file: "test.toml", line: 2, column: 1, message: "daemon.socket: a Unix socket path must be 1 to 107 bytes long, this one is 108")
        ])
        #expect(problems("[daemon]\nsocket = \"\(long.dropLast())\"\n").isEmpty)
    }

    @Test func problems_come_in_file_and_line_order() throws {
        let directory = try TestDirectory()
        try directory.write("feedd.d/10-a.toml", "[daemon]\nprefetch = \"x\"\n[feeds.z]\nsource = \"nope\"\n")
        try directory.write("feedd.d/20-b.toml", "[daemon]\nmax_clients = 0\n")
        let main = try directory.write("feedd.toml", "[feeds.b]\nsource = \"file\"\nwrap = 1\n[feeds.a]\nsource = \"file\"\npath = 3\n[daemon]\nlog_level = \"loud\"\n")
        do {
            _ = try loader.load(file: main)
            Issue.record("accepted")
        } catch {
            let places = error.problems.map { "\(($0.file as NSString).lastPathComponent):\($0.line ?? 0)" }
            // feeds.b lacks its path as well as having a wrong wrap: both are said (at 1, its table).
            #expect(places == ["feedd.toml:1", "feedd.toml:3", "feedd.toml:6", "feedd.toml:8", "10-a.toml:2", "10-a.toml:4", "20-b.toml:2"], "\(error)")
        }
    }

    @Test func an_unreadable_dangling_or_looping_drop_in_is_an_error_naming_it() throws {
        let directory = try TestDirectory()
        let main = try directory.write("feedd.toml", "")
        try directory.write("feedd.d/10-real.toml", "[daemon]\nsocket_mode = \"0600\"\n")
        let dropIns = directory.path + "/feedd.d"
        symlink("/nonexistent/x.toml", dropIns + "/20-dangling.toml")
        symlink(dropIns + "/30-loop.toml", dropIns + "/30-loop.toml")
        mkdir(dropIns + "/40-dir.toml", 0o755)
        mkfifo(dropIns + "/50-fifo.toml", 0o600)
        do {
            _ = try loader.load(file: main)
            Issue.record("accepted")
        } catch {
            #expect(error.problems.map(\.description) == [
                "\(dropIns)/20-dangling.toml: cannot read: it is a symbolic link to a missing file",
                "\(dropIns)/30-loop.toml: cannot read: it is a symbolic link loop",
                "\(dropIns)/40-dir.toml: cannot read: it is a directory, not a regular file",
                "\(dropIns)/50-fifo.toml: cannot read: it is a FIFO, not a regular file",
            ])
            #expect(!error.description.contains("NSCocoaErrorDomain") && !error.description.contains("You don"))
        }
    }

    @Test func a_drop_in_directory_that_cannot_be_read_is_an_error_naming_it() throws {
        for makeBroken in [
            { (path: String) in _ = symlink("/nonexistent/feedd.d", path) },
            { (path: String) in _ = symlink(path, path) },
            { (path: String) in _ = creat(path, 0o644) },
        ] {
            let directory = try TestDirectory()
            let main = try directory.write("feedd.toml", "")
            makeBroken(directory.path + "/feedd.d")
            do {
                _ = try loader.load(file: main)
                Issue.record("accepted")
            } catch {
                #expect(error.problems.count == 1)
                #expect(error.problems.first?.file == directory.path + "/feedd.d")
                #expect(error.problems.first?.message.hasPrefix("cannot read the drop-in directory: ") == true, "\(error)")
            }
        }
    }

    @Test func a_missing_config_file_is_said_in_plain_words() {
        do {
            _ = try loader.load(file: "/nonexistent/feedd.toml")
            Issue.record("accepted")
        } catch {
            #expect(error.description == "/nonexistent/feedd.toml: cannot read: no such file")
        }
    }
}

/// A directory of its own for a test, removed afterwards.
final class TestDirectory {
    let path: String

    init() throws {
        var template = Array("/tmp/feedd-config-test-XXXXXX".utf8CString)
        path = String(cString: template.withUnsafeMutableBufferPointer { mkdtemp($0.baseAddress!)! })
    }

    deinit {
        try? FileManager.default.removeItem(atPath: path)
    }

    @discardableResult
    func write(_ name: String, _ text: String) throws -> String {
        let file = "\(path)/\(name)"
        try FileManager.default.createDirectory(atPath: (file as NSString).deletingLastPathComponent, withIntermediateDirectories: true)
        try text.write(toFile: file, atomically: false, encoding: .utf8)
        return file
    }
}

struct NoLog: LogSink {
    func write(_ level: LogLevel, _ message: String) {}
}
