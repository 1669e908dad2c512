/* state_plan.c -- the TUI's setup as a plan file for `kvplan check`, and back.
 *
 * Written: a `kvplan_plan: 1` document with one deployment holding the same
 * settings `kvplan fit` takes, and `assert: {fits: true}`. The file is
 * written to a temporary file in the same directory and renamed over the
 * target, so a crash or a full disk never leaves half a plan behind.
 *
 * Read: the library's plan parser (kvplan/plan.h) loads the file; its first
 * deployment becomes the setup, every setting kept, those the TUI has no
 * field for too (they are written back on save).
 */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <sys/stat.h>

#include "state.h"
#include "kvplan/settings.h"
#include "kvplan/plan.h"

/* The model as the plan should name it: the catalog name when it is one,
 * else the absolute path it was loaded from. */
static const char *model_ref(const struct tui_state *s, char *buf, size_t n)
{
    const struct kvp_model *m = s->model;
    if ((s->cat && kvp_catalog_find(s->cat, m->name)) || !m->file[0])
        return m->name;
    if (realpath(m->file, buf) && strlen(buf) < n)
        return buf;
    return m->file;
}

/* The settings every saved plan states, even at their defaults. */
static bool always_written(const char *key)
{
    static const char *const keys[] = {"engine", "gpu", "gpus", "tp", "pp", "context", "concurrency",
                                       "k_dtype", "v_dtype", "weight_dtype"};
    for (size_t i = 0; i < sizeof keys / sizeof keys[0]; i++)
        if (strcmp(keys[i], key) == 0)
            return true;
    return false;
}

/* The deployment as plan keys, from settings.h's table: the core settings,
 * and every other one where it differs from the engine's default. */
static void write_plan(const struct tui_state *s, FILE *f)
{
    const struct kvp_deploy *d = &s->d;
    struct kvp_deploy def;
    char path[4096], v[KVP_SETTING_VALUE_MAX], dv[KVP_SETTING_VALUE_MAX];

    kvp_deploy_init(&def, d->engine, s->model);
    def.release = d->release;
    fprintf(f, "# written by kvplan tui; check it with: kvplan check FILE\n");
    fprintf(f, "kvplan_plan: 1\n");
    fprintf(f, "deployments:\n");
    fprintf(f, "  - name: \"%s-%s\"\n", s->model->name, s->gpu ? s->gpu->id : "gpu");
    fprintf(f, "    model: \"%s\"\n", model_ref(s, path, sizeof path));
    for (uint32_t i = 0; i < kvp_settings_count(); i++) {
        const char *key = kvp_setting_at(i)->key;
        kvp_setting_text(i, d, s->gpu, v, sizeof v);
        kvp_setting_text(i, &def, s->gpu, dv, sizeof dv);
        if (!v[0] || (!always_written(key) && strcmp(v, dv) == 0))
            continue;
        if (strspn(v, "abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789._@,+-") == strlen(v))
            fprintf(f, "    %s: %s\n", key, v);
        else /* int4:group=128 and the like: quoted */
            fprintf(f, "    %s: \"%s\"\n", key, v);
    }
    if (d->util <= 0)
        fprintf(f, "    # util: the release's default%s\n", s->ok ? "" : " (not computed)");
    fprintf(f, "    assert: {fits: true}\n");
}

enum kvp_status tui_plan_save(const struct tui_state *s, const char *path, struct kvp_error *err)
{
    char tmp[TUI_INPUT_MAX + 32];
    const char *slash = strrchr(path, '/');
    FILE *f;
    int fd;

    if (!path[0])
        return kvp_fail(err, KVP_ERR_USAGE, "no file name given for the plan");
    if (slash && slash[1] == '\0')
        return kvp_fail(err, KVP_ERR_USAGE, "'%s' is a directory, not a plan file name", path);
    /* the temporary file sits beside the target so rename() stays on one file system */
    if (snprintf(tmp, sizeof tmp, "%s.tmpXXXXXX", path) >= (int)sizeof tmp)
        return kvp_fail(err, KVP_ERR_USAGE, "plan path is too long (got '%s')", path);
    if ((fd = mkstemp(tmp)) < 0)
        return kvp_fail(err, KVP_ERR_IO, "cannot write '%s': %s", path, strerror(errno));
    if (!(f = fdopen(fd, "w"))) {
        int e = errno;
        close(fd);
        unlink(tmp);
        return kvp_fail(err, KVP_ERR_IO, "cannot write '%s': %s", path, strerror(e));
    }
    /* mkstemp makes the file 0600; a plan is shared like any other file */
    {
        struct stat sb;
        mode_t mask = umask(0);
        umask(mask);
        fchmod(fd, stat(path, &sb) == 0 ? sb.st_mode & 07777 : 0666 & ~mask);
    }
    write_plan(s, f);
    if (fflush(f) != 0 || ferror(f) || fsync(fileno(f)) != 0) {
        int e = errno;
        fclose(f);
        unlink(tmp);
        return kvp_fail(err, KVP_ERR_IO, "cannot write '%s': %s", path, strerror(e));
    }
    if (fclose(f) != 0) {
        int e = errno;
        unlink(tmp);
        return kvp_fail(err, KVP_ERR_IO, "cannot write '%s': %s", path, strerror(e));
    }
    if (rename(tmp, path) != 0) {
        int e = errno;
        unlink(tmp);
        return kvp_fail(err, KVP_ERR_IO, "cannot write '%s': %s", path, strerror(e));
    }
    return KVP_OK;
}

enum kvp_status tui_plan_load(struct tui_state *s, const char *path, struct kvp_error *err)
{
    struct kvp_plan plan = {0};
    struct kvp_model *m;
    enum kvp_status st;

    if ((st = kvp_plan_load(&plan, path, s->cat, s->gpus, err)) != KVP_OK)
        goto out;
    if (plan.n == 0) {
        st = kvp_fail_at(err, KVP_ERR_SCHEMA, path, 0, 0, "the plan has no deployments");
        goto out;
    }
    if (!(m = malloc(sizeof *m))) {
        st = kvp_fail(err, KVP_ERR_NOMEM, "out of memory");
        goto out;
    }
    /* the plan owns its models; the state keeps a copy of the first (a model is plain data) */
    memcpy(m, plan.deps[0].model, sizeof *m);
    kvp_model_free(s->model);
    s->model = m;
    s->gpu = plan.deps[0].gpu; /* into s->gpus, which outlives the state */
    s->d = plan.deps[0].d;
    s->n_gpus = s->d.n_gpus;
    if (plan.n > 1)
        snprintf(s->status, sizeof s->status, "opened %s: the first of its %u deployments, '%s'", path, plan.n,
                 plan.deps[0].name);
    snprintf(s->plan_path, sizeof s->plan_path, "%s", path);
    st = KVP_OK;
out:
    kvp_plan_release(&plan);
    return st;
}
