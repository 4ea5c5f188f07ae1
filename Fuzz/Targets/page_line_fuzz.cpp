// Fuzz target: a page line as a NATS peer could publish it, checked by CPageLine before any
// instance serves it. Invariants: the check never crashes or reads out of bounds, and a line it
// accepts is one JSON object whose `items` array holds exactly the count it reported.
#include "page_line.h"

#include <simdjson.h>
#include <cstdlib>

extern "C" int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
    size_t items = 0;
    feedd_page_line_problem problem = feedd_page_line_check(data, size, "users", 5, 7, 3, &items);
    if (problem != feedd_page_line_ok) return 0;
    simdjson::dom::parser parser;
    simdjson::dom::array array;
    if (parser.parse(data, size, true)["items"].get_array().get(array) != simdjson::SUCCESS) std::abort();
    if (array.size() != items) std::abort();
    return 0;
}
