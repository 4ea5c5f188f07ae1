// A page line from the fleet checked with simdjson's DOM parser: a NATS message is served to
// clients as it is, so its whole structure is checked, at the speed of the parser (Foundation's
// JSONSerialization took milliseconds a page, on the path of every page between instances).
#include "page_line.h"

#include <simdjson.h>
#include <string_view>

namespace {

feedd_page_line_problem check_item(simdjson::dom::element item) {
    simdjson::dom::object fields;
    if (item.get_object().get(fields) != simdjson::SUCCESS) return feedd_page_line_item;
    bool id = false, data = false, feed = false;
    for (auto field : fields) {
        if (field.key == "id" && !id) {
            if (!field.value.is_string()) return feedd_page_line_item;
            id = true;
        } else if (field.key == "data" && !data) {
            data = true;
        } else if (field.key == "feed" && !feed) {
            if (!field.value.is_string()) return feedd_page_line_item;
            feed = true;
        } else {
            return feedd_page_line_item;
        }
    }
    return id && data ? feedd_page_line_ok : feedd_page_line_item;
}

}  // namespace

extern "C" feedd_page_line_problem feedd_page_line_check(
    const unsigned char *bytes, size_t length, const char *feed, size_t feed_length, int64_t generation, int64_t page,
    size_t *item_count) {
    // One parser per thread, its buffers kept between calls; realloc_if_needed copies the input
    // to a buffer with the padding simdjson reads past the end.
    thread_local simdjson::dom::parser parser;
    simdjson::dom::element document;
    if (parser.parse(reinterpret_cast<const uint8_t *>(bytes), length, true).get(document) != simdjson::SUCCESS) {
        return feedd_page_line_not_an_object;
    }
    simdjson::dom::object members;
    if (document.get_object().get(members) != simdjson::SUCCESS) return feedd_page_line_not_an_object;

    const std::string_view names[] = {"type", "feed", "generation", "page", "items", "last"};
    bool seen[6] = {};
    simdjson::dom::array items;
    for (auto member : members) {
        size_t index = 0;
        while (index < 6 && member.key != names[index]) index++;
        if (index == 6 || seen[index]) return feedd_page_line_members;
        seen[index] = true;
        std::string_view text;
        int64_t number = 0;
        switch (index) {
        case 0:
            if (member.value.get_string().get(text) != simdjson::SUCCESS || text != "page") return feedd_page_line_address;
            break;
        case 1:
            if (member.value.get_string().get(text) != simdjson::SUCCESS || text != std::string_view(feed, feed_length)) {
                return feedd_page_line_address;
            }
            break;
        case 2:
        case 3:
            if (member.value.get_int64().get(number) != simdjson::SUCCESS || number != (index == 2 ? generation : page)) {
                return feedd_page_line_address;
            }
            break;
        case 4:
            if (member.value.get_array().get(items) != simdjson::SUCCESS) return feedd_page_line_types;
            break;
        default:
            if (!member.value.is_bool()) return feedd_page_line_types;
        }
    }
    for (bool present : seen) {
        if (!present) return feedd_page_line_members;
    }
    size_t count = 0;
    for (auto item : items) {
        if (check_item(item) != feedd_page_line_ok) {
            *item_count = count;
            return feedd_page_line_item;
        }
        count++;
    }
    *item_count = count;
    return feedd_page_line_ok;
}
