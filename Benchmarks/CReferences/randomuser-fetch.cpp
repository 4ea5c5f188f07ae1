// The reference for feedd's upstream path (feedd-bench's `upstream` scenario): the least a
// program must do to turn randomuser pages from a loopback upstream into page lines, with the
// same libraries feedd uses. libcurl's easy interface on one reused connection fetches each
// page; simdjson's DOM parser checks and parses it; each user's `login.uuid` is read and the
// user written, with its id, into a page buffer, as feedd's page line holds it.
//
//   randomuser-fetch BASE_URL PAGES      e.g. http://127.0.0.1:8080/api/ 2000
//
// Prints `pages CPU_SECONDS WALL_SECONDS` for the pages after a first, warming one.
#include <curl/curl.h>
#include <simdjson.h>

#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <string>
#include <sys/resource.h>

static size_t append(char *data, size_t size, size_t count, void *body) {
    static_cast<std::string *>(body)->append(data, size * count);
    return size * count;
}

static double cpu_seconds() {
    rusage usage;
    getrusage(RUSAGE_SELF, &usage);
    return usage.ru_utime.tv_sec + usage.ru_stime.tv_sec + (usage.ru_utime.tv_usec + usage.ru_stime.tv_usec) / 1e6;
}

// Fetches and encodes page `page`; false (with a message) on any failure.
static bool fetch_page(CURL *curl, simdjson::dom::parser &parser, const std::string &base, int page, std::string &body, std::string &line) {
    std::string url = base + "?results=20&page=" + std::to_string(page) + "&seed=bench";
    body.clear();
    curl_easy_setopt(curl, CURLOPT_URL, url.c_str());
    CURLcode code = curl_easy_perform(curl);
    long status = 0;
    curl_easy_getinfo(curl, CURLINFO_RESPONSE_CODE, &status);
    if (code != CURLE_OK || status != 200) {
        std::fprintf(stderr, "randomuser-fetch: GET %s: %s, status %ld\n", url.c_str(), curl_easy_strerror(code), status);
        return false;
    }
    simdjson::dom::element document;
    if (auto error = parser.parse(body).get(document)) {
        std::fprintf(stderr, "randomuser-fetch: %s: %s\n", url.c_str(), simdjson::error_message(error));
        return false;
    }
    simdjson::dom::array users;
    if (document["results"].get(users)) return false;
    line.assign("{\"type\":\"page\",\"feed\":\"users\",\"page\":");
    line.append(std::to_string(page)).append(",\"items\":[");
    bool first = true;
    for (simdjson::dom::element user : users) {
        std::string_view uuid;
        if (user["login"]["uuid"].get(uuid)) return false;
        line.append(first ? "{\"id\":\"" : ",{\"id\":\"").append(uuid).append("\",\"data\":");
        line.append(simdjson::to_string(user)).append("}");
        first = false;
    }
    line.append("],\"last\":false}\n");
    return true;
}

int main(int argc, char **argv) {
    if (argc != 3) {
        std::fprintf(stderr, "usage: randomuser-fetch BASE_URL PAGES\n");
        return 2;
    }
    std::string base = argv[1];
    int pages = std::atoi(argv[2]);
    curl_global_init(CURL_GLOBAL_DEFAULT);
    CURL *curl = curl_easy_init();
    std::string body, line;
    body.reserve(64 << 10);
    curl_easy_setopt(curl, CURLOPT_WRITEFUNCTION, append);
    curl_easy_setopt(curl, CURLOPT_WRITEDATA, &body);
    curl_easy_setopt(curl, CURLOPT_HTTPHEADER, curl_slist_append(nullptr, "Accept: application/json"));
    simdjson::dom::parser parser;
    if (!fetch_page(curl, parser, base, 1, body, line)) return 1;
    double cpu = cpu_seconds();
    auto wall = std::chrono::steady_clock::now();
    for (int page = 2; page <= pages + 1; page++) {
        if (!fetch_page(curl, parser, base, page, body, line)) return 1;
    }
    double elapsed = std::chrono::duration<double>(std::chrono::steady_clock::now() - wall).count();
    std::printf("%d %.6f %.6f\n", pages, cpu_seconds() - cpu, elapsed);
    curl_easy_cleanup(curl);
    return 0;
}
