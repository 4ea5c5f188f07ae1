// The drain's reference: the floor for handing out a file's lines. Reads the file in 1 MiB
// chunks and frames each line (memchr for the newline, a line carried over between chunks),
// touching every byte once, as a reader that needed nothing but the lines would.
// Prints: lines seconds
#define _POSIX_C_SOURCE 200809L
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

int main(int argc, char **argv) {
    if (argc != 2) {
        fprintf(stderr, "usage: line-framer FILE\n");
        return 2;
    }
    static char buffer[1 << 20];
    struct timespec start, end;
    clock_gettime(CLOCK_MONOTONIC, &start);
    int file = open(argv[1], O_RDONLY);
    if (file < 0) {
        perror(argv[1]);
        return 1;
    }
    long lines = 0, bytesInLine = 0, longest = 0;
    ssize_t count;
    while ((count = read(file, buffer, sizeof buffer)) > 0) {
        char *cursor = buffer, *stop = buffer + count;
        char *newline;
        while ((newline = memchr(cursor, '\n', (size_t)(stop - cursor))) != NULL) {
            bytesInLine += newline - cursor;
            if (bytesInLine > longest) longest = bytesInLine;
            bytesInLine = 0;
            lines += 1;
            cursor = newline + 1;
        }
        bytesInLine += stop - cursor;
    }
    if (count < 0) {
        perror(argv[1]);
        return 1;
    }
    if (bytesInLine > 0) lines += 1;
    close(file);
    clock_gettime(CLOCK_MONOTONIC, &end);
    double seconds = (double)(end.tv_sec - start.tv_sec) + (double)(end.tv_nsec - start.tv_nsec) / 1e9;
    // `longest` is printed to stderr so that the compiler cannot drop the framing.
    fprintf(stderr, "longest line: %ld bytes\n", longest);
    printf("%ld %.9f\n", lines, seconds);
    return 0;
}
