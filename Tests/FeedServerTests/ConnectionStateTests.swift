import Testing

@testable import FeedServer

/// Every transition of a connection's life (issue 14: one state instead of seven flags).
@Suite struct ConnectionStateTests {
    /// Applies `transition` to a copy of `state`: whether it changed anything, and the state after.
    func apply(_ state: ConnectionState, _ transition: (inout ConnectionState) -> Bool) -> (changed: Bool, state: ConnectionState) {
        var state = state
        let changed = transition(&state)
        return (changed, state)
    }

    let transitions: [(name: String, run: (inout ConnectionState) -> Bool)] = [
        ("pause", { $0.pause() }), ("resume", { $0.resume() }), ("endInput", { $0.endInput() }),
        ("finish", { $0.finish() }), ("close", { $0.close() }),
    ]

    /// Every state and transition, with the state it must lead to (nil: no change).
    let expected: [ConnectionState: [String: ConnectionState]] = [
        .reading: ["pause": .paused, "endInput": .inputEnded, "finish": .finishing, "close": .closed],
        .paused: ["resume": .reading, "endInput": .inputEnded, "finish": .finishing, "close": .closed],
        .inputEnded: ["finish": .finishing, "close": .closed],
        .finishing: ["close": .closed],
        .closed: [:],
    ]

    @Test func every_transition_from_every_state() {
        for (start, outcomes) in expected {
            for transition in transitions {
                let (changed, after) = apply(start, transition.run)
                if let target = outcomes[transition.name] {
                    #expect(changed && after == target, "\(start) --\(transition.name)--> \(after)")
                } else {
                    #expect(!changed && after == start, "\(start) --\(transition.name)--> \(after) should change nothing")
                }
            }
        }
    }

    @Test func only_a_reading_connection_is_watched_for_requests() {
        #expect(ConnectionState.reading.isReading)
        for state in [ConnectionState.paused, .inputEnded, .finishing, .closed] { #expect(!state.isReading) }
    }

    @Test func a_half_closed_client_leaves_once_answered_and_a_finishing_one_once_written() {
        #expect(!ConnectionState.inputEnded.isFinished(outputEmpty: true, requestsPending: true), "a next still waits")
        #expect(!ConnectionState.inputEnded.isFinished(outputEmpty: false, requestsPending: false), "answers unwritten")
        #expect(ConnectionState.inputEnded.isFinished(outputEmpty: true, requestsPending: false))
        #expect(!ConnectionState.finishing.isFinished(outputEmpty: false, requestsPending: false))
        #expect(ConnectionState.finishing.isFinished(outputEmpty: true, requestsPending: true), "bye ends it even with a next waiting")
        for state in [ConnectionState.reading, .paused, .closed] {
            #expect(!state.isFinished(outputEmpty: true, requestsPending: false))
        }
    }
}

/// Request lines cut from a stream however it is chunked (issue 14: linear line splitting).
@Suite struct LineSplitterTests {
    func split(_ chunks: [String], max: Int = 16) -> [String] {
        var splitter = LineSplitter(maxLineBytes: max)
        var pieces: [String] = []
        for chunk in chunks {
            _ = Array(chunk.utf8).withUnsafeBytes { bytes in
                splitter.split(bytes) { piece in
                    switch piece {
                    case .line(let line): pieces.append(String(decoding: line, as: UTF8.self))
                    case .tooLong: pieces.append("<too long>")
                    }
                    return true
                }
            }
        }
        if let last = splitter.finish() { pieces.append("last:" + String(decoding: last, as: UTF8.self)) }
        return pieces
    }

    @Test func lines_across_chunks_and_a_last_line_without_newline() {
        #expect(split(["pi", "ng\nsta", "tus\n", "quit"]) == ["ping", "status", "last:quit"])
        #expect(split(["a\n\nb\n"]) == ["a", "", "b"])
    }

    @Test func an_over_long_line_is_reported_once_and_skipped() {
        #expect(split([String(repeating: "x", count: 10), String(repeating: "x", count: 10), "x\nok\n"]) == ["<too long>", "ok"])
        #expect(split([String(repeating: "x", count: 17) + "\nok\n"]) == ["<too long>", "ok"])
        #expect(split([String(repeating: "x", count: 16) + "\n"]) == [String(repeating: "x", count: 16)])
        #expect(split([String(repeating: "x", count: 40)]) == ["<too long>"], "an over-long last line is not answered")
    }

    @Test func stopping_leaves_the_rest_unconsumed() {
        var splitter = LineSplitter(maxLineBytes: 64)
        var seen: [String] = []
        let consumed = Array("one\ntwo\nthree\n".utf8).withUnsafeBytes { bytes in
            splitter.split(bytes) { piece in
                if case .line(let line) = piece { seen.append(String(decoding: line, as: UTF8.self)) }
                return false
            }
        }
        #expect(seen == ["one"] && consumed == 4)
    }

    @Test func a_megabyte_of_short_lines_in_small_chunks_splits_in_linear_time() {
        let line = Array("status\n".utf8)
        let stream = Array([[UInt8]](repeating: line, count: 150_000).joined())
        var splitter = LineSplitter(maxLineBytes: 65_536)
        var count = 0
        let elapsed = ContinuousClock().measure {
            stream.withUnsafeBytes { bytes in
                var offset = 0
                while offset < bytes.count {
                    let end = min(offset + 4093, bytes.count)
                    offset += splitter.split(UnsafeRawBufferPointer(rebasing: bytes[offset..<end])) { _ in
                        count += 1
                        return true
                    }
                }
            }
        }
        #expect(count == 150_000)
        #expect(elapsed < .seconds(5))
    }
}
