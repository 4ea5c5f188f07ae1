import FeedKit
import FeedState
import Glibc

// feedd-state-torture DIRECTORY: writes to the state store in DIRECTORY as fast as it can,
// forever, and prints one line per write the moment the store has confirmed it:
//   G <generation>                      a generation of feed "f" started
//   P <generation> <page>               a page of it recorded
//   C <consumer> <generation> <cursor>  a consumer's cursor stored
// The crash test kills it with SIGKILL at random moments and checks that every confirmed line
// is in the store afterwards.

/// One write(2) per line: a line is in the pipe whole, or not at all, when the process dies.
func confirm(_ line: String) {
    let bytes = Array((line + "\n").utf8)
    _ = bytes.withUnsafeBytes { write(STDOUT_FILENO, $0.baseAddress, $0.count) }
}

struct StandardErrorSink: LogSink {
    func write(_ level: LogLevel, _ message: String) {
        let bytes = Array(("feedd-state-torture: \(message)\n").utf8)
        _ = bytes.withUnsafeBytes { Glibc.write(STDERR_FILENO, $0.baseAddress, $0.count) }
    }
}

let pagesPerGeneration = 200
let consumers = 32

guard CommandLine.arguments.count == 2 else {
    StandardErrorSink().write(.error, "usage: feedd-state-torture DIRECTORY")
    exit(2)
}
let store: StateStore
do {
    store = try StateStore(directory: CommandLine.arguments[1], logger: Logger(sink: StandardErrorSink()))
} catch {
    StandardErrorSink().write(.error, "\(error)")
    exit(1)
}

do {
    while true {
        let generation = (store.feed("f")?.generation ?? 0) + 1
        try await store.startGeneration(feed: "f", generation: generation, fingerprint: "shape-\(generation)", seed: "seed-\(generation)")
        confirm("G \(generation)")
        try await withThrowingTaskGroup(of: Void.self) { group in
            group.addTask {
                for page in 1...pagesPerGeneration {
                    try await store.recordPage(feed: "f", generation: generation, page: page, token: "token-\(page + 1)", body: nil)
                    confirm("P \(generation) \(page)")
                }
            }
            for index in 0..<consumers {
                group.addTask {
                    var cursor = 0
                    while cursor < pagesPerGeneration {
                        guard (store.feed("f")?.pages.count ?? 0) > cursor else {
                            try await Task.sleep(for: .milliseconds(1))
                            continue
                        }
                        cursor += 1
                        try await store.setCursor(feed: "f", consumer: "c\(index)", generation: generation, cursor: cursor)
                        confirm("C c\(index) \(generation) \(cursor)")
                    }
                }
            }
            try await group.waitForAll()
        }
    }
} catch {
    StandardErrorSink().write(.error, "\(error)")
    exit(1)
}
