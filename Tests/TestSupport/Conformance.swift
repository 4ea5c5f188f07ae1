import ConformanceKit

/// The adapter conformance kit, which lives in ConformanceKit so that `feedd plugin check` runs
/// it too; adapter tests reach it through TestSupport.
public typealias AdapterConformance = ConformanceKit.AdapterConformance
public typealias DiscardingSink = ConformanceKit.DiscardingSink
