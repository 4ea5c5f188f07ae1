import FeedEngine
import FeedKit
import Glibc

/// What a connection tells whoever owns it, the only way it reaches anything beyond its socket
/// (as a NIO handler talks to its context): the requests it decoded, that it can take pages
/// again, and that it closed. It never calls the feeds.
@MainActor
protocol ConnectionContext: AnyObject {
    /// A request line was decoded.
    func connection(_ connection: Connection, received request: Request, id: RequestID?)
    /// Its output drained: it can take pages again.
    func connectionCanTakePages(_ connection: Connection)
    /// Whether a `next` it sent still waits for pages or `end` (a client that half-closed is let
    /// go once they are answered).
    func connectionHasPendingRequests(_ connection: Connection) -> Bool
    /// It read nothing for `stallTimeout` and is being disconnected.
    func connectionStalled(_ connection: Connection, for stallTimeout: Duration)
    /// It closed; its descriptor is gone.
    func connectionClosed(_ connection: Connection)
}

/// What connections work within: their context, the event loop, and the limits of the settings
/// they connected under (a reload applies to later connections). One instance serves every
/// connection made under the same settings, so an idle connection costs a reference to it.
@MainActor
final class ConnectionEnvironment {
    /// Whoever owns the connections.
    unowned let context: any ConnectionContext
    let loop: EventLoop
    let maxLineBytes: Int
    /// Pages a connection may hold unsent before the engine stops handing it more.
    let pageWindow: Int
    /// Unsent bytes above which its requests are not read.
    let inputPauseBytes: Int
    /// How long its output may stay unwritable before it is disconnected.
    let stallTimeout: Duration

    init(_ settings: ServerSettings, loop: EventLoop, context: any ConnectionContext) {
        self.context = context
        self.loop = loop
        maxLineBytes = settings.maxLineBytes
        pageWindow = settings.pageWindow
        inputPauseBytes = settings.inputPauseBytes
        stallTimeout = settings.stallTimeout
    }
}

/// One client connection: reads request lines and reports them to its context, writes the lines
/// it is given, and is the sink of its client's events (``ClientSink``).
///
/// Runs on the main actor like the feeds it reads. Output goes through an ``OutputQueue``; while
/// that holds a full window of pages the engine stops handing it pages, and while it holds too
/// many bytes its requests are not read, so a client that stops reading costs a bounded amount
/// of memory and slows nobody else.
@MainActor
final class Connection: ClientHandle {
    let descriptor: Int32
    let peer: PeerCredentials?
    /// The id the service knows this connection's client by.
    let clientID: ClientID
    private let environment: ConnectionEnvironment
    private var context: any ConnectionContext { environment.context }
    private var loop: EventLoop { environment.loop }
    private var registration: EventLoop.Registration?
    private var state = ConnectionState.reading
    /// What the event loop watches for: requests while reading, writability while output waits.
    private var interest: EventLoop.Interest = .readable
    private var output = OutputQueue()
    /// Set while the socket refuses output that is waiting: the timer that ends the connection
    /// if that lasts `stall_timeout`. Nil while output flows.
    private var stallTimer: EventLoop.Timer?
    /// Whether this connection's turn is under way (its handler runs): output queued now is
    /// written now. Output queued outside it waits for a turn of its own (``EventLoop/serveWrite(_:)``).
    private var isInTurn = false
    /// Whether the loop was asked for that turn and has not served it yet.
    private var awaitsWriteTurn = false
    private var lines: LineSplitter
    /// Input read but not yet split because reading paused mid-read, and how much of it is done;
    /// consumed from the front without copying what is left.
    private var unhandledInput: [UInt8] = []
    private var unhandledOffset = 0
    /// What keeps answers queued that would otherwise be written now (see ``OutputHold``).
    private var hold = OutputHold()
    /// The last `next` line this client sent, and what it decoded to. A consumer sends the same
    /// `next` line every round (its `ack` names a new page each time), so it is parsed once:
    /// decoding a JSON request line was a quarter of the main thread's work per round trip in an
    /// ack storm (callgrind of the C client's storm).
    private var lastNextLine: [UInt8] = []
    private var lastNext: (request: Request, id: RequestID?)?
    /// The longest `next` line kept for that.
    private static let longestKeptLine = 256
    /// What this turn asked, and what the event loop was last told to expect of the next one.
    private var asked = AskedRequests()
    private var expected: TurnOrder.Kind?

