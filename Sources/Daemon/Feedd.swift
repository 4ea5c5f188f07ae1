import FeedEngine
import FeedKit
import Foundation
import SystemdSupport

/// The `feedd` command: parses the command line and runs what it asks for.
public enum Feedd {
    @MainActor
    public static func main(_ arguments: [String]) -> Never {
        let command: DaemonCommand
        do {
            command = try DaemonCommand.parse(arguments)
        } catch {
            FileHandle.standardError.write(Data("feedd: \(error)\n\n\(DaemonCommand.usage)\n".utf8))
            exit(2)
        }
        switch command {
        case .version:
            print("feedd \(feeddVersion)")
            exit(0)
        case .help:
            print(DaemonCommand.usage)
            exit(0)
        case .checkConfig(let configPath):
            exit(checkConfig(configPath: configPath))
        case .checkState(let configPath):
            exit(StateCommands(configPath: configPath).check())
        case .repairState(let configPath):
            exit(StateCommands(configPath: configPath).repair())
        case .configKeys(let format, let section):
            do {
                print(try ConfigKeysCommand(reference: ConfigReference(registry: builtinAdapters)).render(format, section: section), terminator: "")
                exit(0)
            } catch {
                FileHandle.standardError.write(Data("feedd: \(error)\n".utf8))
                exit(2)
            }
        case .checkPlugin(let request):
            exit(PluginCheckCommand(request: request).run())
        case .run(let configPath, let socketPath):
            SignalListener.blockHandledSignals()
            Daemon(configPath: configPath, socketPath: socketPath).run()
        }
    }

    /// Prints every problem as `FILE:LINE:COL: message` and nothing on success. Besides the
    /// config itself, each adapter checks what only running it can (an `exec` plugin is started
    /// and sent `configure`). Warnings (a path that cannot work yet) go to stderr, whatever the outcome.
    private static func checkConfig(configPath: String?) -> Int32 {
        let sink = JournalLogSink(minimumLevel: .error)
        let loader = ConfigLoading(
            paths: RuntimePaths(environment: ProcessInfo.processInfo.environment), logger: Logger(sink: sink), transport: CurlTransport())
        let configuration: Configuration
        do {
            configuration = try loader.load(explicitPath: configPath)
        } catch {
            for problem in error.problems + verifyAdapters(error.feeds) { print(problem) }
            warn(error.warnings)
            return 2
        }
        warn(configuration.warnings)
        let problems = verifyAdapters(configuration.feeds)
        for problem in problems { print(problem) }
        return problems.isEmpty ? 0 : 2
    }

    private static func warn(_ warnings: [ConfigProblem]) {
        for warning in warnings { FileHandle.standardError.write(Data("\(warning.warningDescription)\n".utf8)) }
    }

    /// Runs every feed's ``SourceAdapter/verify()`` at once and waits for all of them.
    private static func verifyAdapters(_ feeds: [FeedDefinition]) -> [ConfigProblem] {
        let found = Locked<[ConfigProblem]>([])
        let done = DispatchSemaphore(value: 0)
        Task.detached {
            await withTaskGroup(of: ConfigProblem?.self) { group in
                for feed in feeds {
                    group.addTask { await verify(feed) }
                }
                for await problem in group {
                    if let problem { found.withLock { $0.append(problem) } }
                }
            }
            done.signal()
        }
        done.wait()
        return found.withLock { $0 }.sorted { ($0.file, $0.line ?? 0, $0.column ?? 0) < ($1.file, $1.line ?? 0, $1.column ?? 0) }
    }

    /// An adapter's own check, which bounds itself (a plugin that does not answer `configure`
    /// within the feed's `timeout` is reported so).
    private static func verify(_ feed: FeedDefinition) async -> ConfigProblem? {
        do {
            try await feed.adapter.verify()
            return nil
        } catch {
            let name = feed.settings.name
            let message = "feeds.\(name): \(error)"
            return feed.location?.problem(message) ?? ConfigProblem(file: "feeds.\(name)", message: message)
        }
    }
}

/// Finds and loads the configuration the way both the daemon and `check-config` do.
struct ConfigLoading {
    let paths: RuntimePaths
    let logger: Logger
    /// The one HTTP transport of the process: every feed's adapter gets it, so connections to an
    /// upstream are shared, and its thread is started once.
    let transport: any HTTPTransport
    /// Where adapters keep what must survive a restart (`<state_dir>/adapters/<feed>`), given the
    /// configuration's `[daemon]` table; nil for `check-config`, whose adapters keep nothing.
    var adapterStateRoot: (@Sendable (DaemonSettings) -> String)? = nil
    /// How `merge` feeds read their members; nil for `check-config`, which reads nothing.
    var feedReader: (any FeedReader)? = nil

    func load(explicitPath: String?) throws(ConfigError) -> Configuration {
        let loader = ConfigurationLoader(
            registry: builtinAdapters, logger: logger, transport: transport, adapterStateRoot: adapterStateRoot, feedReader: feedReader)
        if let file = paths.configFile(explicit: explicitPath) {
            return try loader.load(file: file)
        }
        let samplePath = "\(paths.runtimeDirectory)/\(SampleData.fileName)"
        let directory = (RuntimePaths.systemConfigFile as NSString).deletingLastPathComponent + "/feedd.d"
        var configuration = try loader.load(
            text: DefaultConfiguration.text(samplePath: samplePath), named: DefaultConfiguration.name, dropInDirectory: directory)
        // The embedded config's one path is the sample data, which the daemon writes at start.
        configuration.warnings.removeAll { $0.file == DefaultConfiguration.name }
        return configuration
    }

    /// Writes the embedded sample data where the embedded config expects it.
    func installSampleData() throws {
        let directory = paths.runtimeDirectory
        try FileManager.default.createDirectory(atPath: directory, withIntermediateDirectories: true, attributes: [.posixPermissions: 0o700])
        try Data(SampleData.text.utf8 + [UInt8(ascii: "\n")]).write(to: URL(fileURLWithPath: "\(directory)/\(SampleData.fileName)"), options: .atomic)
    }
}
