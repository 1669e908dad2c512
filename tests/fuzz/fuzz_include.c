/* fuzz_include.c -- libFuzzer harness: a plan with its includes.
 *
 * The input is up to four files, each after the first introduced by a line
 * "#--- " (the rest of that line is ignored): plan.yaml, a.yaml, sub/b.yaml
 * and ../outside.yaml, written under build/fuzz/include/ (the last one
 * outside the plan's folder, which an include must not reach). plan.yaml
 * is loaded, evaluated and rendered (fuzz_plan_file), so includes, their
 * defaults, cycles and the folder rule are fuzzed together. */
#include <sys/stat.h>
#include <unistd.h>

#include "fuzz_common.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

#define INC_DIR "build/fuzz/include"

static const char *const files[] = {INC_DIR "/plan/plan.yaml", INC_DIR "/plan/a.yaml", INC_DIR "/plan/sub/b.yaml",
                                    INC_DIR "/outside.yaml"};
#define NFILES (sizeof files / sizeof files[0])

/* Where the next file's marker line begins at or after p (a line start), or end. */
static const uint8_t *next_mark(const uint8_t *p, const uint8_t *end)
{
    for (; p < end; p++) {
        if ((size_t)(end - p) >= 5 && memcmp(p, "#--- ", 5) == 0)
            return p;
        if (!(p = memchr(p, '\n', (size_t)(end - p))))
            return end;
    }
    return end;
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    const uint8_t *p = data, *end = data + size;
    size_t k = 0;

    mkdir(INC_DIR, 0755);
    mkdir(INC_DIR "/plan", 0755);
    mkdir(INC_DIR "/plan/sub", 0755);
    for (; k < NFILES && p; k++) {
        const uint8_t *m = k + 1 < NFILES ? next_mark(p, end) : end;
        fuzz_write(files[k], p, (size_t)(m - p));
        p = m < end ? memchr(m, '\n', (size_t)(end - m)) : NULL;
        p = p ? p + 1 : NULL;
    }
    for (; k < NFILES; k++)
        unlink(files[k]);
    fuzz_plan_file(files[0]);
    return 0;
}
