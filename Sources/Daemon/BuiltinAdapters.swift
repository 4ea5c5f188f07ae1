import FeedEngine
import FeedKit
import FileAdapter

/// Every source adapter compiled into feedd. Adding an adapter is one line here.
let builtinAdapters = AdapterRegistry([
    FileSource.self,
])
