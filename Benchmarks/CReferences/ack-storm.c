// The ack storm's one client, for feedd and for Redis alike: CONSUMERS connections to SOCKET,
// each a durable consumer of the feed (stream) "numbers" that takes its next page (entry) and
// acknowledges it, one round trip in flight per connection, as fast as the server confirms.
//   feedd: {"op":"next","feed":"numbers"} then {"op":"ack","feed":"numbers","page":R}; the ack
//          is answered once the consumer's cursor is durable.
//   redis: XREADGROUP GROUP cI cI COUNT 1 STREAMS numbers > then XACK numbers cI R-0, each
//          consumer its own group, so that a group's last-delivered id and pending list are the
//          consumer's durable cursor, as feedd's stored cursor is; with appendfsync always the
//          server syncs its log before it answers.
//   redis-cursor: XRANGE numbers R-0 R-0 then SET cursor:cI R: the consumer's cursor as a key of
//          its own, written once a round, as feedd writes its cursor; the least a durable ack
//          can cost Redis.
// Meanwhile one more connection, the reader, on a thread of its own, asks every 10 ms for a
// page of about 5 KB that is ready before it is asked for, and times each round trip from its
// send to the whole reply read:
//   feedd: {"op":"next","feed":"users"}, a feed with prefetch that is not part of the storm.
//   redis: XRANGE users N-0 N-0, the stream "users" of the same pages, one entry each.
// And one more, the pinger, on a thread of its own, sends the cheapest request there is every
// millisecond and times it the same way: feedd {"op":"ping"}, Redis PING. It is the issue's
// fairness figure, with Redis's own in its own storm beside it.
// USERS is the file of that feed, one user record a line, PAGE_SIZE records a page.
// Sets up first (feedd: reads each hello, subscribes each consumer and takes the reader's first
// page; redis: adds ENTRIES entries 1-0… to "numbers", the pages of USERS to "users", and makes
// the groups), storms WARMUP seconds untimed, prints "start", storms SECONDS more and prints
// "stop ROUNDS ELAPSED" (rounds completed in the window), then "reader SAMPLES P50 P99 MAX" and
// "pinger SAMPLES P50 P99 MAX" (their round trips in the window, ms), and exits.
// Usage: ack-storm feedd|redis|redis-cursor SOCKET CONSUMERS WARMUP SECONDS ENTRIES USERS PAGE_SIZE
#define _POSIX_C_SOURCE 200809L
#include <errno.h>
#include <fcntl.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/epoll.h>
#include <sys/socket.h>
#include <sys/un.h>
#include <time.h>
#include <unistd.h>

enum { bufferSize = 16384 };

struct connection {
    int socket;
    int round;
    int repliesLeft;
    size_t used;
    char buffer[bufferSize];
};

static int isRedis, isCursor;

// A connection on a thread of its own that times one request after another, `pause` apart: the
// reader (pages) and the pinger (pings). Its fields are its thread's once it starts until it is
// joined; `recording` and `stopping` are set by the storm's thread.
struct timer {
    struct connection connection;
    long pauseNanoseconds;
    double *latencies;
    size_t count, capacity;
};

static struct timer reader = {.pauseNanoseconds = 10 * 1000 * 1000}, pinger = {.pauseNanoseconds = 1000 * 1000};
// The entries of "users" (Redis), set before the timers start.
static int readerPages;
static atomic_int recording, stopping;

static void fail(const char *what, const char *detail) {
    // A reply is shown up to its first line end.
    int length = detail ? (int)strcspn(detail, "\r\n") : 0;
    fprintf(stderr, "ack-storm: %s%s%.*s\n", what, detail ? ": " : "", length, detail ? detail : "");
    exit(1);
}

static double now(void) {
    struct timespec time;
    clock_gettime(CLOCK_MONOTONIC, &time);
    return (double)time.tv_sec + (double)time.tv_nsec / 1e9;
}

// The length of the complete RESP reply at the start of `bytes`, or 0 while it is incomplete.
static size_t respLength(const char *bytes, size_t count) {
    const char *end = memchr(bytes, '\n', count);
    if (end == NULL) return 0;
    size_t header = (size_t)(end - bytes) + 1;
    long value = atol(bytes + 1);
    switch (bytes[0]) {
    case '+': case '-': case ':': return header;
    case '$': return value < 0 ? header : (header + (size_t)value + 2 <= count ? header + (size_t)value + 2 : 0);
    case '*': {
        size_t length = header;
        for (long element = 0; element < value; element++) {
            if (length >= count) return 0;
            size_t part = respLength(bytes + length, count - length);
            if (part == 0) return 0;
            length += part;
        }
        return length;
    }
    default: fail("not a RESP reply", bytes);
    }
    return 0;
}

