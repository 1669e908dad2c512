/* hub.c -- the CLI's Hub client: for a model by Hub reference that no cache
 * holds, runs kvplan-hub (src/hub/curl.c, beside this binary) and reads
 * its one line of answer. The page's build has its own cli_hub_fetch
 * instead of this file (src/hub/page.c). */
#include "cli.h"

#include <errno.h>
#include <limits.h>
#include <spawn.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

extern char **environ;

/* kvplan-hub beside /proc/self/exe. */
static bool helper_path(char *out, size_t n)
{
    char exe[PATH_MAX], *slash;
    ssize_t len = readlink("/proc/self/exe", exe, sizeof exe - 1);
    if (len <= 0)
        return false;
    exe[len] = '\0';
    if (!(slash = strrchr(exe, '/')))
        return false;
    *slash = '\0';
    return (size_t)snprintf(out, n, "%s/kvplan-hub", exe) < n;
}

/* The helper's answer: "ok PATH" or "error CODE MESSAGE". */
static enum kvp_status answer(const char *ref, char *line, int status, char *path, size_t n, struct kvp_error *err)
{
    char *end;
    long code;
    line[strcspn(line, "\n")] = '\0';
    if (strncmp(line, "ok ", 3) == 0 && WIFEXITED(status) && WEXITSTATUS(status) == 0)
        return (size_t)snprintf(path, n, "%s", line + 3) < n
                   ? KVP_OK
                   : kvp_fail(err, KVP_ERR_RANGE, "'%s': the cache path is too long", ref);
    if (strncmp(line, "error ", 6) == 0 && (code = strtol(line + 6, &end, 10)) > 0 && code <= KVP_ERR_TRUNCATED &&
        *end == ' ')
        return kvp_fail(err, (enum kvp_status)code, "%s", end + 1);
    return kvp_fail(err, KVP_ERR_IO, "'%s': kvplan-hub %s", ref,
                    WIFSIGNALED(status) ? "was killed by a signal" : "gave no answer");
}

enum kvp_status cli_hub_fetch(const char *ref, const struct kvp_hub_ref *r, const struct kvp_hub_env *env,
                              char *path, size_t n, struct kvp_error *err)
{
    char helper[PATH_MAX], line[KVP_ERROR_TEXT_MAX + 64];
    char *argv[] = {"kvplan-hub", (char *)ref, NULL};
    posix_spawn_file_actions_t fa;
    size_t got = 0;
    ssize_t k;
    int fd[2], status = 0, rc;
    pid_t pid;

    (void)r, (void)env;
    if (!helper_path(helper, sizeof helper) || access(helper, X_OK) != 0)
        return kvp_fail(err, KVP_ERR_UNSUPPORTED,
                        "'%s' is in no cache, and kvplan-hub, which fetches from the Hub, is not beside kvplan "
                        "(%s): install it, or put the model in the Hugging Face cache", ref, helper);
    if (pipe(fd) != 0)
        return kvp_fail(err, KVP_ERR_IO, "cannot run kvplan-hub: %s", strerror(errno));
    posix_spawn_file_actions_init(&fa);
    posix_spawn_file_actions_adddup2(&fa, fd[1], STDOUT_FILENO);
    posix_spawn_file_actions_addclose(&fa, fd[0]);
    posix_spawn_file_actions_addclose(&fa, fd[1]);
    rc = posix_spawn(&pid, helper, &fa, NULL, argv, environ);
    posix_spawn_file_actions_destroy(&fa);
    close(fd[1]);
    if (rc != 0) {
        close(fd[0]);
        return kvp_fail(err, KVP_ERR_IO, "cannot run %s: %s", helper, strerror(rc));
    }
    while (got + 1 < sizeof line &&
           ((k = read(fd[0], line + got, sizeof line - 1 - got)) > 0 || (k < 0 && errno == EINTR)))
        got += k > 0 ? (size_t)k : 0;
    line[got] = '\0';
    close(fd[0]);
    while (waitpid(pid, &status, 0) < 0 && errno == EINTR)
        ;
    return answer(ref, line, status, path, n, err);
}
