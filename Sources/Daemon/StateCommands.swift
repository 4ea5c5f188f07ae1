import FeedKit
import FeedState
import Foundation
import SystemdSupport

/// `feedd state check` and `feedd state repair`, on the state directory the config names.
struct StateCommands {
    let configPath: String?

    /// Prints what the store holds, or why the daemon would refuse it: 0 usable, 1 damaged, 2 bad config.
    func check() -> Int32 {
        guard let directory = stateDirectory() else { return 2 }
        let report = StateMaintenance.check(directory: directory)
        if report.isNew {
            print("\(report.databasePath): not created yet; feedd creates it at start")
            return 0
        }
        guard report.isHealthy else {
            print("\(report.databasePath): damaged")
            for problem in report.problems { print("  \(problem)") }
            print("Stop feedd and run `feedd state repair\(configArgument)` to salvage what is readable.")
            return 1
        }
        print(
            "\(report.databasePath): ok; \(counted(report.feeds, "feed")), \(counted(report.pages, "page")) (\(report.pageBodies) with their items), "
                + counted(report.consumers, "consumer"))
        for row in report.rejectedRows { print("  feedd will reject at start: \(row)") }
        return 0
    }

    /// Salvages the store into a new one, keeping the damaged file: 0 done, 1 not possible, 2 bad config.
    func repair() -> Int32 {
        guard let directory = stateDirectory() else { return 2 }
        do {
            let report = try StateMaintenance.repair(directory: directory)
            print(
                "repaired \(report.databasePath): \(counted(report.feeds, "feed")), \(counted(report.pages, "page")), "
                    + "\(counted(report.consumers, "consumer")) salvaged")
            for kept in report.keptAs { print("  the damaged file is kept as \(kept)") }
            for problem in report.unreadable { print("  could not read: \(problem)") }
            for row in report.rejectedRows { print("  left out: \(row)") }
            return 0
        } catch {
            FileHandle.standardError.write(Data("feedd: \(error)\n".utf8))
            return 1
        }
    }

    private var configArgument: String { configPath.map { " --config \($0)" } ?? "" }

    /// The configured state directory, or nil after printing why the config is invalid.
    private func stateDirectory() -> String? {
        let paths = RuntimePaths(environment: ProcessInfo.processInfo.environment)
        let loading = ConfigLoading(paths: paths, logger: Logger(sink: JournalLogSink(minimumLevel: .error)), transport: CurlTransport())
        do {
            let configuration = try loading.load(explicitPath: configPath)
            return paths.stateDirectory(configured: configuration.daemon.stateDirectory)
        } catch {
            for problem in error.problems { FileHandle.standardError.write(Data("\(problem)\n".utf8)) }
            return nil
        }
    }
}
