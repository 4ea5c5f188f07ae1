import FeedEngine
import FeedServer
import Testing

/// The socket protocol's parser keeps its own copy of limits the engine enforces, so that it
/// builds without the engine (the request-line fuzz target). This target sees both modules, so
/// the copies are pinned here: a change to one side alone fails.
@Suite struct ProtocolLimitsTests {
    @Test func the_consumers_ops_largest_limit_is_the_engines_page_of_consumers() {
        #expect(RequestDecoder.consumerPageLimits.upperBound == ConsumerPage.maximumCount)
        #expect(RequestDecoder.consumerPageLimits.contains(RequestDecoder.defaultConsumerPage))
    }
}