    init(descriptor: Int32, peer: PeerCredentials?, clientID: ClientID, environment: ConnectionEnvironment) {
        self.descriptor = descriptor
        self.peer = peer
        self.clientID = clientID
        self.environment = environment
        lines = LineSplitter(maxLineBytes: environment.maxLineBytes)
    }

    func start(greeting: [UInt8]) {
        registration = loop.watch(
            descriptor, for: interest, edgeTriggered: true, peek: { [unowned self] in self.peekRequests() },
            handler: { [unowned self] readiness in self.handle(readiness) })
        // The fresh socket's buffer takes it: written in the accepting turn, not one more turn each.
        inTurn { send(greeting) }
    }

    /// Runs `work` as this connection's turn: what it queues is written before it returns.
    private func inTurn(_ work: () -> Void) {
        let outer = isInTurn
        isInTurn = true
        defer { isInTurn = outer }
        work()
    }

    var isClosed: Bool { state.isClosed }

    private func handle(_ readiness: EventLoop.Readiness) {
        // The loop has taken this socket out of its order: a write owed from now on asks anew.
        awaitsWriteTurn = false
        asked = AskedRequests()
        var inputLeft = false
        inTurn {
            if readiness.isReadable, state.isReading { inputLeft = readAvailable(readiness) }
            if readiness.isWritable || readiness.isHangUp, stallTimer != nil, !state.isClosed {
                writable()
            } else if readiness.isWritable {
                // Output queued outside the turn (``serveWrite``): written now, in its turn.
                writeHeldOutput()
            }
        }
        // Told before it is queued again, so that input left over goes in the line it asked for.
        if let kind = asked.kind, kind != expected, let registration {
            expected = kind
            loop.expect(registration, kind)
        }
        if inputLeft, let registration { loop.serveAgain(registration, readiness) }
        // The peer is gone and nothing is left to read from it: nothing can reach it either.
        if readiness.isHangUp, !state.isClosed, !state.isReading, stallTimer == nil { close() }
    }

    var bytesSent: Int { output.bytesWritten }

    // MARK: Reading

    /// How much one read takes at most.
    static let readSize = 16 * 1024
    /// Output of at most this much is written when it is queued, in a turn or not (see ``flush()``).
    static let writtenOutsideTurnBytes = 4 * 1024

    /// The connection's own read buffer, made (uninitialised) at its first read, so a connection
    /// that never sends holds none. Freed in `deinit`, not at `close()`: a request read from it
    /// may close the connection while the rest of the read is still being split. (Touched only on
    /// the main actor, and in `deinit`, when nothing else can.)
    nonisolated(unsafe) private var readBuffer: UnsafeMutableRawPointer?

    deinit {
        readBuffer?.deallocate()
    }

    /// Reads until the socket has nothing more (a read shorter than the buffer, or EAGAIN) or
    /// says end of file, or until this client had its share of the turn: then it returns true, and
    /// the event loop is to serve it again, since epoll reports only what arrives later (the socket
    /// is edge-triggered). (Not reading again after a short read saves a read that would only say
    /// EAGAIN: one system call of the two a request usually costs. But when the client had
    /// already half-closed as epoll reported it, the end of file is read too: no later report
    /// would come for it.) Input left while reading pauses is reported when reading resumes, as
    /// the change of interest makes epoll look again.
    private func readAvailable(_ readiness: EventLoop.Readiness) -> Bool {
        let start = readBuffer ?? UnsafeMutableRawPointer.allocate(byteCount: Self.readSize, alignment: 16)
        readBuffer = start
        let buffer = UnsafeMutableRawBufferPointer(start: start, count: Self.readSize)
        for _ in 0..<4 {
            let count = read(descriptor, buffer.baseAddress, buffer.count)
            if count > 0 {
                asked.read(count)
                answerTogether { handleInput(UnsafeRawBufferPointer(rebasing: buffer[0..<count])) }
                if !state.isReading || (count < buffer.count && !readiness.peerStoppedSending) { return false }
            } else if count == 0 {
                endOfInput()
                return false
            } else {
                if errno == EINTR { continue }
                if errno != EAGAIN && errno != EWOULDBLOCK { close() }
                return false
            }
        }
        return true
    }

