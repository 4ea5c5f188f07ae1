import FeedEngine

extension MetricsSnapshot {
    /// The `feedd_cluster_*` families (SPEC §8, §10): the connection, the records refused, and
    /// how long the fleet takes to confirm a publication and to answer for a lease.
    static func write(_ fleet: FleetStatistics, to writer: inout OpenMetricsWriter) {
        writer.scalar("feedd_cluster_connected", .gauge, help: "1 while the NATS cluster can be reached, else 0.", samples: [([], fleet.isConnected ? 1 : 0)])
        writer.scalar(
            "feedd_cluster_reconnects_total", .counter, help: "Times the connection to the NATS cluster was made again after it was lost.",
            samples: [([], fleet.reconnections)])
        writer.scalar(
            "feedd_cluster_rejected_total", .counter, help: "Records read from the fleet and rejected as not valid, by reason.",
            samples: fleet.rejected.sorted { $0.key < $1.key }.map { ([("reason", $0.key)], $0.value) })
        writer.scalar(
            "feedd_cluster_refused_publications_total", .counter,
            help: "Pages this instance published that the stream refused: their address already held the first one.",
            samples: [([], fleet.refusedPublications)])
        writer.histogram(
            "feedd_cluster_publish_duration_seconds", unit: "seconds", help: "How long publishing a page took until the stream confirmed it.",
            samples: [([], fleet.publishDuration)])
        writer.histogram(
            "feedd_cluster_lease_duration_seconds", unit: "seconds", help: "How long asking the fleet for a page's fetch lease took.",
            samples: [([], fleet.leaseDuration)])
    }
}
