// A tiny C API over simdjson's DOM parser, used only to validate: feedd keeps a JSON line's own
// bytes instead of building a tree for it, and must first know they are one valid JSON text.
#include "json_validator.h"

#include <simdjson.h>

extern "C" int feedd_json_is_valid(const unsigned char *bytes, size_t length) {
    // One parser per thread: it keeps its buffers between calls, so small documents cost no
    // allocation. simdjson reads up to SIMDJSON_PADDING bytes past the end; with
    // realloc_if_needed it copies the input to a padded buffer first.
    thread_local simdjson::dom::parser parser;
    auto result = parser.parse(reinterpret_cast<const uint8_t *>(bytes), length, true);
    return result.error() == simdjson::SUCCESS ? 1 : 0;
}