    /// What the requests waiting on the socket ask, looked at without taking them (MSG_PEEK):
    /// the event loop's guess before this connection's first request, when no turn tells yet
    /// (nil: no whole request waits). A new connection's first `ping` then goes ahead of a
    /// thousand new followers' `subscribe`s, each of whose turns writes a window of pages.
    private func peekRequests() -> TurnOrder.Kind? {
        withUnsafeTemporaryAllocation(byteCount: AskedRequests.briefInputBytes + 1, alignment: 1) { buffer in
            let count = recv(descriptor, buffer.baseAddress, buffer.count, Int32(MSG_PEEK | MSG_DONTWAIT))
            guard count > 0 else { return nil }
            var waiting = AskedRequests()
            waiting.read(count)
            guard count <= AskedRequests.briefInputBytes else { return waiting.kind }
            var splitter = LineSplitter(maxLineBytes: environment.maxLineBytes)
            _ = splitter.split(UnsafeRawBufferPointer(rebasing: buffer[0..<count])) { piece in
                guard case .line(let line) = piece, let request = Self.request(in: line) else { return true }
                let isBrief = Request.mayBeBrief(request) && (try? RequestDecoder.decode(request).get())?.request.isBrief ?? false
                waiting.asked(brief: isBrief)
                return true
            }
            return waiting.kind
        }
    }

    /// Answers the requests `handle` decodes, and writes their answers together once it returns:
    /// one write for requests a client sent together, not one each (unless an ack among them holds
    /// them, ``holdOutputForAcknowledgement()``).
    private func answerTogether(_ handle: () -> Void) {
        hold.startAnswering()
        handle()
        hold.stopAnswering()
        writeHeldOutput()
    }

    /// Handles every line in `bytes`; what is left when reading pauses is kept for ``resumeReading()``.
    private func handleInput(_ bytes: UnsafeRawBufferPointer) {
        let consumed = lines.split(bytes) { piece in
            answer(piece)
            return state.isReading
        }
        if consumed < bytes.count, state == .paused {
            unhandledInput.append(contentsOf: bytes[consumed...])
        }
    }

    private func answer(_ piece: LineSplitter.Piece) {
        switch piece {
        case .line(let line): handleLine(line)
        case .tooLong:
            asked.asked(brief: false)
            send(Message.error(.lineTooLong, "request line longer than \(environment.maxLineBytes) bytes; skipped to the next newline"))
        }
    }

    private func handleLine(_ line: ArraySlice<UInt8>) {
        guard let line = Self.request(in: line) else { return }
        if let lastNext, Self.same(lastNextLine, line) {
            asked.asked(brief: false)
            return context.connection(self, received: lastNext.request, id: lastNext.id)
        }
        switch RequestDecoder.decode(line) {
        case .success(let (request, id)):
            asked.asked(brief: request.isBrief)
            if case .next = request, line.count <= Self.longestKeptLine {
                lastNextLine = Array(line)
                lastNext = (request, id)
            }
            context.connection(self, received: request, id: id)
        case .failure(let error):
            asked.asked(brief: false)
            send(Message.error(error.code, error.message, feed: error.feed, id: error.id))
        }
    }

    /// The request a line holds, without its carriage return; nil for a blank line.
    private nonisolated static func request(in line: ArraySlice<UInt8>) -> ArraySlice<UInt8>? {
        var line = line
        if line.last == UInt8(ascii: "\r") { line = line.dropLast() }
        return isBlank(line) ? nil : line
    }

    /// Whether a line holds only spaces and tabs. (Not a closure in `handleLine`: that closure
    /// was taken as the main actor's and checked its executor at each call, callgrind.)
    private nonisolated static func isBlank(_ line: ArraySlice<UInt8>) -> Bool {
        !line.contains { $0 != 0x20 && $0 != 0x09 }
    }

    /// Whether two lines hold the same bytes.
    private nonisolated static func same(_ kept: [UInt8], _ line: ArraySlice<UInt8>) -> Bool {
        kept.withUnsafeBytes { kept in
            line.withUnsafeBytes { line in
                guard let left = kept.baseAddress, let right = line.baseAddress else { return kept.count == line.count }
                return kept.count == line.count && memcmp(left, right, kept.count) == 0
            }
        }
    }

    /// The client half-closed: a last line it sent without a newline is answered like any other.
    private func endOfInput() {
        // Handled while still reading, so that its first answer cannot close the connection
        // before the rest of the request is under way.
        if let last = lines.finish() { handleLine(last) }
        guard state.endInput() else { return }
        updateInterest()
        closeIfFinished()
    }

