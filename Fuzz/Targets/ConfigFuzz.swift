// Fuzz target: a config file. Invariant: loading never crashes; every problem names the file.
import Foundation

/// One transport for the whole run, as in the daemon: each one starts a thread.
private let transport = CurlTransport()

@_cdecl("LLVMFuzzerTestOneInput")
public func fuzzConfig(_ data: UnsafePointer<UInt8>, _ size: Int) -> CInt {
    let text = String(decoding: UnsafeBufferPointer(start: data, count: size), as: UTF8.self)
    let loader = ConfigurationLoader(registry: AdapterRegistry([FileSource.self]), logger: Logger(sink: SilentSink()), transport: transport)
    do {
        _ = try loader.load(text: text, named: "fuzz.toml", dropInDirectory: nil)
    } catch {
        guard error.problems.allSatisfy({ $0.file == "fuzz.toml" && !$0.message.isEmpty }) else {
            fatalError("a problem without its file or message: \(error)")
        }
    }
    return 0
}

struct SilentSink: LogSink {
    func write(_ level: LogLevel, _ message: String) {}
}
