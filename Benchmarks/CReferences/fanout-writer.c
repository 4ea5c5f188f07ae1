// The fan-out's raw reference: the same page bytes written straight to many Unix sockets, with
// nothing between the bytes and the kernel. Accepts CLIENTS connections on SOCKET, waits for one
// byte on the first (the reader's "go"), then writes PAYLOAD (a file) MESSAGES times to every
// client, as much per send as each socket takes (epoll, edge-triggered, for the ones that are
// full); then waits to be killed.
// Usage: fanout-writer SOCKET CLIENTS PAYLOAD MESSAGES
#define _POSIX_C_SOURCE 200809L
#include <errno.h>
#include <fcntl.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/epoll.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/un.h>
#include <unistd.h>

static int fail(const char *what) {
    perror(what);
    return 1;
}

int main(int argc, char **argv) {
    if (argc != 5) {
        fprintf(stderr, "usage: fanout-writer SOCKET CLIENTS PAYLOAD MESSAGES\n");
        return 2;
    }
    int clients = atoi(argv[2]), messages = atoi(argv[4]);
    int payloadFile = open(argv[3], O_RDONLY);
    struct stat status;
    if (payloadFile < 0 || fstat(payloadFile, &status) != 0) return fail(argv[3]);
    size_t payloadBytes = (size_t)status.st_size, total = payloadBytes * (size_t)messages;
    char *stream = malloc(total);
    if (stream == NULL || read(payloadFile, stream, payloadBytes) != (ssize_t)payloadBytes) return fail("payload");
    for (int message = 1; message < messages; message++) memcpy(stream + payloadBytes * (size_t)message, stream, payloadBytes);

    int listener = socket(AF_UNIX, SOCK_STREAM, 0);
    struct sockaddr_un address = {.sun_family = AF_UNIX};
    strncpy(address.sun_path, argv[1], sizeof address.sun_path - 1);
    if (bind(listener, (struct sockaddr *)&address, sizeof address) != 0 || listen(listener, clients) != 0) return fail("listen");
    printf("listening\n");
    fflush(stdout);

    int *sockets = calloc((size_t)clients, sizeof *sockets);
    size_t *written = calloc((size_t)clients, sizeof *written);
    int events = epoll_create1(0);
    for (int client = 0; client < clients; client++) {
        sockets[client] = accept(listener, NULL, NULL);
        if (sockets[client] < 0) return fail("accept");
    }
    char go;
    if (read(sockets[0], &go, 1) != 1) return fail("go");
    // Edge-triggered, as an event loop serving many clients would be: a socket is written until
    // it is full, and reported again once it has room.
    for (int client = 0; client < clients; client++) {
        struct epoll_event event = {.events = EPOLLOUT | EPOLLET, .data.u32 = (uint32_t)client};
        if (epoll_ctl(events, EPOLL_CTL_ADD, sockets[client], &event) != 0) return fail("epoll_ctl");
    }

    int unfinished = clients;
    struct epoll_event ready[256];
    while (unfinished > 0) {
        int count = epoll_wait(events, ready, 256, -1);
        if (count < 0 && errno != EINTR) return fail("epoll_wait");
        for (int index = 0; index < count; index++) {
            int client = (int)ready[index].data.u32;
            while (written[client] < total) {
                ssize_t sent = send(sockets[client], stream + written[client], total - written[client], MSG_DONTWAIT | MSG_NOSIGNAL);
                if (sent < 0 && errno == EAGAIN) break;
                if (sent < 0 && errno == EINTR) continue;
                if (sent < 0) return fail("send");
                written[client] += (size_t)sent;
                // Left open: the reader takes a closed socket for a failure.
                if (written[client] == total) {
                    epoll_ctl(events, EPOLL_CTL_DEL, sockets[client], NULL);
                    unfinished -= 1;
                }
            }
        }
    }
    // Until the benchmark, done reading, kills it.
    for (;;) pause();
}