    /// After the client stops sending, the connection stays until every `next` it sent is
    /// answered and written, so `echo "next users 3" | socat - UNIX-CONNECT:…` works.
    private func closeIfFinished() {
        guard state.mayFinish else { return }
        if state.isFinished(outputEmpty: output.isEmpty, requestsPending: context.connectionHasPendingRequests(self)) { close() }
    }

    // MARK: Events

    var canTakePage: Bool { !state.isClosed && output.pageCount < environment.pageWindow }

    func receive(_ event: ClientEvent) {
        switch event {
        case .page(let page, let replyTo):
            // A pushed page goes out as the one buffer every follower shares; a reply's id goes
            // before the page's closing.
            if let id = RequestID(replyTag: replyTo) {
                output.append(page.body)
                output.append(SharedBytes(Message.closing(replyTo: id)), endsPage: true)
            } else {
                output.append(page.line, endsPage: true)
            }
        case .end(let feed, let page, let replyTo):
            var line = Message(type: "end")
            line.field("feed", feed)
            line.field("page", page)
            send(line.line(replyTo: RequestID(replyTag: replyTo)))
            closeIfFinished()
        case .upstreamFailing(let feed, let message, let retryIn, let replyTo):
            send(Message.error(.upstream, message, feed: feed, id: RequestID(replyTag: replyTo), retryInMilliseconds: retryIn.wholeMilliseconds))
        case .refreshed(let feed, let generation, let replyTo):
            send(Message.refreshed(feed: feed, generation: generation, id: RequestID(replyTag: replyTo)))
        case .unsubscribed(let feed, .feedRemoved):
            send(Message.error(.unknownFeed, "feed \"\(feed)\" was removed by a configuration reload", feed: feed))
        case .unsubscribed(let feed, .takenOver(let consumer)):
            var line = Message(type: "unsubscribed")
            line.field("feed", feed)
            line.field("consumer", consumer)
            // SPEC §8: the same reason whether the other connection is on this instance or another.
            line.field("reason", "takeover")
            line.field("message", "consumer \"\(consumer)\" subscribed on another connection")
            send(line.line(replyTo: nil))
        }
    }

    // MARK: Writing

    func send(_ line: [UInt8]) {
        send(SharedBytes(line))
    }

    /// Queues bytes that may be shared with other connections, and writes what the socket takes.
    func send(_ bytes: SharedBytes) {
        guard !state.isClosed else { return }
        output.append(bytes)
        flush()
    }

    /// Sends `line` and closes the connection once everything queued is written.
    func sendFinal(_ line: [UInt8]) {
        send(line)
        guard state.finish() else { return }
        unhandledInput = []
        unhandledOffset = 0
        updateInterest()
        closeIfFinished()
    }

    /// Writes what is queued, in this connection's turn; outside it, asks the loop for a turn to
    /// write in (a page pushed to every follower in one job), so that no large write is done
    /// outside the bounds of a turn. A few answers (an ack's, once its commit is durable) are
    /// written at once wherever they are queued: one `sendmsg` of a few hundred bytes, which a
    /// turn of its own would cost more than (the ack storm's CPU per ack rose 2-3 µs with it).
    func flush() {
        guard !state.isClosed else { return }
        // Whether or not the socket takes more now, a client whose unread answers are over the
        // bound gets no more requests read until they drain (SPEC §5, flow control).
        defer { if output.byteCount > environment.inputPauseBytes, state.pause() { updateInterest() } }
        guard stallTimer == nil, !hold.isHolding else { return }
        guard isInTurn || output.byteCount <= Self.writtenOutsideTurnBytes else { return askForWriteTurn() }
        switch output.flush(to: descriptor) {
        case .drained:
            // A client that stopped sending leaves once its last answer is out.
            closeIfFinished()
        case .wouldBlock:
            outputBlocked()
        case .failed:
            close()
        }
    }

    private func askForWriteTurn() {
        guard !awaitsWriteTurn, !output.isEmpty, let registration else { return }
        awaitsWriteTurn = true
        loop.serveWrite(registration)
    }

    /// The socket is full: watch for room, and end the connection if none comes within
    /// `stall_timeout`, so a client cannot hold its queued pages and its slot forever.
    private func outputBlocked() {
        let timeout = environment.stallTimeout
        let timer = loop.schedule(after: timeout) { [weak self] in
            guard let self, !self.state.isClosed else { return }
            self.context.connectionStalled(self, for: timeout)
            self.output.append(SharedBytes(Message.error(.tooSlow, "disconnected: no output read for \(timeout.wholeMilliseconds) ms")))
            _ = self.output.flush(to: self.descriptor)
            self.close()
        }
        stallTimer = timer
        updateInterest()
    }

