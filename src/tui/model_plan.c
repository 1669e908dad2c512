/* model_plan.c -- the TUI's setup as a plan file for `kvplan check`, and back.
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

#include "model.h"
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

static void write_plan(const struct tui_state *s, FILE *f)
{
    const struct kvp_deploy *d = &s->d;
    char k[64], v[64], w[64], path[4096];

    fprintf(f, "# written by kvplan tui; check it with: kvplan check FILE\n");
    fprintf(f, "kvplan_plan: 1\n");
    fprintf(f, "deployments:\n");
    fprintf(f, "  - name: \"%s-%s\"\n", s->model->name, s->gpu ? s->gpu->id : "gpu");
    fprintf(f, "    model: \"%s\"\n", model_ref(s, path, sizeof path));
    if (s->gpu)
        fprintf(f, "    gpu: %s\n", s->gpu->id);
    fprintf(f, "    gpus: %u\n", d->n_gpus);
    fprintf(f, "    tp: %u\n", d->tp);
    fprintf(f, "    pp: %u\n", d->pp);
    if (d->release == UINT32_MAX)
        fprintf(f, "    engine: %s\n", kvp_engine_info(d->engine)->name);
    else
        fprintf(f, "    engine: %s@%s\n", kvp_engine_info(d->engine)->name, kvp_deploy_release(d)->version);
    if (d->util > 0)
        fprintf(f, "    util: %.3f\n", d->util);
    else
        fprintf(f, "    # util: the engine's default%s\n", s->ok ? "" : " (not computed)");
    fprintf(f, "    context: %llu\n", (unsigned long long)d->context);
    fprintf(f, "    concurrency: %llu\n", (unsigned long long)d->concurrency);
    kvp_format_name(&d->k, k, sizeof k);
    kvp_format_name(&d->v, v, sizeof v);
    if (strcmp(k, v) == 0) {
        fprintf(f, "    kv_dtype: \"%s\"\n", k);
    } else {
        fprintf(f, "    k_dtype: \"%s\"\n", k);
        fprintf(f, "    v_dtype: \"%s\"\n", v);
    }
    fprintf(f, "    weight_dtype: \"%s\"\n", kvp_wstore_name(&d->w, w, sizeof w));
    if (d->block_size)
        fprintf(f, "    block_size: %u\n", d->block_size);
    else
        fprintf(f, "    # block_size: the engine's default\n");
    /* settings without a field in the TUI, kept from an opened plan */
    if (!s->gpu)
        fprintf(f, "    gpu_memory: %llu\n", (unsigned long long)d->gpu_memory);
    if (d->weights_memory)
        fprintf(f, "    weights_memory: %llu\n", (unsigned long long)d->weights_memory);
    if (d->activation_memory)
        fprintf(f, "    activation_memory: %llu\n", (unsigned long long)d->activation_memory);
    if (d->non_torch_memory)
        fprintf(f, "    non_torch_memory: %llu\n", (unsigned long long)d->non_torch_memory);
    if (d->kv_memory)
        fprintf(f, "    kv_cache_memory: %llu\n", (unsigned long long)d->kv_memory);
    if (d->max_batched_tokens)
        fprintf(f, "    max_num_batched_tokens: %llu\n", (unsigned long long)d->max_batched_tokens);
    if (d->n_ubatch != 512)
        fprintf(f, "    n_ubatch: %u\n", d->n_ubatch);
    if (d->n_seq != 1)
        fprintf(f, "    n_seq: %u\n", d->n_seq);
    if (d->kv_unified)
        fprintf(f, "    kv_unified: true\n");
    if (d->swa_full)
        fprintf(f, "    swa_full: true\n");
    if (d->mla_v)
        fprintf(f, "    mla_v: true\n");
    if (d->split[0]) {
        fprintf(f, "    split: [");
        for (uint32_t i = 0; i < KVP_MAX_STAGES && d->split[i]; i++)
            fprintf(f, "%s%u", i ? ", " : "", d->split[i]);
        fprintf(f, "]\n");
    }
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
