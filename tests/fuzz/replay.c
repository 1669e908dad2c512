/* replay.c -- a harness of tests/fuzz/ without libFuzzer: each file named on
 * the command line is read and given to LLVMFuzzerTestOneInput once, as
 * `make check` replays tests/data/fuzz-regressions/NAME/ (build/TYPE/tests/replay_NAME,
 * linked with the harness by the compiler and sanitizers of the build). A
 * harness's own checks abort, so a find that comes back fails the suite.
 *
 *     build/rel/tests/replay_trace tests/data/fuzz-regressions/trace/... */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <sys/stat.h>

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

int main(int argc, char **argv)
{
    mkdir("build", 0755); /* where the harnesses write their inputs: build/fuzz/ */
    mkdir("build/fuzz", 0755);
    for (int i = 1; i < argc; i++) {
        FILE *f = fopen(argv[i], "rb");
        uint8_t *data = NULL;
        long n = -1;
        if (!f || fseek(f, 0, SEEK_END) != 0 || (n = ftell(f)) < 0 || fseek(f, 0, SEEK_SET) != 0 ||
            !(data = malloc((size_t)n + 1)) || fread(data, 1, (size_t)n, f) != (size_t)n) {
            fprintf(stderr, "replay: cannot read %s\n", argv[i]);
            return 2;
        }
        fclose(f);
        LLVMFuzzerTestOneInput(data, (size_t)n);
        free(data);
    }
    printf("replay: %d input%s, ok\n", argc - 1, argc == 2 ? "" : "s");
    return 0;
}
