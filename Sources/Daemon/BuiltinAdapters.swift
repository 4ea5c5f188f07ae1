import ExecAdapter
import FeedEngine
import FeedKit
import FileAdapter
import HTTPAdapter
import MergeAdapter
import RandomUserAdapter
import RSSAdapter
import S3FeedAdapter

/// Every source adapter compiled into feedd. Adding an adapter is one line here.
let builtinAdapters = AdapterRegistry([
    FileSource.self,
    RandomUserSource.self,
    S3FeedSource.self,
    ExecSource.self,
    HTTPJSONSource.self,
    RSSSource.self,
    MergeSource.self,
])
