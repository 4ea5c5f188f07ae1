import FeedCluster
import FeedKit
import Foundation
import Testing
import TestSupport

/// The README's permissions file for a fleet, exactly as the README gives it: the instances'
/// user runs the fleet, and the `reader` user reads every page and may write nothing.
@Suite(.serialized, .timeLimit(.minutes(3))) struct FleetPermissionsTests {
    /// The fenced block of README.md that begins with `# /etc/nats/feedd-prod.conf`.
    static func permissionsFile() throws -> String {
        let readme = URL(fileURLWithPath: #filePath).deletingLastPathComponent().deletingLastPathComponent().deletingLastPathComponent()
            .appendingPathComponent("README.md")
        let text = try String(contentsOf: readme, encoding: .utf8)
        guard let start = text.range(of: "```\n# /etc/nats/feedd-prod.conf"), let end = text.range(of: "\n```", range: start.upperBound..<text.endIndex)
        else { throw TestFailure("README.md has no block beginning with # /etc/nats/feedd-prod.conf") }
        return String(text[text.index(start.lowerBound, offsetBy: 4)..<end.lowerBound]) + "\n"
    }

    @Test func the_readmes_permissions_let_the_fleet_work_and_the_reader_read_pages_but_write_nothing() async throws {
        let files = try TemporaryDirectory()
        let nats = try NATSServer(
            configuration: try Self.permissionsFile(), environment: ["FEEDD_PASSWORD": "instance-secret", "READER_PASSWORD": "reader-secret"])
        defer { nats.stop() }
        let upstream = try LoopbackUpstream()
        let password = "user = \"feedd\"\npassword_file = \"\(try files.write("password", "instance-secret"))\""
        let first = try FleetTests.instance([nats.url], upstream, name: "prod", cluster: password)
        let second = try FleetTests.instance([nats.url], upstream, name: "prod", cluster: password)

        let readerPassword = try files.write("reader-password", "reader-secret")
        let reader = try await FleetForger.connect(nats.url, fleet: "prod") { options in
            options.authentication = .password(user: "reader", passwordFile: readerPassword)
            options.requestTimeout = .milliseconds(300)
        }
        let refusals = reader.client.reports()
        let pages = await reader.client.subscribe(to: "feedd.prod.pages.>")

        // The fleet works: pages fetched once, a consumer acknowledged on one instance resumes on the other.
        let client = try first.connect()
        _ = try client.request(["op": "subscribe", "feed": "users", "consumer": "app"])
        try client.send("next users 2")
        let served = try [client.expect("page"), client.expect("page")]
        #expect(try client.request(["op": "ack", "feed": "users", "page": 2])["page"] == 2)
        #expect(try second.connect().request(["op": "subscribe", "feed": "users", "consumer": "app"])["after"] == 2)
        #expect(upstream.received.count == 2)

        // The reader received both pages, as published.
        var iterator = pages.makeAsyncIterator()
        for page in served {
            let message = try #require(await iterator.next())
            #expect(try JSONValue(parsing: message.payload) == page)
        }

        // Every write the reader tries is a permissions violation.
        let generation = try FleetTests.joinedGeneration(first)
        let writes = [
            "feedd.prod.pages.users.\(generation).3", "$KV.feedd-prod-cursors.users.app", "$KV.feedd-prod-leases.users.\(generation).3",
            "$KV.feedd-prod-consumers.users.app", "$KV.feedd-prod-generations.users",
        ]
        for subject in writes {
            await #expect(throws: NATSError.self) {
                _ = try await reader.client.publish(subject: subject, payload: Array("{}".utf8), messageID: "reader", onlyIfSubjectIsEmpty: false)
            }
        }
        let refused = try await within(.seconds(10), "a permissions violation for each write") {
            var subjects: Set<String> = []
            for await report in refusals {
                guard case .refused(let error) = report else { continue }
                #expect(error.code == .authorization)
                if let subject = writes.first(where: { error.reason.contains("Publish to \"\($0)\"") }) { subjects.insert(subject) }
                if subjects.count == writes.count { return subjects }
            }
            throw TestFailure("the reports ended")
        }
        #expect(refused == Set(writes))
        // The fleet is untouched: the consumer still resumes after page 2, and nothing was rejected.
        #expect(try second.connect().request(["op": "subscribe", "feed": "users", "consumer": "app"])["after"] == 2)
        #expect(try FleetTests.rejected(first) == 0)
        let violations = nats.log.split(separator: "\n").filter { $0.contains("Violation") }
        #expect(!violations.isEmpty && violations.allSatisfy { $0.contains(#"User "reader""#) }, "\(violations)")
        await reader.close()
    }
}
