import FeedKit
import Foundation
import HTTPAdapter
import Testing
import TestSupport

/// `bearer_token_file` must be a regular file that other users can neither read nor write; the
/// error says so, naming the key and the file, never the token (issue 23).
@Suite struct BearerTokenFileTests {
    static func configure(_ tokenFile: String) throws -> HTTPJSONSource {
        try HTTPJSONSource(
            options: AdapterOptions(feed: "api", values: ["url": "http://127.0.0.1:9/p?page={page}", "bearer_token_file": .string(tokenFile)]),
            context: AdapterConformance.context())
    }

    static func refusal(_ tokenFile: String) throws -> OptionError {
        do {
            _ = try configure(tokenFile)
        } catch let error as OptionError {
            return error
        }
        throw TestFailure("\(tokenFile) was accepted as a token file")
    }

    @Test(arguments: [0o644, 0o604, 0o602, 0o666])
    func a_token_file_other_users_can_read_or_write_is_refused_saying_why(_ mode: Int) throws {
        let directory = try TemporaryDirectory()
        let file = try directory.write("api.token", "s3cr3t\n")
        chmod(file, mode_t(mode))
        let error = try Self.refusal(file)
        #expect(error.key == "bearer_token_file")
        #expect(error.message.contains(file) && error.message.contains("by every user (mode 0\(String(mode, radix: 8)))"), "\(error)")
        #expect(error.message.contains("chmod o-rw"), "\(error)")
        #expect(!error.description.contains("s3cr3t"))
    }

    @Test func a_token_file_readable_by_its_owner_and_group_only_is_read() throws {
        let directory = try TemporaryDirectory()
        let file = try directory.write("api.token", "s3cr3t\n")
        chmod(file, 0o640)
        _ = try Self.configure(file)
    }

    @Test func a_directory_is_refused_as_not_a_regular_file() throws {
        let directory = try TemporaryDirectory()
        let error = try Self.refusal(directory.path)
        #expect(error.key == "bearer_token_file" && error.message.contains("\(directory.path) is a directory, not a regular file"), "\(error)")
    }

    /// Opened as a file is, a FIFO would hold the config load (and with it a reload, or the
    /// start) until some writer came.
    @Test func a_fifo_is_refused_at_once_as_not_a_regular_file() async throws {
        let directory = try TemporaryDirectory()
        let fifo = directory.path("api.fifo")
        #expect(mkfifo(fifo, 0o600) == 0)
        let outcome = Task.detached { Result { try Self.refusal(fifo) } }
        let watchdog = Task { () -> Bool in
            guard (try? await Task.sleep(for: .seconds(5))) != nil else { return false }
            // Still waiting in open(2): a writer releases it, so that the test ends either way.
            let writer = open(fifo, O_WRONLY | O_NONBLOCK)
            if writer >= 0 { close(writer) }
            return true
        }
        let error = try await outcome.value.get()
        watchdog.cancel()
        #expect(await watchdog.value == false, "refused at once, not once a writer came")
        #expect(error.message.contains("\(fifo) is a FIFO, not a regular file"), "\(error)")
    }

    @Test func a_symbolic_link_is_judged_by_the_file_it_points_to() throws {
        let directory = try TemporaryDirectory()
        let secret = try directory.writeSecret("api.token", "s3cr3t")
        #expect(symlink(secret, directory.path("link.token")) == 0)
        _ = try Self.configure(directory.path("link.token"))
        chmod(secret, 0o644)
        #expect(try Self.refusal(directory.path("link.token")).message.contains("by every user"))
    }
}
