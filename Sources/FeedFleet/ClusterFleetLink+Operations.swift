import FeedCluster
import FeedEngine
import FeedKit

/// What the link counts itself: the fleet's answers to publications and leases, and the last
/// problem an operator must act on.
struct LinkFigures: Sendable {
    var publishDuration = DurationHistogram()
    var leaseDuration = DurationHistogram()
    var refusedPublications = 0
    var problem: NATSError?
    var server: String?
}

/// The operator's view of the link: every change of the connection logged, with the reason of a
/// failure named (unreachable, authentication, TLS, permissions), and the figures for the metrics.
extension ClusterFleetLink {
    public var statistics: FleetStatistics {
        var statistics = FleetStatistics(isConnected: isConnected)
        statistics.reconnections = store.client.reconnections
        statistics.rejected = Dictionary(uniqueKeysWithValues: store.rejections.counts.map { ($0.key.rawValue, $0.value) })
        let figures = figures.withLock { $0 }
        statistics.server = isConnected ? figures.server : nil
        statistics.publishDuration = figures.publishDuration
        statistics.leaseDuration = figures.leaseDuration
        statistics.refusedPublications = figures.refusedPublications
        statistics.problem = figures.problem?.description
        return statistics
    }

    /// Logs each ``ConnectionReport``, where the connection stands first, for as long as the
    /// store is open, and keeps the problem it names for ``statistics``. Call it once the link is
    /// where `status` reads it: a failure is then never logged before `status` can name it.
    public func watchConnection() {
        let reports = store.client.reports()
        Task { [weak self] in
            var lastRefusalLogged: ContinuousClock.Instant?
            for await report in reports {
                guard let self else { return }
                switch report {
                case .connected(let server):
                    figures.withLock { $0.server = server; $0.problem = nil }
                    logger.notice("connected to the NATS cluster at \(server)")
                case .restored(let server, let outage):
                    figures.withLock { $0.server = server; $0.problem = nil }
                    logger.notice("connected to the NATS cluster again, at \(server), after an outage of \(Self.seconds(outage))")
                case .lost(let reason):
                    logger.warning("lost the connection to the NATS cluster (\(reason)); shared feeds are served alone until it is back")
                case .attemptFailed(let error):
                    logAttemptFailure(error)
                case .refused(let error):
                    figures.withLock { $0.problem = error }
                    // A refused operation is repeated as often as it is tried: once every 10 s is enough.
                    if lastRefusalLogged.map({ .now - $0 >= ClusterRejections.logInterval }) ?? true {
                        lastRefusalLogged = .now
                        logger.error("the NATS cluster refused an operation of this instance: \(error.reason); its user needs the permissions the README's fleet section lists")
                    }
                case .gaveUp(let reason):
                    logger.error("gave up reconnecting to the NATS cluster (\(reason)); shared feeds are served alone until feedd is restarted")
                }
            }
        }
    }

    private func logAttemptFailure(_ error: NATSError) {
        switch error.code {
        case .authentication:
            figures.withLock { $0.problem = error }
            logger.error("the NATS cluster refused this instance's credentials: \(error); check [cluster] user and password_file, token_file, nkey_seed_file or creds_file")
        case .tls:
            figures.withLock { $0.problem = error }
            logger.error("TLS with the NATS cluster failed: \(error); check [cluster] tls_ca, tls_cert and tls_key, and the servers' certificates")
        case .authorization:
            figures.withLock { $0.problem = error }
            logger.error("the NATS cluster does not permit this instance to connect: \(error)")
        default:
            logger.warning("the NATS cluster cannot be reached yet (\(error)); shared feeds are served alone meanwhile, trying again")
        }
    }

    /// A call went through: a refused permission or a full JetStream is over (a refused
    /// connection is over once connected, which ``watchConnection()`` sees).
    func clearProblem() {
        figures.withLock { figures in
            if let code = figures.problem?.code, code == .authorization || code == .full { figures.problem = nil }
        }
    }

    /// `3.2 s`.
    static func seconds(_ duration: Duration) -> String {
        let milliseconds = duration.components.seconds * 1_000 + duration.components.attoseconds / 1_000_000_000_000_000
        return "\(milliseconds / 1_000).\(milliseconds % 1_000 / 100) s"
    }
}
