// The only C++ in feedd: toml++ parses, this file turns the result into JSON text plus the
// position of every key, so Swift can decode it with Foundation and report FILE:LINE:COL.
#include "toml_shim.h"

#include <cmath>
#include <cstdlib>
#include <cstring>
#include <sstream>
#include <string>
#include <string_view>
#include <vector>

#include <toml++/toml.h>

namespace {

void write_string(std::string &out, std::string_view text) {
    static const char hex[] = "0123456789abcdef";
    out.push_back('"');
    for (unsigned char c : text) {
        switch (c) {
        case '"': out += "\\\""; break;
        case '\\': out += "\\\\"; break;
        case '\n': out += "\\n"; break;
        case '\r': out += "\\r"; break;
        case '\t': out += "\\t"; break;
        default:
            if (c < 0x20 || c == 0x7f) {
                out += "\\u00";
                out.push_back(hex[c >> 4]);
                out.push_back(hex[c & 0xf]);
            } else {
                out.push_back(static_cast<char>(c));
            }
        }
    }
    out.push_back('"');
}

template <typename T>
std::string streamed(const T &value) {
    std::ostringstream stream;
    stream << value;
    return stream.str();
}

struct Writer {
    std::string value;
    std::string positions;
    // The path of every float: JSON readers give back 2.0 as the integer 2, and a float must
    // never pass where an integer belongs.
    std::string floats;
    std::vector<std::string> path;

    void record_float() {
        if (!floats.empty()) floats.push_back(',');
        floats.push_back('[');
        for (size_t index = 0; index < path.size(); index++) {
            if (index > 0) floats.push_back(',');
            write_string(floats, path[index]);
        }
        floats.push_back(']');
    }

    void record_position(const toml::source_region &source) {
        if (!positions.empty()) positions.push_back(',');
        positions += "[" + std::to_string(source.begin.line) + "," + std::to_string(source.begin.column);
        for (const auto &component : path) {
            positions.push_back(',');
            write_string(positions, component);
        }
        positions.push_back(']');
    }

    void node(const toml::node &node) {
        switch (node.type()) {
        case toml::node_type::table: {
            value.push_back('{');
            bool first = true;
            for (auto &&[key, child] : *node.as_table()) {
                if (!first) value.push_back(',');
                first = false;
                write_string(value, key.str());
                value.push_back(':');
                path.emplace_back(key.str());
                record_position(key.source());
                this->node(child);
                path.pop_back();
            }
            value.push_back('}');
            break;
        }
        case toml::node_type::array: {
            value.push_back('[');
            size_t index = 0;
            for (auto &&child : *node.as_array()) {
                if (index > 0) value.push_back(',');
                path.emplace_back(std::to_string(index));
                record_position(child.source());
                this->node(child);
                path.pop_back();
                index++;
            }
            value.push_back(']');
            break;
        }
        case toml::node_type::string:
            write_string(value, node.as_string()->get());
            break;
        case toml::node_type::integer:
            value += std::to_string(node.as_integer()->get());
            break;
        case toml::node_type::floating_point: {
            double number = node.as_floating_point()->get();
            record_float();
            if (std::isfinite(number)) {
                value += streamed(*node.as_floating_point());
            } else {
                write_string(value, streamed(*node.as_floating_point()));
            }
            break;
        }
        case toml::node_type::boolean:
            value += node.as_boolean()->get() ? "true" : "false";
            break;
        case toml::node_type::date:
            write_string(value, streamed(*node.as_date()));
            break;
        case toml::node_type::time:
            write_string(value, streamed(*node.as_time()));
            break;
        case toml::node_type::date_time:
            write_string(value, streamed(*node.as_date_time()));
            break;
        default:
            value += "null";
        }
    }
};

char *copy(const std::string &text) {
    char *result = static_cast<char *>(std::malloc(text.size() + 1));
    if (result) std::memcpy(result, text.c_str(), text.size() + 1);
    return result;
}

} // namespace

extern "C" feedd_toml_result feedd_toml_parse(const char *text, size_t length) {
    feedd_toml_result result{nullptr, nullptr, 0, 0};
    toml::parse_result parsed = toml::parse(std::string_view(text, length));
    if (!parsed) {
        const toml::parse_error &error = parsed.error();
        result.error = copy(std::string(error.description()));
        result.error_line = static_cast<int>(error.source().begin.line);
        result.error_column = static_cast<int>(error.source().begin.column);
        return result;
    }
    Writer writer;
    writer.node(parsed.table());
    result.json = copy("{\"value\":" + writer.value + ",\"positions\":[" + writer.positions + "],\"floats\":[" + writer.floats + "]}");
    return result;
}

extern "C" void feedd_toml_free(feedd_toml_result result) {
    std::free(result.json);
    std::free(result.error);
}
