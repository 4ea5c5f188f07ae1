import FeedEngine
import FeedKit
import Glibc

/// One client connection: reads request lines, answers them, and carries its subscriptions' pages.
///
/// Runs on the main actor like the feeds it reads. Output goes through an ``OutputQueue``; while
/// that holds a full window of pages the connection's subscriptions stop advancing, and while it
/// holds too many bytes the connection's requests are not read, so a client that stops reading
/// costs a bounded amount of memory and slows nobody else.
@MainActor
final class Connection: SubscriptionOutput {
    let descriptor: Int32
    let peer: PeerCredentials?
    private unowned let server: Server
    private var registration: EventLoop.Registration?
    /// What the event loop watches for: reading while ``isReading``, writing while output waits.
    private var interest: EventLoop.Interest = .readable
    private var readingPaused = false
    /// Input has ended, or the connection is closing: nothing more is read.
    private var readingStopped = false
    private var writeArmed = false
    private var output = OutputQueue()
    private var subscriptions: [String: Subscription] = [:]
    /// Part of a line read so far, or, while discarding an over-long line, nothing.
    private var partialLine: [UInt8] = []
    private var discardingLongLine = false
    /// Bytes read but not yet handled because output backed up mid-read.
    private var unhandledInput: [UInt8] = []
    private var inputEnded = false
    /// Since when the socket has refused output that is waiting; nil while output flows.
    private var stalledSince: ContinuousClock.Instant?
    private var closeWhenFlushed = false
    private(set) var isClosed = false

    init(descriptor: Int32, peer: PeerCredentials?, server: Server) {
        self.descriptor = descriptor
        self.peer = peer
        self.server = server
    }

    func start(greeting: [UInt8]) {
        registration = server.loop.watch(descriptor, for: interest) { [unowned self] readiness in self.handle(readiness) }
        send(greeting)
    }

    private var isReading: Bool { !readingPaused && !readingStopped && !isClosed }

    private func handle(_ readiness: EventLoop.Readiness) {
        if readiness.isReadable, isReading { readAvailable() }
        if readiness.isWritable || readiness.isHangUp, writeArmed, !isClosed { writable() }
        // The peer is gone and nothing is left to read from it: nothing can reach it either.
        if readiness.isHangUp, !isClosed, !isReading, !writeArmed { close() }
    }

    var subscriptionCount: Int { subscriptions.count }
    var bytesSent: Int { output.bytesWritten }
    var subscribedFeeds: [String] { subscriptions.keys.sorted() }

    // MARK: Reading

    /// Reads until the socket has nothing more (EAGAIN) or says end of file, or until this
    /// client had its share of the turn: the event loop reports what is left on its next turn.
    private func readAvailable() {
        for _ in 0..<4 {
            let count = server.readBuffer.withUnsafeMutableBytes { read(descriptor, $0.baseAddress, $0.count) }
            if count > 0 {
                server.readBuffer.withUnsafeBytes { handleInput(UnsafeRawBufferPointer(rebasing: $0[0..<count])) }
                if !isReading { return }
            } else if count == 0 {
                endOfInput()
                return
            } else {
                if errno == EINTR { continue }
                if errno != EAGAIN && errno != EWOULDBLOCK { close() }
                return
            }
        }
    }

    /// Splits input into lines and handles each; stops (keeping the rest) if output backs up.
    private func handleInput(_ bytes: UnsafeRawBufferPointer) {
        var start = 0
        while start < bytes.count {
            if readingPaused || closeWhenFlushed || isClosed {
                if !isClosed && !closeWhenFlushed { unhandledInput.append(contentsOf: bytes[start...]) }
                return
            }
            guard let newline = bytes[start...].firstIndex(of: UInt8(ascii: "\n")) else {
                appendPartial(bytes[start...])
                return
            }
            let segment = bytes[start..<newline]
            start = newline + 1
            if discardingLongLine {
                discardingLongLine = false
                continue
            }
            if partialLine.isEmpty {
                handleLine(Array(segment)[...])
            } else {
                appendPartial(segment)
                guard !discardingLongLine else {
                    discardingLongLine = false
                    continue
                }
                let line = partialLine
                partialLine = []
                handleLine(line[...])
            }
        }
    }

    private func appendPartial(_ bytes: Slice<UnsafeRawBufferPointer>) {
        guard !discardingLongLine else { return }
        if partialLine.count + bytes.count > server.settings.maxLineBytes {
            partialLine = []
            discardingLongLine = true
            send(Message.error(.lineTooLong, "request line longer than \(server.settings.maxLineBytes) bytes; skipped to the next newline"))
            return
        }
        partialLine.append(contentsOf: bytes)
    }

    private func handleLine(_ line: ArraySlice<UInt8>) {
        var line = line
        if line.last == UInt8(ascii: "\r") { line = line.dropLast() }
        guard line.contains(where: { $0 != 0x20 && $0 != 0x09 }) else { return }
        if line.count > server.settings.maxLineBytes {
            send(Message.error(.lineTooLong, "request line longer than \(server.settings.maxLineBytes) bytes"))
            return
        }
        switch RequestDecoder.decode(line) {
        case .success(let decoded):
            server.handle(decoded.request, id: decoded.id, from: self)
        case .failure(let error):
            send(Message.error(error.code, error.message, feed: error.feed, id: error.id))
        }
    }

    private func endOfInput() {
        inputEnded = true
        stopReading()
        closeIfFinished()
    }