    /// Called for an `ack` as it is handled: if the answers to requests that came before it in
    /// the same read are still queued, they wait for the ack's answer (a durable ack waits for a
    /// group commit) and leave with it in one write, as the client waits for all of them anyway.
    /// True if they do: call ``releaseOutputHold()`` once the ack is answered.
    func holdOutputForAcknowledgement() -> Bool {
        hold.holdForAcknowledgement(answersQueued: !output.isEmpty)
    }

    /// The ack that ``holdOutputForAcknowledgement()`` held the output for is answered.
    func releaseOutputHold() {
        hold.release()
        writeHeldOutput()
    }

    /// Writes what a hold kept queued once nothing holds it; if that makes room in a page window
    /// that was full (the engine stopped handing this connection pages), says it can take pages.
    private func writeHeldOutput() {
        guard !hold.isHolding, !state.isClosed else { return }
        let windowWasFull = output.pageCount >= environment.pageWindow
        flush()
        if windowWasFull, canTakePage, stallTimer == nil { context.connectionCanTakePages(self) }
    }

    private func writable() {
        switch output.flush(to: descriptor) {
        case .wouldBlock:
            return
        case .failed:
            close()
            return
        case .drained:
            if let stallTimer { loop.cancel(stallTimer) }
            stallTimer = nil
            updateInterest()
        }
        resumeReading()
        context.connectionCanTakePages(self)
        closeIfFinished()
    }

    var peerDescription: String { peer?.description ?? "an unknown peer" }

    /// Reads again once the backlog is written, starting with what was read before the pause.
    private func resumeReading() {
        guard state.resume() else { return }
        updateInterest()
        // Taken out while it is split, since a request may close the connection and drop it.
        let pending = unhandledInput
        let offset = unhandledOffset
        unhandledInput = []
        unhandledOffset = 0
        guard offset < pending.count else { return }
        asked.read(pending.count - offset)
        var consumed = 0
        answerTogether {
            consumed = pending.withUnsafeBytes { bytes in
                lines.split(UnsafeRawBufferPointer(rebasing: bytes[offset...])) { piece in
                    answer(piece)
                    return state.isReading
                }
            }
        }
        if state == .paused, offset + consumed < pending.count {
            unhandledInput = pending
            unhandledOffset = offset + consumed
        }
    }

    private func updateInterest() {
        guard let registration, !state.isClosed else { return }
        var wanted: EventLoop.Interest = []
        if state.isReading { wanted.insert(.readable) }
        if stallTimer != nil { wanted.insert(.writable) }
        guard wanted != interest else { return }
        interest = wanted
        loop.change(registration, to: wanted)
    }

    // MARK: Closing

    /// Ends the connection now: unsent output is dropped, and its context told (which ends its
    /// subscriptions).
    func close() {
        guard state.close() else { return }
        if let stallTimer { loop.cancel(stallTimer) }
        stallTimer = nil
        unhandledInput = []
        // What was written stays counted (the metrics' sent bytes); only the unsent rest goes.
        output.dropUnsent()
        if let registration { loop.stopWatching(registration) }
        _ = Glibc.close(descriptor)
        context.connectionClosed(self)
    }
}

/// What one turn of a connection asked, or the input waiting on its socket: how many bytes, and
/// whether every request among them was brief (``Request/isBrief``). Its ``kind`` is what the
/// event loop expects of the connection's next turn (``TurnOrder/Kind``).
struct AskedRequests {
    /// Input over this much is ordinary whatever it asks: a `ping` or a few are a brief turn, a
    /// pipeline of thousands is a long one.
    static let briefInputBytes = 256

    private var bytes = 0
    private var requests = 0
    private var allBrief = true

    mutating func read(_ count: Int) {
        bytes += count
    }

    mutating func asked(brief: Bool) {
        requests += 1
        allBrief = allBrief && brief
    }

    /// Nil when it asked nothing yet, within the brief input: nothing tells.
    var kind: TurnOrder.Kind? {
        if bytes > Self.briefInputBytes { return .ordinary }
        if requests == 0 { return nil }
        return allBrief ? .brief : .ordinary
    }
}
