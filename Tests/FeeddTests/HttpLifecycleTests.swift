import FeedKit
import Foundation
import Glibc
import Testing
import TestSupport

/// The HTTP front as the daemon starts and stops (SPEC §11): `/healthz` 503 while stopping,
/// event streams told `bye`.
@Suite struct HttpLifecycleTests {
    @Test func stopping_says_bye_to_streams_and_the_health_check_answers_503_meanwhile() throws {
        let directory = try TemporaryDirectory()
        let pad = String(repeating: "x", count: 4000)
        try directory.write("numbers.ndjson", (1...2000).map { #"{"n":\#($0),"pad":"\#(pad)"}"# }.joined(separator: "\n") + "\n")
        let world = try HTTPWorld(pageSize: 10, directory: directory)
        let result = try world.python(HttpEventStreamTests.client + """
            import os, signal, socket, urllib.error
            # A client that never reads holds the daemon's goodbye up for a while (at most 3 s).
            stuck = socket.socket()
            stuck.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, 4096)
            stuck.connect((BASE.hostname, BASE.port))
            stuck.sendall(b"GET /v1/feeds/numbers/events HTTP/1.1\\r\\nHost: x\\r\\n\\r\\n")
            connection, response = stream("/v1/feeds/numbers/events?after=1999")
            time.sleep(0.5)
            os.kill(int(sys.argv[2]), signal.SIGTERM)
            last = None
            for event, id, data in events(response):
                last = [event, data.get("reason")]
                if event == "bye":
                    break
            try:
                urllib.request.urlopen(sys.argv[1] + "/healthz", timeout=5)
                health = [200, None]
            except urllib.error.HTTPError as error:
                health = [error.code, json.load(error)["status"]]
            print(json.dumps({"last": last, "health": health}))
            """, [String(world.daemon.pid)])
        #expect(result["last"] == ["bye", "shutting_down"])
        #expect(result["health"] == [503, "stopping"])
        #expect(try world.daemon.waitForExit(timeout: .seconds(10)) == 0)
    }
}
