// What the two walks over a JSON text share (see json_index.cpp): the index they write, the
// check for repeated member names, and how a walk ends.
#ifndef FEEDD_JSON_WALK_H
#define FEEDD_JSON_WALK_H

#include "json_index.h"

#include <simdjson.h>

#include <cstdlib>
#include <memory>
#include <new>
#include <string_view>
#include <unordered_set>
#include <vector>

namespace feedd {

inline bool is_space(uint8_t byte) { return byte == ' ' || byte == '\t' || byte == '\n' || byte == '\r'; }

// How a walk ended: SUCCESS, or why and about where it refused the text (`refusal` set where
// the walk, not simdjson, found the fault).
struct Outcome {
    simdjson::error_code error = simdjson::SUCCESS;
    const char *refusal = nullptr;
    const uint8_t *at = nullptr;
};

// The entries a walk writes, in the order of the text.
class Index {
public:
    explicit Index(const uint8_t *text) : text(text) {}
    Index(const Index &) = delete;
    ~Index() { std::free(entries); }

    size_t count = 0;

    void reserve(size_t wanted) {
        if (wanted <= capacity) return;
        size_t grown = capacity * 2 > wanted ? capacity * 2 : wanted;
        void *moved = std::realloc(entries, grown * sizeof(feedd_json_entry));
        if (!moved) throw std::bad_alloc();
        entries = static_cast<feedd_json_entry *>(moved);
        capacity = grown;
    }

    // Adds a value (a container's `end` and `next` are set when it closes); returns its index.
    size_t add(uint32_t shape, const uint8_t *start, const uint8_t *end) {
        if (count == capacity) reserve(count + 1);
        entries[count] = feedd_json_entry{uint32_t(start - text), uint32_t(end - text), uint32_t(count + 1), shape};
        return count++;
    }

    // Completes the container at `entry`, whose closing bracket is at `bracket`.
    void close(size_t entry, const uint8_t *bracket, size_t children) {
        entries[entry].end = uint32_t(bracket + 1 - text);
        entries[entry].next = uint32_t(count);
        entries[entry].shape |= uint32_t(children) << FEEDD_JSON_COUNT_SHIFT;
    }

    void mark_escaped(size_t entry) { entries[entry].shape |= FEEDD_JSON_ESCAPED; }

    feedd_json_entry *release() {
        feedd_json_entry *result = entries;
        entries = nullptr;
        return result;
    }

private:
    const uint8_t *text;
    feedd_json_entry *entries = nullptr;
    size_t capacity = 0;
};

// The member names of the objects a walk is in, innermost last, to find a name given twice:
// readers of the same bytes would resolve it differently. One list per thread, whose memory
// each walk reuses. Each name carries a fingerprint (its length, first and last byte), so that
// most comparisons are of one integer; an object of many members gets a hash set.
class Names {
public:
    Names() : names(list()) { names.clear(); }

    size_t mark() const { return names.size(); }

    // Whether `name` is among the names since `mark` (the object's first), noting it if not.
    bool repeated(std::string_view name, size_t mark, std::unique_ptr<std::unordered_set<std::string_view>> &seen) {
        if (seen) return !seen->insert(name).second;
        uint64_t print = name.empty() ? 0 : uint64_t(name.size()) << 16 | uint64_t(uint8_t(name.front())) << 8 | uint8_t(name.back());
        for (size_t at = mark; at < names.size(); at++) {
            if (names[at].print == print && names[at].text() == name) return true;
        }
        names.emplace_back(name.data(), name.size(), print);
        if (names.size() - mark > linear_limit) {
            seen = std::make_unique<std::unordered_set<std::string_view>>();
            for (size_t at = mark; at < names.size(); at++) seen->insert(names[at].text());
        }
        return false;
    }

    // Forgets the names since `mark`, when their object ends.
    void leave(size_t mark) { names.erase(names.begin() + long(mark), names.end()); }

private:
    struct Name {
        const char *data;
        size_t size;
        uint64_t print;
        Name(const char *data, size_t size, uint64_t print) : data(data), size(size), print(print) {}
        std::string_view text() const { return std::string_view(data, size); }
    };
    static constexpr size_t linear_limit = 16;
    std::vector<Name> &names;

    static std::vector<Name> &list() {
        thread_local std::vector<Name> names;
        return names;
    }
};

// Indexes `text` with On-Demand, checking everything (`index` null: only checks).
Outcome walk_on_demand(simdjson::ondemand::parser &parser, const uint8_t *text, size_t length, size_t max_depth, Index *index);

// Indexes `text` (`index` null: only checks) from the DOM parser's tape and stage 1's structural
// indexes. Any error but a repeated name means "ask the On-Demand walk", which accepts what the
// DOM parser refuses or says where the text goes wrong.
Outcome walk_tape(simdjson::dom::parser &parser, const uint8_t *text, size_t length, size_t max_depth, Index *index);

// Checks the document on the DOM parser's tape for what simdjson leaves to feedd: depth beyond
// `max_depth` and an object naming a member twice.
Outcome check_tape(const simdjson::dom::parser &parser, size_t max_depth);

}  // namespace feedd

#endif
