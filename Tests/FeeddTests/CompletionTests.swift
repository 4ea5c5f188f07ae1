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
}
