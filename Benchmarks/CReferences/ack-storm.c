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
// Sets up first (feedd: reads each hello and subscribes each consumer; redis: adds ENTRIES
// entries 1-0… and makes the groups), storms WARMUP seconds untimed, prints "start", storms
// SECONDS more and prints "stop ROUNDS ELAPSED" (rounds completed in the window), then exits.
// Usage: ack-storm feedd|redis|redis-cursor SOCKET CONSUMERS WARMUP SECONDS ENTRIES
#define _POSIX_C_SOURCE 200809L
#include <errno.h>
#include <fcntl.h>
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
// error reply, and on an acknowledgement that acknowledged nothing.
static size_t replyLength(const char *bytes, size_t count) {
    if (isRedis) {
        size_t length = respLength(bytes, count);
        if (length > 0 && (bytes[0] == '-' || (bytes[0] == ':' && bytes[1] == '0'))) fail("redis refused", bytes);
        return length;
    }
    const char *end = memchr(bytes, '\n', count);
    if (end == NULL) return 0;
    if (strncmp(bytes, "{\"type\":\"error\"", 15) == 0) fail("feedd refused", bytes);
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

static void setUp(struct connection *connections, int consumers, int entries) {
    char request[1 << 16], name[32], number[32];
    if (isRedis) {
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
    for (int consumer = 0; consumer < consumers; consumer++) {
        int length = sprintf(request, "{\"op\":\"subscribe\",\"feed\":\"numbers\",\"consumer\":\"c%d\"}\n", consumer);
        sendAll(connections[consumer].socket, request, (size_t)length);
    }
    for (int consumer = 0; consumer < consumers; consumer++) awaitReplies(&connections[consumer], 1);
}

int main(int argc, char **argv) {
    if (argc != 7 || (strcmp(argv[1], "feedd") != 0 && strcmp(argv[1], "redis") != 0 && strcmp(argv[1], "redis-cursor") != 0)) {
        fprintf(stderr, "usage: ack-storm feedd|redis|redis-cursor SOCKET CONSUMERS WARMUP SECONDS ENTRIES\n");
        return 2;
    }
    isCursor = strcmp(argv[1], "redis-cursor") == 0;
    isRedis = isCursor || strcmp(argv[1], "redis") == 0;
    int consumers = atoi(argv[3]), entries = atoi(argv[6]);
    double warmup = atof(argv[4]), seconds = atof(argv[5]);
    struct connection *connections = calloc((size_t)consumers, sizeof *connections);
    struct sockaddr_un address = {.sun_family = AF_UNIX};
    strncpy(address.sun_path, argv[2], sizeof address.sun_path - 1);
    for (int consumer = 0; consumer < consumers; consumer++) {
        connections[consumer].socket = socket(AF_UNIX, SOCK_STREAM, 0);
        if (connect(connections[consumer].socket, (struct sockaddr *)&address, sizeof address) != 0) fail("connect", strerror(errno));
    }
    setUp(connections, consumers, entries);

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
    printf("stop %ld %.6f\n", rounds, now() - windowStart);
    fflush(stdout);
    return 0;
}
