import FeedKit
import Foundation

/// Rewrites `daemon.metrics_file` with the metrics every 15 s, for node_exporter's textfile
/// collector (SPEC §10). Each rewrite goes to a temporary file in the same directory, renamed
/// over the old one, so a reader never sees half a file.
@MainActor
final class MetricsFileWriter {
    static let interval: Duration = .seconds(15)

    /// The text to write: both fronts' metrics.
    private let metrics: () -> String
    private let logger: Logger
    /// The configured path, read again on every rewrite so a reload can change it.
    private let path: () -> String?
    private var task: Task<Void, Never>?
    /// The last failure logged, so a file that cannot be written is reported once, not every 15 s.
    private var lastProblem: String?

    init(metrics: @escaping () -> String, logger: Logger, path: @escaping () -> String?) {
        self.metrics = metrics
        self.logger = logger
        self.path = path
    }

    func start() {
        task = Task { [unowned self] in
            while !Task.isCancelled {
                rewrite()
                try? await Task.sleep(for: Self.interval)
            }
        }
    }

    private func rewrite() {
        guard let path = path() else { return }
        do {
            try Self.replace(path, with: metrics())
            if lastProblem != nil { logger.notice("metrics_file: \(path) written again") }
            lastProblem = nil
        } catch {
            let problem = "metrics_file: \(error)"
            if problem != lastProblem { logger.warning(problem) }
            lastProblem = problem
        }
    }

    /// Writes `text` to `path` atomically, readable by others (node_exporter runs as its own user).
    static func replace(_ path: String, with text: String) throws(MetricsFileError) {
        let temporary = path + ".tmp"
        let descriptor = open(temporary, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0o644)
        guard descriptor >= 0 else { throw MetricsFileError(step: "create \(temporary)") }
        var bytes = Array(text.utf8)[...]
        while !bytes.isEmpty {
            let written = bytes.withUnsafeBytes { write(descriptor, $0.baseAddress, $0.count) }
            if written < 0, errno == EINTR { continue }
            guard written > 0 else {
                let error = MetricsFileError(step: "write \(temporary)")
                close(descriptor)
                unlink(temporary)
                throw error
            }
            bytes = bytes.dropFirst(written)
        }
        // The umask (0077 under the shipped unit) must not keep node_exporter out.
        _ = fchmod(descriptor, 0o644)
        close(descriptor)
        guard rename(temporary, path) == 0 else {
            let error = MetricsFileError(step: "rename \(temporary) to \(path)")
            unlink(temporary)
            throw error
        }
    }
}

/// A step of writing the metrics file that failed, with the system's reason.
struct MetricsFileError: Error, CustomStringConvertible {
    let step: String
    let reason = String(cString: strerror(errno))

    var description: String { "cannot \(step): \(reason)" }
}
