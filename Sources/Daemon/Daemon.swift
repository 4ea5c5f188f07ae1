import FeedEngine
import FeedKit
import FeedServer
import Foundation
import SystemdSupport

/// The running daemon: wires configuration, feeds, the socket server, signals and systemd together.
@MainActor
final class Daemon {
    private let configPath: String?
    private let socketOverride: String?
    private let paths = RuntimePaths(environment: ProcessInfo.processInfo.environment)
    private let sink = JournalLogSink()
    private let logger: Logger
    private let notifier = SystemdNotifier()
    private let loop = EventLoop()
    /// The running feeds and the server; both exist from start-up on (nil only before).
    private var directory: FeedDirectory?
    private var server: Server?
    private var metricsFileWriter: MetricsFileWriter?
    /// The running configuration's `daemon.metrics_file`, changed by a reload.
    private var metricsFile: String?
    /// The socket file this process created, removed again at exit; a socket systemd passed is not ours.
    private var ownedSocketPath: String?
    private var lastStatus = ""
    private var reloadProblem: String?

    init(configPath: String?, socketPath: String?) {
        self.configPath = configPath
        socketOverride = socketPath
        logger = Logger(sink: sink)
    }

    private var configLoading: ConfigLoading { ConfigLoading(paths: paths, logger: logger) }

    func run() -> Never {
        signal(SIGPIPE, SIG_IGN)
        // Before anything can announce the daemon, so a signal sent right after is never lost.
        handleSignals()
        let configuration: Configuration
        do {
            configuration = try configLoading.load(explicitPath: configPath)
        } catch {
            for problem in error.problems { logger.error("invalid configuration: \(problem)") }
            exit(2)
        }
        sink.setMinimumLevel(configuration.daemon.logLevel)
        logger.info("feedd \(feeddVersion) starting with \(configuration.files.joined(separator: ", "))")
        if configuration.files.first == DefaultConfiguration.name {
            do {
                try configLoading.installSampleData()
            } catch {
                logger.warning("cannot write the sample data to \(paths.runtimeDirectory): \(error.localizedDescription)")
            }
        }

        let store = openConsumerStore(configuration.daemon)
        let listeningDescriptor = openListeningSocket(configuration.daemon)
        let directory = FeedDirectory(store: store, encoder: PageLineEncoder(), logger: logger)
        self.directory = directory
        directory.apply(configuration.feeds)
        let server = Server(directory: directory, settings: ServerSettings(daemon: configuration.daemon), logger: logger, loop: loop)
        self.server = server
        server.start(listeningOn: listeningDescriptor)
        directory.onChange = { [unowned self] in self.publishStatus() }
        server.onClientsChange = { [unowned self] in self.publishStatus() }
        metricsFile = configuration.daemon.metricsFile
        metricsFileWriter = MetricsFileWriter(server: server, logger: logger) { [unowned self] in self.metricsFile }
        metricsFileWriter?.start()

        startWatchdog()
        notifier.ready()
        publishStatus()
        // Not dispatchMain(): on Linux it parks the main thread in sigsuspend(2) with every signal
        // unblocked, and a SIGTERM would then kill the process instead of reaching SignalListener.
        // The event loop serves the sockets and the main queue, so the main actor, with the
        // signals still blocked.
        loop.run()
    }

    /// A state directory that cannot be used is fatal, since consumers rely on it.
    private func openConsumerStore(_ settings: DaemonSettings) -> ConsumerStore {
        let directory = paths.stateDirectory(configured: settings.stateDirectory)
        do {
            let store = try ConsumerStore(directory: directory, logger: logger)
            logger.info("consumer state in \(directory)")
            return store
        } catch {
            logger.error("\(error)")
            exit(1)
        }
    }

    /// The socket systemd passed, else one we bind ourselves; failing that, exit 1.
    private func openListeningSocket(_ settings: DaemonSettings) -> Int32 {
        if let passed = notifier.listeningSockets().first {
            logger.info("listening on the socket passed by systemd (fd \(passed))")
            return passed
        }
        let path = paths.socketPath(explicit: socketOverride, configured: settings.socketPath)
        let group: gid_t?
        if let name = settings.socketGroup {
            guard let entry = getgrnam(name) else {
                logger.error("socket_group \"\(name)\" does not exist")
                exit(1)
            }
            group = entry.pointee.gr_gid
        } else {
            group = nil
        }
        do {
            let descriptor = try UnixSocket.listen(path: path, mode: settings.socketMode, group: group)
            ownedSocketPath = path
            logger.notice("listening on \(path)")
            return descriptor
        } catch {
            logger.error("\(error)")
            exit(1)
        }
    }

    // MARK: Signals

    private func handleSignals() {
        SignalListener.start { [unowned self] signalNumber in
            signalNumber == SIGHUP ? self.reload() : self.stop(signal: signalNumber)
        }
    }

    private func stop(signal signalNumber: Int32) {
        guard let server else { exit(0) }
        self.server = nil
        logger.notice("received \(signalNumber == SIGINT ? "SIGINT" : "SIGTERM"); saying goodbye to \(server.clientCount) clients")
        notifier.stopping()
        server.shutdown(within: .seconds(3)) { [self] in
            directory?.closeAll()
            if let ownedSocketPath { unlink(ownedSocketPath) }
            logger.notice("stopped")
            exit(0)
        }
    }

    /// SIGHUP: a valid new config replaces the old one; an invalid one is rejected whole.
    private func reload() {
        guard let server else { return }
        notifier.reloading()
        do {
            let configuration = try configLoading.load(explicitPath: configPath)
            sink.setMinimumLevel(configuration.daemon.logLevel)
            server.settings = ServerSettings(daemon: configuration.daemon)
            metricsFile = configuration.daemon.metricsFile
            reloadProblem = nil
            directory?.apply(configuration.feeds)
            logger.notice("configuration reloaded: \(configuration.feeds.count) feeds")
        } catch {
            for problem in error.problems { logger.error("reload rejected, keeping the running configuration: \(problem)") }
            reloadProblem = "reload rejected: \(error.problems.first?.description ?? "invalid configuration")"
        }
        notifier.ready()
        publishStatus()
    }

    // MARK: systemd

    /// STATUS=, e.g. `3 feeds, 12 clients; users ok, donny retrying: HTTP 503`, sent when it changes.
    private func publishStatus() {
        let feeds = directory.map { directory in directory.names.compactMap { directory[$0] } } ?? []
        var text = "\(feeds.count) feed\(feeds.count == 1 ? "" : "s"), \(server?.clientCount ?? 0) client\(server?.clientCount == 1 ? "" : "s")"
        let states = feeds.prefix(8).map { feed in
            feed.health.lastError.map { "\(feed.name) \(feed.health.state.rawValue): \($0)" } ?? "\(feed.name) \(feed.health.state.rawValue)"
        }
        if !states.isEmpty { text += "; " + states.joined(separator: ", ") + (feeds.count > 8 ? ", …" : "") }
        if let reloadProblem { text += "; \(reloadProblem)" }
        guard text != lastStatus else { return }
        lastStatus = text
        notifier.status(text)
    }

    /// Pings at half the interval from the main queue, where all the daemon's work runs, so a
    /// wedged daemon stops pinging and systemd restarts it.
    private func startWatchdog() {
        guard let interval = notifier.watchdogInterval() else { return }
        let notifier = notifier
        Task { @MainActor in
            while true {
                notifier.watchdog()
                try? await Task.sleep(for: interval / 2)
            }
        }
    }
}
