import CMalloc
import FeedEngine
import FeedFleet
import FeedHTTP
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
    private var service: FeedService?
    private var server: Server?
    /// The HTTP front, when `[http]` has listeners or systemd passed one (SPEC §11).
    private var http: HTTPFront?
    /// The `[http]` the front started with: its listeners and TLS stay until a restart.
    private var startingHTTP: HTTPSettings?
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
        for warning in configuration.warnings { logger.warning("\(warning.location): \(warning.message)") }
        let httpClients = configuration.http.map { $0.maxClients ?? configuration.daemon.maxClients } ?? 0
        checkDescriptorLimit(maxClients: configuration.daemon.maxClients + httpClients)
        if configuration.files.first == DefaultConfiguration.name {
            do {
                try configLoading.installSampleData()
            } catch {
                logger.warning("cannot write the sample data to \(paths.runtimeDirectory): \(error.localizedDescription)")
            }
        }

        let store = openStateStore(configuration.daemon)
        self.store = store
        let passed = notifier.listeningSockets()
        let listeningDescriptor = openListeningSocket(configuration.daemon, passed: passed.filter { $0.name != Self.httpSocketName }.map(\.descriptor))
        let directory = FeedDirectory(store: store, encoder: PageLineEncoder(), logger: logger)
        self.directory = directory
        // Before the feeds are made: shared feeds serve alone until they join, and every feed
        // starts its fetches once the turn's answers are written.
        directory.clusterName = configuration.cluster?.name
        directory.afterTurn = loop.afterTurn
        let service = FeedService(
            directory: directory, limits: FeedService.Limits(subscriptionsPerClient: configuration.daemon.maxSubscriptions), logger: logger)
        self.service = service
        feedReader.service = service
        directory.apply(configuration.feeds)
        if let cluster = configuration.cluster { joinFleet(cluster, directory: directory) }
        let server = Server(service: service, settings: ServerSettings(daemon: configuration.daemon), logger: logger, loop: loop)
        self.server = server
        server.start(listeningOn: listeningDescriptor)
        startHTTP(configuration, passed: passed.filter { $0.name == Self.httpSocketName }.map(\.descriptor), service: service, server: server)
        directory.onChange = { [unowned self] in self.publishStatus() }
        server.onClientsChange = { [unowned self] in self.publishStatus() }
        metricsFile = configuration.daemon.metricsFile
        metricsFileWriter = MetricsFileWriter(metrics: { [unowned self] in self.metricsText }, logger: logger) { [unowned self] in self.metricsFile }
        metricsFileWriter?.start()

        startWatchdog()
        prepareDispatchTimers()
        notifier.ready()
        http?.ready()
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
        startingCluster = cluster
        let instance = "\(ProcessInfo.processInfo.hostName)-\(getpid())"
        let logger = logger.labelled("fleet")
        Task {
            do {
                let fleet = try await ClusterFleetLink.connect(cluster, instance: instance, logger: logger)
                self.fleet = fleet
                // No server URL here: one may carry a password. The link logs the connection's changes.
                logger.notice(
                    "fleet \"\(cluster.name)\" as instance \(instance): "
                        + (fleet.isConnected ? "connected" : "not connected yet; shared feeds are served alone meanwhile"))
                directory.attach(fleet)
                fleet.watchConnection()
                publishStatus()
            } catch {
                logger.error("cannot join the fleet \"\(cluster.name)\": \(error); every feed is served alone")
            }
        }
    }

    /// Each client takes a descriptor, and feeds, the state store and upstream connections take
    /// some more (``DescriptorReserve``, which clients never take). The soft limit is raised as far
    /// as the hard one allows; if that is still too low for `max_clients`, the daemon says so now
    /// rather than when it runs out.
    private func checkDescriptorLimit(maxClients: Int) {
        let needed = rlim_t(maxClients + DescriptorReserve.wanted)
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
    private func openListeningSocket(_ settings: DaemonSettings, passed: [Int32]) -> Int32 {
        if let passed = passed.first {
            logger.info("listening on the socket passed by systemd (fd \(passed))")
            return passed
        }
        let path = paths.socketPath(explicit: socketOverride, configured: settings.socketPath)
        let group = socketGroup(settings)
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

    /// `socket_group`'s gid, for the sockets the daemon binds itself; exit 1 if it does not exist.
    private func socketGroup(_ settings: DaemonSettings) -> gid_t? {
        guard let name = settings.socketGroup else { return nil }
        guard let entry = getgrnam(name) else {
            logger.error("socket_group \"\(name)\" does not exist")
            exit(1)
        }
        return entry.pointee.gr_gid
    }

    /// The `FileDescriptorName=` of the sockets systemd passes for the HTTP front (feedd-http.socket).
    private static let httpSocketName = "http"

    /// Starts the HTTP front on the sockets systemd passed for it, else on `[http] listen`, if
    /// either names any; a listener that cannot be opened is fatal, like the socket.
    private func startHTTP(_ configuration: Configuration, passed: [Int32], service: FeedService, server: Server) {
        let settings = configuration.http ?? HTTPSettings()
        guard !passed.isEmpty || !settings.listen.isEmpty else { return }
        do {
            let listeners = passed.isEmpty
                ? try settings.listen.map { address throws(HTTPStartError) in
                    try HTTPListener.bind(address, mode: configuration.daemon.socketMode, group: socketGroup(configuration.daemon))
                }
                : passed.map { HTTPListener(descriptor: $0, name: "the socket passed by systemd (fd \($0))") }
            let front = HTTPFront(
                service: service, socketMetrics: { server.metrics }, settings: settings, daemon: configuration.daemon, logger: logger, loop: loop)
            try front.start(listeners, settings: settings)
            http = front
            startingHTTP = settings
        } catch {
            logger.error("\(error)")
            exit(1)
        }
    }

    /// The metrics of both fronts, for `daemon.metrics_file`.
    private var metricsText: String {
        http?.metricsText ?? server?.metrics.text ?? ""
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
        logger.notice("received \(signalNumber == SIGINT ? "SIGINT" : "SIGTERM"); saying goodbye to \(counted(server.clientCount, "client"))")
        notifier.stopping()
        // Both fronts say goodbye at once; the daemon stops when both are done.
        var fronts = http == nil ? 1 : 2
        let stopped: @MainActor () -> Void = { [self] in
            fronts -= 1
            guard fronts == 0 else { return }
            directory?.closeAll()
            // Every confirmed write is durable already; this commits what is still queued.
            store?.close()
            if let ownedSocketPath { unlink(ownedSocketPath) }
            logger.notice("stopped")
            exit(0)
        }
        http?.shutdown(within: .seconds(3), completion: stopped)
        server.shutdown(within: .seconds(3), completion: stopped)
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
            reloadHTTP(configuration)
            logger.notice("configuration reloaded: \(counted(configuration.feeds.count, "feed"))")
            for warning in configuration.warnings { logger.warning("\(warning.location): \(warning.message)") }
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

    /// A reload changes the front's tokens, origins and limits; its listeners and TLS stay.
    private func reloadHTTP(_ configuration: Configuration) {
        let settings = configuration.http ?? HTTPSettings()
        guard let http, let startingHTTP else {
            if !settings.listen.isEmpty { logger.warning("[http] listen is set: the HTTP front starts when the daemon is restarted") }
            return
        }
        http.apply(settings, daemon: configuration.daemon)
        if settings.listen != startingHTTP.listen || settings.tlsCertificate != startingHTTP.tlsCertificate || settings.tlsKey != startingHTTP.tlsKey {
            logger.warning("[http] listen or TLS changed: the HTTP front keeps the ones it started with until the daemon is restarted")
        }
    }

    // MARK: systemd

    /// STATUS=, e.g. `3 feeds, 12 clients; users ok, donny retrying: HTTP 503`, sent when it changes.
    private func publishStatus() {
        let feeds = service?.feedStatuses(consumers: .none) ?? []
        var text = "\(counted(feeds.count, "feed")), \(counted(server?.clientCount ?? 0, "client"))"
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