// The length of the complete reply at the start of `bytes` (a line for feedd), or 0; fails on an
// error reply, on an acknowledgement that acknowledged nothing, and on the end of a feed (the
// storm would time answers that are not pages).
static size_t replyLength(const char *bytes, size_t count) {
    if (isRedis) {
        size_t length = respLength(bytes, count);
        if (length > 0 && (bytes[0] == '-' || (bytes[0] == ':' && bytes[1] == '0'))) fail("redis refused", bytes);
        return length;
    }
    const char *end = memchr(bytes, '\n', count);
    if (end == NULL) return 0;
    if (strncmp(bytes, "{\"type\":\"error\"", 15) == 0) fail("feedd refused", bytes);
    if (strncmp(bytes, "{\"type\":\"end\"", 13) == 0) fail("a feed ended", bytes);
    return (size_t)(end - bytes) + 1;
}

// Takes the complete replies out of the connection's buffer; returns how many there were.
static int takeReplies(struct connection *connection) {
    int replies = 0;
    size_t offset = 0, length;
    while (offset < connection->used && (length = replyLength(connection->buffer + offset, connection->used - offset)) > 0) {
        offset += length;
        replies += 1;
    }
    memmove(connection->buffer, connection->buffer + offset, connection->used - offset);
    connection->used -= offset;
    return replies;
}

// Reads until `replies` replies have come (the socket blocking), or fails.
static void awaitReplies(struct connection *connection, int replies) {
    while ((replies -= takeReplies(connection)) > 0) {
        if (connection->used == bufferSize) fail("reply too long", NULL);
        ssize_t count = read(connection->socket, connection->buffer + connection->used, bufferSize - connection->used - 1);
        if (count <= 0) fail("read", count < 0 ? strerror(errno) : "the server closed the connection");
        connection->used += (size_t)count;
        connection->buffer[connection->used] = 0;
    }
}

static void sendAll(int socket, const char *bytes, size_t count) {
    while (count > 0) {
        ssize_t sent = send(socket, bytes, count, MSG_NOSIGNAL);
        if (sent < 0 && (errno == EINTR || errno == EAGAIN)) continue;
        if (sent < 0) fail("send", strerror(errno));
        bytes += sent;
        count -= (size_t)sent;
    }
}

// A RESP command of `count` words, into `out`; returns its length.
static int command(char *out, int count, const char **words) {
    int length = sprintf(out, "*%d\r\n", count);
    for (int word = 0; word < count; word++) length += sprintf(out + length, "$%zu\r\n%s\r\n", strlen(words[word]), words[word]);
    return length;
}

// The consumer's next round: take the next page (entry) and acknowledge it.
static void sendRound(struct connection *connection, int consumer) {
    char request[512], name[32], number[32];
    int length;
    connection->round += 1;
    snprintf(name, sizeof name, "c%d", consumer);
    if (isCursor) {
        char key[40], cursor[32];
        snprintf(number, sizeof number, "%d-0", connection->round);
        snprintf(key, sizeof key, "cursor:%s", name);
        snprintf(cursor, sizeof cursor, "%d", connection->round);
        const char *read[] = {"XRANGE", "numbers", number, number};
        const char *set[] = {"SET", key, cursor};
        length = command(request, 4, read);
        length += command(request + length, 3, set);
    } else if (isRedis) {
        snprintf(number, sizeof number, "%d-0", connection->round);
        const char *read[] = {"XREADGROUP", "GROUP", name, name, "COUNT", "1", "STREAMS", "numbers", ">"};
        const char *ack[] = {"XACK", "numbers", name, number};
        length = command(request, 9, read);
        length += command(request + length, 4, ack);
    } else {
        length = sprintf(request, "{\"op\":\"next\",\"feed\":\"numbers\"}\n{\"op\":\"ack\",\"feed\":\"numbers\",\"page\":%d}\n", connection->round);
    }
    connection->repliesLeft = 2;
    sendAll(connection->socket, request, (size_t)length);
}

