/* state_plan.c -- the TUI's setup as a plan file for `kvplan check`, and back.
 *
 * Written: a `kvplan_plan: 1` document with one deployment holding the same
 * settings `kvplan fit` takes, each printed by settings.h's table
 * (kvp_setting_text), and `assert: {fits: true}`. The file is
 * written to a temporary file in the same directory and renamed over the
 * target, so a crash or a full disk never leaves half a plan behind.
 *
 * Read: the library's plan parser (kvplan/plan.h) loads the file; its first
 * deployment becomes the setup, as the settings that give it
 * (tui_settings_of), so every setting is kept and written back on save.
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

void tui_settings_of(const struct kvp_deploy *d, const struct kvp_gpu *gpu, const struct kvp_model *m,
                     struct kvp_settings *out)
{
    struct kvp_deploy def;
    struct kvp_error e = {0};
    char v[KVP_SETTING_VALUE_MAX], dv[KVP_SETTING_VALUE_MAX];

    kvp_deploy_init(&def, d->engine, m);
    def.release = d->release;
    if (gpu)
        def.gpu_memory = gpu->memory_bytes;
    kvp_settings_clear(out);
    for (uint32_t i = 0; i < kvp_settings_count(); i++) {
        const struct kvp_setting *r = kvp_setting_at(i);
        kvp_setting_text(i, d, gpu, v, sizeof v);
        kvp_setting_text(i, &def, gpu, dv, sizeof dv);
        if (!v[0] || (r->type != KVP_SET_ENGINE && r->type != KVP_SET_GPU && strcmp(v, dv) == 0))
            continue;
        if (strcmp(r->key, "gpus") == 0 && (uint64_t)d->tp * d->pp == d->n_gpus)
            continue; /* tp x pp, the count's default */
        kvp_settings_put(out, r->key, v, &e); /* the table's own text: it parses */
    }
}

/* Whether a saved plan states row i: what the user gave, what differs from
 * the engine's default (of), and the core of a deployment even at its
 * default; the cache as kv_dtype where K and V agree, else as K and V. */
static bool written(const struct tui_state *s, const struct kvp_settings *of, uint32_t i, bool one_cache)
{
    static const char *const core[] = {"engine", "gpu", "gpus", "tp", "pp", "context", "concurrency", "weight_dtype"};
    const char *key = kvp_setting_at(i)->key;
    if (strcmp(key, "kv_dtype") == 0)
        return one_cache;
    if (strcmp(key, "k_dtype") == 0 || strcmp(key, "v_dtype") == 0)
        return !one_cache;
    for (size_t j = 0; j < sizeof core / sizeof core[0]; j++)
        if (strcmp(core[j], key) == 0)
            return true;
    return ((s->set.given | of->given) >> i) & 1u;
}

/* The deployment as plan keys, each printed by settings.h's table. */
static void write_plan(const struct tui_state *s, FILE *f)
{
    const struct kvp_deploy *d = &s->d;
    struct kvp_settings of;
    char path[4096], v[KVP_SETTING_VALUE_MAX];
    bool one_cache = kvp_setting_text((uint32_t)kvp_setting_find("kv_dtype"), d, s->gpu, v, sizeof v)[0] != '\0';

    tui_settings_of(d, s->gpu, s->model, &of);
    fprintf(f, "# written by kvplan tui; check it with: kvplan check FILE\n");
    fprintf(f, "kvplan_plan: 1\n");
    fprintf(f, "deployments:\n");
    fprintf(f, "  - name: \"%s-%s\"\n", s->model->name, s->gpu ? s->gpu->id : "gpu");
    fprintf(f, "    model: \"%s\"\n", model_ref(s, path, sizeof path));
    for (uint32_t i = 0; i < kvp_settings_count(); i++) {
        kvp_setting_text(i, d, s->gpu, v, sizeof v);
        if (!v[0] || !written(s, &of, i, one_cache))
            continue;
        if (strspn(v, "abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789._@,+-") == strlen(v))
            fprintf(f, "    %s: %s\n", kvp_setting_at(i)->key, v);
        else /* int4:group=128 and the like: quoted */
            fprintf(f, "    %s: \"%s\"\n", kvp_setting_at(i)->key, v);
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
    /* the deployment as the settings that give it, so edits go on from them */
    tui_settings_of(&plan.deps[0].d, plan.deps[0].gpu, m, &s->set);
    if (plan.n > 1)
        snprintf(s->status, sizeof s->status, "opened %s: the first of its %u deployments, '%s'", path, plan.n,
                 plan.deps[0].name);
    snprintf(s->plan_path, sizeof s->plan_path, "%s", path);
    st = KVP_OK;
out:
    kvp_plan_release(&plan);
    return st;
}