    /// After the client stops sending, the connection stays until every `next` it sent is
    /// answered and written, so `echo "next users 3" | socat - UNIX-CONNECT:…` works.
    private func closeIfFinished() {
        guard !isClosed else { return }
        let waiting = subscriptions.values.contains { $0.hasPendingRequests }
        if (inputEnded && !waiting || closeWhenFlushed) && output.isEmpty { close() }
    }

    // MARK: Subscriptions

    func subscription(for feed: String) -> Subscription? { subscriptions[feed] }

    func setSubscription(_ subscription: Subscription?, for feed: String) {
        subscriptions[feed]?.cancel()
        subscriptions[feed] = subscription
    }

    var canTakePage: Bool { !isClosed && output.pageCount < server.settings.pageWindow }

    func receive(_ event: SubscriptionEvent, from subscription: Subscription) {
        switch event {
        case .page(let page, let replyTo):
            output.append(page.encoded)
            output.append(replyTo.map { SharedBytes(Message.closing(replyTo: $0)) } ?? Message.sharedPlainClosing, endsPage: true)
        case .end(let feed, let page, let replyTo):
            var line = Message(type: "end")
            line.field("feed", feed)
            line.field("page", page)
            send(line.line(replyTo: replyTo))
            closeIfFinished()
        case .upstreamFailing(let feed, let message, let retryIn, let replyTo):
            send(Message.error(.upstream, message, feed: feed, id: replyTo, retryInMilliseconds: retryIn.wholeMilliseconds))
        case .refreshed(let feed, let generation, let replyTo):
            send(Message.refreshed(feed: feed, generation: generation, id: replyTo))
        case .removed(let feed):
            if subscriptions[feed] === subscription { subscriptions[feed] = nil }
            send(Message.error(.unknownFeed, "feed \"\(feed)\" was removed by a configuration reload", feed: feed))
        case .takenOver(let feed, let consumer):
            if subscriptions[feed] === subscription { subscriptions[feed] = nil }
            var line = Message(type: "unsubscribed")
            line.field("feed", feed)
            line.field("consumer", consumer)
            line.field("reason", "consumer \"\(consumer)\" subscribed on another connection")
            send(line.line(replyTo: nil))
        }
    }

    // MARK: Writing

    func send(_ line: [UInt8]) {
        guard !isClosed else { return }
        output.append(SharedBytes(line))
        flush()
    }

    /// Sends `line` and closes the connection once everything queued is written.
    func sendFinal(_ line: [UInt8]) {
        send(line)
        closeWhenFlushed = true
        stopReading()
        closeIfFinished()
    }

    func flush() {
        guard !isClosed, !writeArmed else { return }
        switch output.flush(to: descriptor) {
        case .drained:
            // A client that stopped sending leaves once its last answer is out.
            if inputEnded { closeIfFinished() }
        case .wouldBlock:
            armWriting()
        case .failed:
            close()
            return
        }
        if output.byteCount > server.settings.inputPauseBytes { pauseReading() }
    }

    private func armWriting() {
        writeArmed = true
        watchForStall()
        updateInterest()
    }

    private func writable() {
        switch output.flush(to: descriptor) {
        case .wouldBlock:
            return
        case .failed:
            close()
            return
        case .drained:
            writeArmed = false
            stalledSince = nil
            updateInterest()
        }
        resumeReading()
        for subscription in Array(subscriptions.values) where subscription.wantsPage {
            subscription.feed.pump(subscription)
        }
        closeIfFinished()
    }

    /// A client that leaves its output unread past `stall_timeout` is told why and disconnected,
    /// so it cannot hold its queued pages and its slot forever.
    private func watchForStall() {
        let since = ContinuousClock.now
        stalledSince = since
        let timeout = server.settings.stallTimeout
        Task { [weak self] in
            try? await Task.sleep(for: timeout)
            guard let self, !self.isClosed, self.stalledSince == since else { return }
            self.server.logger(for: self.peer).warning("disconnecting \(self.peerDescription): it read nothing for \(timeout.wholeMilliseconds / 1000) s")
            self.output.append(SharedBytes(Message.error(.tooSlow, "disconnected: no output read for \(timeout.wholeMilliseconds) ms")))
            _ = self.output.flush(to: self.descriptor)
            self.close()
        }
    }

    var peerDescription: String { peer?.description ?? "an unknown peer" }

    private func pauseReading() {
        guard isReading else { return }
        readingPaused = true
        updateInterest()
    }

    private func resumeReading() {
        guard readingPaused, !isClosed else { return }
        readingPaused = false
        updateInterest()
        let pending = unhandledInput
        unhandledInput = []
        pending.withUnsafeBytes { handleInput($0) }
    }

    private func stopReading() {
        readingStopped = true
        readingPaused = false
        unhandledInput = []
        updateInterest()
    }

    private func updateInterest() {
        guard let registration, !isClosed else { return }
        var wanted: EventLoop.Interest = []
        if isReading { wanted.insert(.readable) }
        if writeArmed { wanted.insert(.writable) }
        guard wanted != interest else { return }
        interest = wanted
        server.loop.change(registration, to: wanted)
    }

    // MARK: Closing

    /// Ends the connection now: subscriptions are cancelled, unsent output is dropped.
    func close() {
        guard !isClosed else { return }
        isClosed = true
        for subscription in subscriptions.values { subscription.cancel() }
        subscriptions.removeAll()
        unhandledInput = []
        if let registration { server.loop.stopWatching(registration) }
        _ = Glibc.close(descriptor)
        server.connectionClosed(self)
    }
}