// The pages of `path`, `pageSize` lines each, as "users" entries 1-0…, one at a time from `connection`;
// returns how many.
static int addPages(struct connection *connection, const char *path, int pageSize) {
    FILE *file = fopen(path, "r");
    if (file == NULL) fail("open", path);
    char *line = NULL, *page = NULL, *request = NULL;
    size_t lineCapacity = 0, pageLength = 0, pageCapacity = 0;
    int pages = 0, lines = 0;
    ssize_t length;
    while ((length = getline(&line, &lineCapacity, file)) > 0 || pageLength > 0) {
        if (length > 0) {
            if (pageLength + (size_t)length + 1 > pageCapacity) page = realloc(page, pageCapacity = 2 * (pageLength + (size_t)length + 1));
            memcpy(page + pageLength, line, (size_t)length);
            pageLength += (size_t)length;
            page[pageLength] = 0;
            if (++lines < pageSize) continue;
        }
        char id[32];
        snprintf(id, sizeof id, "%d-0", ++pages);
        const char *add[] = {"XADD", "users", id, "page", page};
        request = realloc(request, pageLength + 256);
        sendAll(connection->socket, request, (size_t)command(request, 5, add));
        awaitReplies(connection, 1);
        pageLength = 0;
        lines = 0;
        if (length <= 0) break;
    }
    free(line);
    free(page);
    free(request);
    fclose(file);
    return pages;
}

static void setUp(struct connection *connections, int consumers, int entries, const char *users, int pageSize) {
    char request[1 << 16], name[32], number[32];
    if (isRedis) {
        readerPages = addPages(&connections[0], users, pageSize);
        // The entries, then a group per consumer, pipelined in batches from the first connection.
        for (int first = 1; first <= entries; first += 500) {
            int length = 0, batch = 0;
            for (int entry = first; entry < first + 500 && entry <= entries; entry++, batch++) {
                snprintf(number, sizeof number, "%d", entry);
                char id[40];
                snprintf(id, sizeof id, "%d-0", entry);
                const char *add[] = {"XADD", "numbers", id, "n", number};
                length += command(request + length, 5, add);
            }
            sendAll(connections[0].socket, request, (size_t)length);
            awaitReplies(&connections[0], batch);
        }
        for (int consumer = 0; consumer < consumers; consumer++) {
            snprintf(name, sizeof name, "c%d", consumer);
            const char *create[] = {"XGROUP", "CREATE", "numbers", name, "0"};
            int length = command(request, 5, create);
            sendAll(connections[0].socket, request, (size_t)length);
            awaitReplies(&connections[0], 1);
        }
        return;
    }
    for (int consumer = 0; consumer < consumers; consumer++) awaitReplies(&connections[consumer], 1);
    // The reader's hello, then its first page (an anonymous subscription's `subscribed` first).
    static const char firstPage[] = "{\"op\":\"next\",\"feed\":\"users\"}\n";
    awaitReplies(&reader.connection, 1);
    awaitReplies(&pinger.connection, 1);
    sendAll(reader.connection.socket, firstPage, sizeof firstPage - 1);
    awaitReplies(&reader.connection, 2);
    for (int consumer = 0; consumer < consumers; consumer++) {
        int length = sprintf(request, "{\"op\":\"subscribe\",\"feed\":\"numbers\",\"consumer\":\"c%d\"}\n", consumer);
        sendAll(connections[consumer].socket, request, (size_t)length);
    }
    for (int consumer = 0; consumer < consumers; consumer++) awaitReplies(&connections[consumer], 1);
}

// The timed request number `index` (from 1) of `timer` into `request`; returns its length.
static int timedRequest(const struct timer *timer, int index, char *request) {
    if (timer == &pinger) return sprintf(request, isRedis ? "PING\r\n" : "{\"op\":\"ping\"}\n");
    if (!isRedis) return sprintf(request, "{\"op\":\"next\",\"feed\":\"users\"}\n");
    char id[32];
    snprintf(id, sizeof id, "%d-0", (index - 1) % readerPages + 1);
    const char *range[] = {"XRANGE", "users", id, id};
    return command(request, 4, range);
}

// A timer's thread: a request every `pause` until told to stop, each round trip timed.
static void *timeRequests(void *argument) {
    struct timer *timer = argument;
    char request[128];
    const struct timespec pause = {.tv_sec = 0, .tv_nsec = timer->pauseNanoseconds};
    for (int index = 1; !atomic_load(&stopping); index++) {
        nanosleep(&pause, NULL);
        int length = timedRequest(timer, index, request);
        double sent = now();
        sendAll(timer->connection.socket, request, (size_t)length);
        awaitReplies(&timer->connection, 1);
        double took = now() - sent;
        if (!atomic_load(&recording)) continue;
        if (timer->count == timer->capacity) timer->latencies = realloc(timer->latencies, (timer->capacity = 2 * timer->capacity + 1024) * sizeof(double));
        timer->latencies[timer->count++] = took * 1e3;
    }
    return NULL;
}

static int ascending(const void *left, const void *right) {
    double a = *(const double *)left, b = *(const double *)right;
    return (a > b) - (a < b);
}

