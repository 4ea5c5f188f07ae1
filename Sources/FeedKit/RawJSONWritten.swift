import CSimdJSON
import Glibc

extension RawJSON {
    /// JSON texts that a writer wrote one after another into `text`, each taken as
    /// ``init(written:)`` takes one: text 0 is `text[0..<ends[0]]`, text i + 1 is
    /// `text[ends[i]..<ends[i + 1]]`; nil for one that is not UTF-8 or holds a line break. They
    /// share `text`'s storage, so the `rss` adapter writes a page's entries into one buffer, not
    /// an array each, and they are checked in one pass while all are fine (a JSON text starts and
    /// ends with an ASCII byte, so the whole is UTF-8 exactly when every text is).
    package static func written(_ text: [UInt8], endingAt ends: [Int]) -> [RawJSON?] {
        precondition(
            (ends.first ?? 0) >= 0 && (ends.last ?? 0) <= text.count && zip(ends, ends.dropFirst()).allSatisfy { $0 <= $1 },
            "text ends out of order or outside the text")
        let allFine = text.withUnsafeBufferPointer { text in
            guard let start = text.baseAddress else { return true }
            return memchr(start, 0x0A, text.count) == nil && memchr(start, 0x0D, text.count) == nil && feedd_utf8_is_valid(start, text.count) == 1
        }
        var texts: [RawJSON?] = []
        texts.reserveCapacity(ends.count)
        var start = 0
        for end in ends {
            texts.append(allFine ? RawJSON(checked: text[start..<end]) : RawJSON(written: Array(text[start..<end])))
            start = end
        }
        return texts
    }
}
