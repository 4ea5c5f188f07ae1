// The prefetched `next`'s floor: a server that has the page line ready and answers every request
// line with it at once, over a Unix socket, with nothing between the bytes and the kernel. It
// serves one client, reading with blocking calls; each complete line read (whatever it says) is
// answered with PAGE (a file, one line with its newline), written whole.
// Usage: page-echo SOCKET PAGE
#define _POSIX_C_SOURCE 200809L
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/un.h>
#include <unistd.h>

static int fail(const char *what) {
    perror(what);
    return 1;
}

int main(int argc, char **argv) {
    if (argc != 3) {
        fprintf(stderr, "usage: page-echo SOCKET PAGE\n");
        return 2;
    }
    int pageFile = open(argv[2], O_RDONLY);
    struct stat status;
    if (pageFile < 0 || fstat(pageFile, &status) != 0) return fail(argv[2]);
    size_t pageBytes = (size_t)status.st_size;
    char *page = malloc(pageBytes);
    if (page == NULL || read(pageFile, page, pageBytes) != (ssize_t)pageBytes) return fail("page");

    int listener = socket(AF_UNIX, SOCK_STREAM, 0);
    struct sockaddr_un address = {.sun_family = AF_UNIX};
    strncpy(address.sun_path, argv[1], sizeof address.sun_path - 1);
    if (bind(listener, (struct sockaddr *)&address, sizeof address) != 0 || listen(listener, 1) != 0) return fail("listen");
    printf("listening\n");
    fflush(stdout);
    int client = accept(listener, NULL, NULL);
    if (client < 0) return fail("accept");

    char request[4096];
    ssize_t count;
    while ((count = read(client, request, sizeof request)) > 0) {
        for (ssize_t at = 0; at < count; at++) {
            if (request[at] != '\n') continue;
            for (size_t written = 0; written < pageBytes;) {
                ssize_t sent = write(client, page + written, pageBytes - written);
                if (sent <= 0) return fail("write");
                written += (size_t)sent;
            }
        }
    }
    return 0;
}