// The `fraction` quantile of `sorted`, the sample at (count - 1) × fraction rounded up, as
// feedd-bench's `quantile` takes it.
static double quantile(const double *sorted, size_t count, double fraction) {
    double position = (double)(count - 1) * fraction;
    size_t index = (size_t)position;
    if ((double)index < position) index += 1;
    return sorted[index < count ? index : count - 1];
}

// Prints "NAME SAMPLES P50 P99 MAX" of the timer's round trips (ms).
static void report(const char *name, struct timer *timer) {
    if (timer->count == 0) fail("a timer timed nothing", name);
    qsort(timer->latencies, timer->count, sizeof(double), ascending);
    printf("%s %zu %.6f %.6f %.6f\n", name, timer->count, quantile(timer->latencies, timer->count, 0.5),
        quantile(timer->latencies, timer->count, 0.99), timer->latencies[timer->count - 1]);
    fflush(stdout);
}

static int connectTo(const char *path) {
    struct sockaddr_un address = {.sun_family = AF_UNIX};
    strncpy(address.sun_path, path, sizeof address.sun_path - 1);
    int connection = socket(AF_UNIX, SOCK_STREAM, 0);
    if (connect(connection, (struct sockaddr *)&address, sizeof address) != 0) fail("connect", strerror(errno));
    return connection;
}

int main(int argc, char **argv) {
    if (argc != 9 || (strcmp(argv[1], "feedd") != 0 && strcmp(argv[1], "redis") != 0 && strcmp(argv[1], "redis-cursor") != 0)) {
        fprintf(stderr, "usage: ack-storm feedd|redis|redis-cursor SOCKET CONSUMERS WARMUP SECONDS ENTRIES USERS PAGE_SIZE\n");
        return 2;
    }
    isCursor = strcmp(argv[1], "redis-cursor") == 0;
    isRedis = isCursor || strcmp(argv[1], "redis") == 0;
    int consumers = atoi(argv[3]), entries = atoi(argv[6]);
    double warmup = atof(argv[4]), seconds = atof(argv[5]);
    struct connection *connections = calloc((size_t)consumers, sizeof *connections);
    for (int consumer = 0; consumer < consumers; consumer++) connections[consumer].socket = connectTo(argv[2]);
    reader.connection.socket = connectTo(argv[2]);
    pinger.connection.socket = connectTo(argv[2]);
    setUp(connections, consumers, entries, argv[7], atoi(argv[8]));
    pthread_t readerThread, pingerThread;
    if (pthread_create(&readerThread, NULL, timeRequests, &reader) != 0 || pthread_create(&pingerThread, NULL, timeRequests, &pinger) != 0) {
        fail("pthread_create", NULL);
    }

    int events = epoll_create1(0);
    for (int consumer = 0; consumer < consumers; consumer++) {
        struct epoll_event event = {.events = EPOLLIN, .data.u32 = (unsigned)consumer};
        fcntl(connections[consumer].socket, F_SETFL, O_NONBLOCK);
        if (epoll_ctl(events, EPOLL_CTL_ADD, connections[consumer].socket, &event) != 0) fail("epoll_ctl", strerror(errno));
        sendRound(&connections[consumer], consumer);
    }
    double started = now(), windowStart = 0, stop = started + warmup + seconds;
    long rounds = 0;
    int timing = 0;
    struct epoll_event ready[256];
    for (double time = started; time < stop; time = now()) {
        if (!timing && time >= started + warmup) {
            timing = 1;
            atomic_store(&recording, 1);
            windowStart = time;
            printf("start\n");
            fflush(stdout);
        }
        int count = epoll_wait(events, ready, 256, 100);
        if (count < 0 && errno != EINTR) fail("epoll_wait", strerror(errno));
        for (int index = 0; index < count; index++) {
            int consumer = (int)ready[index].data.u32;
            struct connection *connection = &connections[consumer];
            ssize_t got = read(connection->socket, connection->buffer + connection->used, bufferSize - connection->used - 1);
            if (got < 0 && (errno == EAGAIN || errno == EINTR)) continue;
            if (got <= 0) fail("read", got < 0 ? strerror(errno) : "the server closed the connection");
            connection->used += (size_t)got;
            connection->buffer[connection->used] = 0;
            connection->repliesLeft -= takeReplies(connection);
            if (connection->repliesLeft > 0) continue;
            if (connection->repliesLeft < 0) fail("more replies than requests", connection->buffer);
            if (timing) rounds += 1;
            sendRound(connection, consumer);
        }
    }
    atomic_store(&recording, 0);
    printf("stop %ld %.6f\n", rounds, now() - windowStart);
    fflush(stdout);
    atomic_store(&stopping, 1);
    pthread_join(readerThread, NULL);
    pthread_join(pingerThread, NULL);
    report("reader", &reader);
    report("pinger", &pinger);
    return 0;
}
