import CMalloc
import FeedEngine
import FeedFleet
import FeedKit
import FeedServer
import FeedState
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
    private let transport = CurlTransport()
    /// The running feeds and the server; both exist from start-up on (nil only before).
    private var directory: FeedDirectory?
    private var server: Server?
    private var store: StateStore?
    /// The fleet of a daemon with `[cluster]` (SPEC §8), once connecting to it has begun.
    private var fleet: ClusterFleetLink?
    /// The `[cluster]` the daemon started with: a reload does not change it.
    private var startingCluster: ClusterSettings?
    private var metricsFileWriter: MetricsFileWriter?
    /// The running configuration's `daemon.metrics_file`, changed by a reload.
    private var metricsFile: String?
    /// The socket file this process created, removed again at exit; a socket systemd passed is not ours.
    private var ownedSocketPath: String?
    private var lastStatus = ""
    private var reloadProblem: String?
    /// Whether a reload is being read, and whether another SIGHUP came meanwhile.
    private var reloadState = ReloadState.idle

    private enum ReloadState {
        case idle
        case running
        case again
    }
    /// `<state_dir>/adapters`, fixed at start like the consumer store beside it; before that, the
    /// configuration being read names it.
    private var adapterStateRoot: String?
    /// How `merge` feeds read their members: through the running feeds, once they exist.
    private let feedReader = EngineFeedReader()

    init(configPath: String?, socketPath: String?) {
        self.configPath = configPath
        socketOverride = socketPath
        logger = Logger(sink: sink)
    }

    private var configLoading: ConfigLoading {
        let (paths, fixedRoot) = (paths, adapterStateRoot)
        return ConfigLoading(
            paths: paths, logger: logger, transport: transport,
            adapterStateRoot: { settings in fixedRoot ?? Self.adapterStateRoot(of: settings, paths: paths) }, feedReader: feedReader)
    }

    /// `<state_dir>/adapters` for the state directory `settings` name.
    private nonisolated static func adapterStateRoot(of settings: DaemonSettings, paths: RuntimePaths) -> String {
        paths.stateDirectory(configured: settings.stateDirectory) + "/adapters"
    }

    func run() -> Never {
        signal(SIGPIPE, SIG_IGN)
        // Blocks of 1 MiB and more (a wide page's body, its items, its line) are mapped on their
        // own and so given back when freed: glibc otherwise raises that threshold to the largest
        // block freed so far, and the heap keeps every later one's memory (issue 23, item 10).
        mallopt(M_MMAP_THRESHOLD, 1 << 20)
        // Before anything can announce the daemon, so a signal sent right after is never lost.
        handleSignals()
        let configuration = loadConfigurationOrExit()
        // A reload keeps the adapters where they started, as the store stays where it opened.
        adapterStateRoot = Self.adapterStateRoot(of: configuration.daemon, paths: paths)
        sink.setMinimumLevel(configuration.daemon.logLevel)
        logger.info("feedd \(feeddVersion) starting with \(configuration.files.joined(separator: ", "))")
        checkDescriptorLimit(maxClients: configuration.daemon.maxClients)
        if configuration.files.first == DefaultConfiguration.name {
            do {
                try configLoading.installSampleData()
            } catch {
                logger.warning("cannot write the sample data to \(paths.runtimeDirectory): \(error.localizedDescription)")
            }
        }

        let store = openStateStore(configuration.daemon)
        self.store = store
        let listeningDescriptor = openListeningSocket(configuration.daemon)
        let directory = FeedDirectory(store: store, encoder: PageLineEncoder(), logger: logger)
        self.directory = directory
        feedReader.directory = directory
        directory.apply(configuration.feeds)
        if let cluster = configuration.cluster { joinFleet(cluster, directory: directory) }
        let server = Server(directory: directory, settings: ServerSettings(daemon: configuration.daemon), logger: logger, loop: loop)
        self.server = server
        server.start(listeningOn: listeningDescriptor)
        directory.onChange = { [unowned self] in self.publishStatus() }
        server.onClientsChange = { [unowned self] in self.publishStatus() }
        metricsFile = configuration.daemon.metricsFile
        metricsFileWriter = MetricsFileWriter(server: server, logger: logger) { [unowned self] in self.metricsFile }
        metricsFileWriter?.start()

        startWatchdog()
        prepareDispatchTimers()
        notifier.ready()
        publishStatus()
        // Not dispatchMain(): on Linux it parks the main thread in sigsuspend(2) with every signal
        // unblocked, and a SIGTERM would then kill the process instead of reaching SignalListener.
        // The event loop serves the sockets and the main queue, so the main actor, with the
        // signals still blocked.
        loop.run()
    }

    /// Connects to the fleet's NATS cluster in the background: the socket is served meanwhile, and
    /// an unreachable cluster is retried for as long as the daemon runs (SPEC §8).
    private func joinFleet(_ cluster: ClusterSettings, directory: FeedDirectory) {
        directory.clusterName = cluster.name
        startingCluster = cluster
        let instance = "\(ProcessInfo.processInfo.hostName)-\(getpid())"
        let logger = logger.labelled("fleet")
        Task {
            do {
                let fleet = try await ClusterFleetLink.connect(cluster, instance: instance, logger: logger)
                self.fleet = fleet
                logger.notice(
                    "fleet \"\(cluster.name)\" as instance \(instance): "
                        + (fleet.isConnected ? "connected" : "not reachable yet (\(cluster.servers.joined(separator: ", "))); shared feeds are served alone meanwhile"))
                directory.attach(fleet)
                publishStatus()
            } catch {
                logger.error("cannot join the fleet \"\(cluster.name)\": \(error); every feed is served alone")
            }
        }
    }

    /// Each client takes a descriptor, and feeds, the state store and upstream connections take
    /// some more. The soft limit is raised as far as the hard one allows; if that is still too low
    /// for `max_clients`, the daemon says so now rather than when it runs out.
    private func checkDescriptorLimit(maxClients: Int) {
        let reserve = 256
        let needed = rlim_t(maxClients + reserve)
        var limit = rlimit()
        guard getrlimit(Int32(RLIMIT_NOFILE.rawValue), &limit) == 0, limit.rlim_cur < needed else { return }
        var raised = limit
        raised.rlim_cur = min(needed, limit.rlim_max)
        if raised.rlim_cur > limit.rlim_cur, setrlimit(Int32(RLIMIT_NOFILE.rawValue), &raised) == 0 { limit = raised }
        guard limit.rlim_cur < needed else { return }
        logger.warning(
            "the open files limit (RLIMIT_NOFILE) is \(limit.rlim_cur), too low for max_clients = \(maxClients) "
                + "(about \(needed) needed): raise LimitNOFILE= (or ulimit -n) or lower max_clients")
    }

    /// libdispatch makes the descriptors behind its timers when the first timer is armed, and
    /// traps if it cannot: out of descriptors, a feed's first retry (`Task.sleep`) would crash
    /// the daemon. Arm one now, while descriptors are plentiful.
    private func prepareDispatchTimers() {
        DispatchQueue.global().asyncAfter(deadline: .now() + .milliseconds(1)) {}
    }

    private func loadConfigurationOrExit() -> Configuration {
        do {
            return try configLoading.load(explicitPath: configPath)
        } catch {
            for problem in error.problems { logger.error("invalid configuration: \(problem)") }
            exit(2)
        }
    }

    /// A state directory that cannot be used (locked by another feedd, damaged, unwritable) is
    /// fatal, since consumers rely on it.
    private func openStateStore(_ settings: DaemonSettings) -> StateStore {
        let directory = paths.stateDirectory(configured: settings.stateDirectory)
        do {
            let store = try StateStore(
                directory: directory, options: StateStore.Options(pageBodyBudget: settings.statePageBytes), logger: logger.labelled("state"))
            logger.info("durable state in \(store.databasePath)")
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
            let isDefaultPath = socketOverride == nil && settings.socketPath == nil
            let descriptor = try UnixSocket.listen(path: path, mode: settings.socketMode, group: group, createDirectory: isDefaultPath)
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
            // Every confirmed write is durable already; this commits what is still queued.
            store?.close()
            if let ownedSocketPath { unlink(ownedSocketPath) }
            logger.notice("stopped")
            exit(0)
        }
    }

    /// SIGHUP: a valid new config replaces the old one; an invalid one is rejected whole. The
    /// config is read and parsed off the main thread (a large one takes seconds), so clients
    /// are served meanwhile; a SIGHUP during a reload reloads once more when it ends.
    private func reload() {
        guard server != nil else { return }
        guard reloadState == .idle else {
            reloadState = .again
            return
        }
        reloadState = .running
        notifier.reloading()
        let loading = configLoading
        let configPath = configPath
        Task.detached {
            let outcome = Result { () throws(ConfigError) in try loading.load(explicitPath: configPath) }
            await self.finishReload(outcome)
        }
    }

    private func finishReload(_ outcome: Result<Configuration, ConfigError>) {
        let again = reloadState == .again
        reloadState = .idle
        guard let server else { return }
        switch outcome {
        case .success(let configuration):
            sink.setMinimumLevel(configuration.daemon.logLevel)
            server.settings = ServerSettings(daemon: configuration.daemon)
            metricsFile = configuration.daemon.metricsFile
            reloadProblem = nil
            directory?.apply(configuration.feeds)
            logger.notice("configuration reloaded: \(configuration.feeds.count) feeds")
            if configuration.cluster != startingCluster {
                logger.warning("[cluster] changed: the daemon keeps the one it started with until it is restarted")
            }
        case .failure(let error):
            for problem in error.problems { logger.error("reload rejected, keeping the running configuration: \(problem)") }
            reloadProblem = "reload rejected: \(error.problems.first?.description ?? "invalid configuration")"
        }
        notifier.ready()
        publishStatus()
        if again { self.reload() }
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
        if let clusterName = directory?.clusterName {
            text += "; cluster \(clusterName) \(fleet?.isConnected == true ? "connected" : "disconnected")"
        }
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
