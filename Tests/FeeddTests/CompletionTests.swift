import FeedKit
import Foundation
import Testing
import TestSupport

/// The bash completion for feedctl (SPEC §10): its commands, and feed names from a running daemon.
@Suite struct CompletionTests {
    static let script = URL(fileURLWithPath: #filePath).deletingLastPathComponent()
        .appendingPathComponent("../../completions/feedctl.bash").standardized.path

    /// What bash offers for the last of `words` (the word being completed, possibly empty).
    func completions(_ words: [String]) throws -> [String] {
        let quoted = words.map { "'\($0)'" }.joined(separator: " ")
        let program = "source '\(Self.script)'; COMP_WORDS=(\(quoted)); COMP_CWORD=\(words.count - 1); _feedctl; printf '%s\\n' \"${COMPREPLY[@]}\""
        let result = try ChildProcess.run("/bin/bash", ["-c", program], environment: ["PATH": "\(FeeddBinaries.directory):/usr/bin:/bin"])
        #expect(result.status == 0, "\(result.errors)")
        return result.output.split(separator: "\n").map(String.init)
    }

    @Test func the_first_word_completes_to_commands() throws {
        #expect(try completions(["feedctl", ""]).contains("metrics"))
        #expect(try completions(["feedctl", "st"]) == ["status"])
    }

    @Test func a_feed_argument_completes_to_the_running_daemons_feeds() throws {
        let daemon = try ProtocolTests.numbersFeed()
        #expect(try completions(["feedctl", "--socket", daemon.socketPath, "next", ""]) == ["numbers"])
        #expect(try completions(["feedctl", "--socket", daemon.socketPath, "refresh", "nu"]) == ["numbers"])
        #expect(try completions(["feedctl", "--socket", daemon.socketPath, "next", "numbers", ""]).isEmpty, "only one feed argument")
    }

    @Test func without_a_daemon_no_feed_is_offered_and_nothing_is_printed() throws {
        let directory = try TemporaryDirectory()
        #expect(try completions(["feedctl", "--socket", directory.path("none.sock"), "follow", ""]).isEmpty)
    }

    /// What `feedctl help --json` says feedctl takes.
    func commandTable() throws -> (commands: [String: [String]], common: [String]) {
        let result = try ChildProcess.run(FeeddBinaries.feedctl, ["help", "--json"])
        let table = try JSONValue(parsing: Array(result.output.utf8))
        var commands: [String: [String]] = [:]
        for command in table["commands"]?.arrayValue ?? [] {
            commands[command["name"]!.stringValue!] = (command["options"]?.arrayValue ?? []).compactMap { $0["name"]?.stringValue }
        }
        return (commands, (table["options"]?.arrayValue ?? []).compactMap { $0["name"]?.stringValue })
    }

    /// Issue 28: every command and option feedctl has is offered, so a new one cannot be forgotten here.
    @Test func every_command_and_option_of_feedctl_is_offered() throws {
        let (commands, common) = try commandTable()
        #expect(commands.keys.contains("lag") && commands.keys.contains("ack"))
        let first = try completions(["feedctl", ""])
        for name in commands.keys { #expect(first.contains(name), "\(name)") }
        #expect(try completions(["feedctl", "--"]).sorted() == common.sorted())
        for (name, options) in commands {
            #expect(try completions(["feedctl", name, "--"]).sorted() == (common + options).sorted(), "\(name)")
        }
    }

    @Test func ack_and_forget_complete_a_feed_then_its_consumers() throws {
        let fake = try FakeDaemon(feeds: ["news", "users"]) { request in
            guard request["op"] == "consumers" else { return [] }
            let consumers: [JSONValue] = request["feed"] == "users" ? [["name": "batch", "after": 1], ["name": "mobile", "after": 2]] : []
            return [["type": "consumers", "feed": request["feed"]!, "consumers": .array(consumers), "next": nil]]
        }
        #expect(try completions(["feedctl", "--socket", fake.socketPath, "ack", "u"]) == ["users"])
        #expect(try completions(["feedctl", "--socket", fake.socketPath, "ack", "users", ""]) == ["batch", "mobile"])
        #expect(try completions(["feedctl", "--socket", fake.socketPath, "forget", "users", "m"]) == ["mobile"])
        #expect(try completions(["feedctl", "--socket", fake.socketPath, "ack", "users", "batch", ""]).isEmpty, "PAGE is a number")
        #expect(try completions(["feedctl", "help", "fo"]).sorted() == ["follow", "forget"])
    }
}
