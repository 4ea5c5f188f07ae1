// posix_spawn with the GNU extras Swift's Glibc module hides: closefrom in the child, so a plugin
// inherits nothing but its three pipes, and pipe2 for pipes that no other child can inherit.
#define _GNU_SOURCE
#include "feedd_spawn.h"

#include <errno.h>
#include <fcntl.h>
#include <signal.h>
#include <spawn.h>
#include <unistd.h>

int feedd_pipe(int descriptors[2]) {
    return pipe2(descriptors, O_CLOEXEC) == 0 ? 0 : errno;
}

int feedd_spawn(const char *path, char *const argv[], char *const envp[], int in_fd, int out_fd, int err_fd, pid_t *pid) {
    posix_spawn_file_actions_t actions;
    posix_spawnattr_t attributes;
    sigset_t none, defaults;
    int result;

    posix_spawn_file_actions_init(&actions);
    posix_spawn_file_actions_adddup2(&actions, in_fd, 0);
    posix_spawn_file_actions_adddup2(&actions, out_fd, 1);
    posix_spawn_file_actions_adddup2(&actions, err_fd, 2);
    posix_spawn_file_actions_addclosefrom_np(&actions, 3);

    posix_spawnattr_init(&attributes);
    sigemptyset(&none);
    sigfillset(&defaults);
    posix_spawnattr_setsigmask(&attributes, &none);
    posix_spawnattr_setsigdefault(&attributes, &defaults);
    posix_spawnattr_setpgroup(&attributes, 0);
    posix_spawnattr_setflags(&attributes, POSIX_SPAWN_SETSIGMASK | POSIX_SPAWN_SETSIGDEF | POSIX_SPAWN_SETPGROUP | POSIX_SPAWN_USEVFORK);

    result = posix_spawn(pid, path, &actions, &attributes, argv, envp);

    posix_spawnattr_destroy(&attributes);
    posix_spawn_file_actions_destroy(&actions);
    return result;
}
