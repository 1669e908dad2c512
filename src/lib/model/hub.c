/* hub.c -- Hugging Face Hub references, the caches' layout, the Hub's
 * answers and which files of a repo kvplan reads (hub.h). No HTTP. */
#include "kvplan/hub.h"

#include <ctype.h>
#include <dirent.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <sys/stat.h>

#include "base/io.h"
#include "kvplan/num.h"
#include "safetensors.h"
#include "base/ydoc.h"

#define MAX_LIST_BYTES (8u << 20) /* .kvplan-files, and the Hub's answer listing a repo */

/* ---- references ---- */

static bool has_suffix(const char *s, const char *suf)
{
    size_t n = strlen(s), k = strlen(suf);
    return n >= k && strcasecmp(s + n - k, suf) == 0;
}

/* huggingface_hub's validate_repo_id: [A-Za-z0-9._-], no "--" or "..", not
 * starting or ending with '-' or '.'. */
static bool repo_part_ok(const char *s, size_t n)
{
    if (n == 0 || n > 96 || s[0] == '-' || s[0] == '.' || s[n - 1] == '-' || s[n - 1] == '.')
        return false;
    for (size_t i = 0; i < n; i++) {
        if (!isalnum((unsigned char)s[i]) && s[i] != '.' && s[i] != '_' && s[i] != '-')
            return false;
        if (i && (s[i] == '-' || s[i] == '.') && s[i - 1] == s[i])
            return false;
    }
    return true;
}

/* A branch, tag or commit as a path under refs/: no "..", no leading '/'. */
static bool rev_ok(const char *s)
{
    if (!*s || *s == '/' || strstr(s, "..") || strlen(s) >= KVP_HUB_REV_MAX)
        return false;
    for (; *s; s++)
        if (!isalnum((unsigned char)*s) && !strchr("._-/", *s))
            return false;
    return true;
}

static bool type_ok(const char *s)
{
    if (!*s || strlen(s) >= sizeof ((struct kvp_hub_ref *)0)->type)
        return false;
    for (; *s; s++)
        if (!isalnum((unsigned char)*s) && *s != '_')
            return false;
    return true;
}

bool kvp_hub_is_commit(const char *rev)
{
    size_t i;
    for (i = 0; rev[i]; i++)
        if (!isdigit((unsigned char)rev[i]) && !(rev[i] >= 'a' && rev[i] <= 'f'))
            return false;
    return i == 40;
}

/* A reference that is not of the shape: for hf:// an error, otherwise not
 * a Hub reference at all (a path, a misspelt built-in). */
static enum kvp_status not_a_ref(const char *s, bool hf, struct kvp_error *err)
{
    if (!hf)
        return KVP_ERR_NOTFOUND;
    return kvp_fail(err, KVP_ERR_USAGE, "'hf://%.80s': want hf://ORG/NAME[@REV][:TYPE][/FILE]", s);
}

/* ORG/NAME[@REV][:TYPE], and for hf:// [/FILE] after it, into r. */
static enum kvp_status parse_repo(const char *s, bool hf, struct kvp_hub_ref *r, struct kvp_error *err)
{
    char buf[KVP_HUB_PATH_MAX], *slash, *rest, *colon, *file;

    if (strlen(s) >= sizeof buf)
        return not_a_ref(s, hf, err);
    snprintf(buf, sizeof buf, "%s", s);
    if (!(slash = strchr(buf, '/')))
        return not_a_ref(s, hf, err);
    rest = slash + 1 + strcspn(slash + 1, "@:/"); /* just past NAME */
    if (!repo_part_ok(buf, (size_t)(slash - buf)) || !repo_part_ok(slash + 1, (size_t)(rest - slash - 1)))
        return not_a_ref(s, hf, err);
    if (hf && (file = strchr(rest, '/')) != NULL) {
        *file++ = '\0';
        if (!*file || strstr(file, "..") || (size_t)snprintf(r->file, sizeof r->file, "%s", file) >= sizeof r->file)
            return kvp_fail(err, KVP_ERR_USAGE, "'hf://%.80s': the file after the repo is empty or unusable", s);
    } else if (*rest == '/') { /* a/b/c: a path */
        return not_a_ref(s, hf, err);
    }
    if ((colon = strrchr(rest, ':')) != NULL) {
        if (!type_ok(colon + 1))
            return kvp_fail(err, KVP_ERR_USAGE, "'%.80s': a GGUF type after ':' is letters, digits and '_' (Q4_K_M)",
                            s);
        snprintf(r->type, sizeof r->type, "%s", colon + 1);
        *colon = '\0';
    }
    if (*rest && *rest != '@')
        return not_a_ref(s, hf, err);
    if (*rest && !rev_ok(rest + 1))
        return kvp_fail(err, KVP_ERR_USAGE, "'%.80s': the revision after '@' is a branch, tag or commit", s);
    if ((size_t)snprintf(r->rev, sizeof r->rev, "%s", *rest ? rest + 1 : "main") >= sizeof r->rev)
        return kvp_fail(err, KVP_ERR_USAGE, "'%.80s': the revision is too long", s);
    *rest = '\0';
    snprintf(r->repo, sizeof r->repo, "%.*s", (int)(sizeof r->repo - 1), buf);
    return KVP_OK;
}

enum kvp_status kvp_hub_ref_parse(const char *s, struct kvp_hub_ref *r, struct kvp_error *err)
{
    memset(r, 0, sizeof *r);
    if (strncmp(s, "https://", 8) == 0 || strncmp(s, "http://", 7) == 0) {
        if (!has_suffix(s, ".gguf") || strlen(s) >= sizeof r->url)
            return kvp_fail(err, KVP_ERR_USAGE, "'%.80s': a model by URL is a .gguf file's URL", s);
        snprintf(r->url, sizeof r->url, "%s", s);
        return KVP_OK;
    }
    if (strncmp(s, "hf://", 5) == 0)
        return parse_repo(s + 5, true, r, err);
    /* a path: ./x, /x, ~/x, x.yaml; a repo id has exactly one '/' before any '@' */
    if (s[0] == '.' || s[0] == '/' || s[0] == '~' || has_suffix(s, ".yaml") || has_suffix(s, ".yml") ||
        has_suffix(s, ".json") || has_suffix(s, ".gguf"))
        return KVP_ERR_NOTFOUND;
    return parse_repo(s, false, r, err);
}

/* ---- the environment and the caches ---- */

static const char *env(const char *name)
{
    const char *v = getenv(name);
    return v && *v ? v : NULL;
}

static bool env_true(const char *name)
{
    const char *v = env(name);
    return v && (strcmp(v, "1") == 0 || strcasecmp(v, "true") == 0 || strcasecmp(v, "yes") == 0 ||
                 strcasecmp(v, "on") == 0);
}

void kvp_hub_env_read(struct kvp_hub_env *e)
{
    const char *home = env("HOME"), *xdg = env("XDG_CACHE_HOME"), *v;
    memset(e, 0, sizeof *e);
    if ((v = env("HF_HUB_CACHE")))
        snprintf(e->hf_cache, sizeof e->hf_cache, "%s", v);
    else if ((v = env("HF_HOME")))
        snprintf(e->hf_cache, sizeof e->hf_cache, "%s/hub", v);
    else if (xdg)
        snprintf(e->hf_cache, sizeof e->hf_cache, "%s/huggingface/hub", xdg);
    else if (home)
        snprintf(e->hf_cache, sizeof e->hf_cache, "%s/.cache/huggingface/hub", home);
    if ((v = env("KVPLAN_CACHE")))
        snprintf(e->cache, sizeof e->cache, "%s", v);
    else if (xdg)
        snprintf(e->cache, sizeof e->cache, "%s/kvplan", xdg);
    else if (home)
        snprintf(e->cache, sizeof e->cache, "%s/.cache/kvplan", home);
    snprintf(e->endpoint, sizeof e->endpoint, "%s", (v = env("HF_ENDPOINT")) ? v : "https://huggingface.co");
    for (size_t n = strlen(e->endpoint); n && e->endpoint[n - 1] == '/';) /* as huggingface_hub strips it */
        e->endpoint[--n] = '\0';
    e->offline = env_true("HF_HUB_OFFLINE");
}

KVP_WRAPS uint64_t kvp_hub_fnv(uint64_t h, const char *s)
{
    for (; *s; s++)
        h = (h ^ (uint8_t)*s) * 0x100000001b3u;
    return h;
}

bool kvp_hub_repo_dir(const char *root, const struct kvp_hub_ref *r, char *out, size_t n)
{
    const char *slash = strchr(r->repo, '/');
    if (r->url[0])
        return (size_t)snprintf(out, n, "%s/urls/%016llx", root,
                                (unsigned long long)kvp_hub_fnv(KVP_HUB_FNV_SEED, r->url)) < n;
    return slash && (size_t)snprintf(out, n, "%s/models--%.*s--%s", root, (int)(slash - r->repo), r->repo,
                                     slash + 1) < n;
}

static bool is_file(const char *path)
{
    struct stat sb;
    return stat(path, &sb) == 0 && S_ISREG(sb.st_mode);
}

/* The commit refs/REV holds, into commit[41]. */
static bool read_ref(const char *dir, const char *rev, char commit[41])
{
    char path[KVP_HUB_PATH_MAX + KVP_HUB_REV_MAX + 8], buf[64];
    FILE *f;
    size_t k;
    if ((size_t)snprintf(path, sizeof path, "%s/refs/%s", dir, rev) >= sizeof path || !(f = fopen(path, "r")))
        return false;
    k = fread(buf, 1, sizeof buf - 1, f);
    fclose(f);
    buf[k] = '\0';
    buf[strcspn(buf, " \r\n")] = '\0';
    if (!kvp_hub_is_commit(buf))
        return false;
    memcpy(commit, buf, 41);
    return true;
}

static void free_list(char **names, uint32_t n)
{
    for (uint32_t i = 0; i < n; i++)
        free(names[i]);
    free(names);
}

static bool push(char ***names, uint32_t *n, const char *s, size_t len)
{
    char **g;
    if (*n == KVP_HUB_MAX_FILES || !(g = realloc(*names, (*n + 1) * sizeof *g)))
        return false;
    *names = g;
    if (!(g[*n] = strndup(s, len)))
        return false;
    (*n)++;
    return true;
}

/* A snapshot's file list: its .kvplan-files (what the repo has, as the Hub
 * listed it), else the files in the folder (huggingface_hub's cache holds
 * what was downloaded). */
static bool snapshot_files(const char *snap, char ***names, uint32_t *n)
{
    char path[KVP_HUB_PATH_MAX + 128], *text = NULL;
    uint64_t len = 0;
    bool more = false;
    struct kvp_error e;
    DIR *d;
    struct dirent *de;

    *names = NULL;
    *n = 0;
    snprintf(path, sizeof path, "%s/.kvplan-files", snap);
    if (is_file(path) && kvp_read_file(path, MAX_LIST_BYTES, &text, &len, &more, &e) == KVP_OK) {
        bool ok = true;
        for (char *p = text, *nl; ok && p < text + len; p = nl + 1) {
            nl = memchr(p, '\n', (size_t)(text + len - p));
            if (!nl)
                nl = text + len;
            if (nl > p)
                ok = push(names, n, p, (size_t)(nl - p));
        }
        free(text);
        return ok;
    }
    if (!(d = opendir(snap)))
        return false;
    while ((de = readdir(d)) != NULL)
        if (de->d_name[0] != '.' && !push(names, n, de->d_name, strlen(de->d_name))) {
            closedir(d);
            return false;
        }
    closedir(d);
    return true;
}

enum kvp_status kvp_hub_cache_find(const char *root, const struct kvp_hub_ref *r, bool use_refs, char *path,
                                   size_t n, struct kvp_error *err)
{
    char dir[KVP_HUB_PATH_MAX], snap[KVP_HUB_PATH_MAX + 64], commit[41], **names;
    uint32_t k;
    int32_t i;
    struct kvp_error quiet;

    if (!root[0] || !kvp_hub_repo_dir(root, r, dir, sizeof dir))
        return KVP_ERR_NOTFOUND;
    if (r->url[0]) {
        const char *base = strrchr(r->url, '/');
        if ((size_t)snprintf(path, n, "%s/%s", dir, base + 1) >= n || !is_file(path))
            return KVP_ERR_NOTFOUND;
        return KVP_OK;
    }
    if (kvp_hub_is_commit(r->rev))
        memcpy(commit, r->rev, 41);
    else if (!use_refs || !read_ref(dir, r->rev, commit))
        return KVP_ERR_NOTFOUND;
    snprintf(snap, sizeof snap, "%s/snapshots/%s", dir, commit);
    if (r->file[0])
        return (size_t)snprintf(path, n, "%s/%s", snap, r->file) < n && is_file(path) ? KVP_OK : KVP_ERR_NOTFOUND;
    if (!r->type[0] && (size_t)snprintf(path, n, "%s/config.json", snap) < n && is_file(path))
        return (size_t)snprintf(path, n, "%s", snap) < n ? KVP_OK : KVP_ERR_NOTFOUND;
    if (!snapshot_files(snap, &names, &k)) {
        free_list(names, k);
        return KVP_ERR_NOTFOUND;
    }
    i = kvp_hub_pick_gguf(names, k, r, &quiet);
    if (i >= 0 && ((size_t)snprintf(path, n, "%s/%s", snap, names[i]) >= n || !is_file(path)))
        i = -1;
    free_list(names, k);
    (void)err;
    return i >= 0 ? KVP_OK : KVP_ERR_NOTFOUND;
}

/* ---- the Hub's answers ---- */

void kvp_hub_info_free(struct kvp_hub_info *info)
{
    free_list(info->files, info->n_files);
    info->files = NULL;
    info->n_files = 0;
}

enum kvp_status kvp_hub_info_parse(const char *json, uint64_t len, const char *what, struct kvp_hub_info *out,
                                   struct kvp_error *err)
{
    struct ydoc d;
    yaml_node_t *root, *sib, *sha;
    const char *v;
    enum kvp_status st;

    memset(out, 0, sizeof *out);
    if ((st = kvp_ydoc_load(&d, json, len, what, err)) != KVP_OK)
        return st;
    root = kvp_ydoc_root(&d);
    if ((st = kvp_ydoc_want_map(&d, root, "the Hub's answer", err)) != KVP_OK)
        goto done;
    sha = kvp_ydoc_get(&d, root, "sha");
    if (!sha || !(v = kvp_ydoc_scalar(sha)) || !kvp_hub_is_commit(v)) {
        st = kvp_ydoc_fail(&d, sha ? sha : root, err, KVP_ERR_SCHEMA, "no commit ('sha') in the Hub's answer");
        goto done;
    }
    memcpy(out->sha, v, 41);
    sib = kvp_ydoc_get(&d, root, "siblings");
    if (!sib || (st = kvp_ydoc_want_seq(&d, sib, "'siblings'", err)) != KVP_OK) {
        st = sib ? st : kvp_ydoc_fail(&d, root, err, KVP_ERR_SCHEMA, "no file list ('siblings') in the Hub's answer");
        goto done;
    }
    for (yaml_node_item_t *it = sib->data.sequence.items.start; it < sib->data.sequence.items.top; it++) {
        yaml_node_t *e = kvp_ydoc_node(&d, *it), *name;
        if ((st = kvp_ydoc_want_map(&d, e, "a file of 'siblings'", err)) != KVP_OK)
            goto done;
        name = kvp_ydoc_get(&d, e, "rfilename");
        if (!name || !(v = kvp_ydoc_scalar(name)) || !*v || strlen(v) >= KVP_HUB_FILE_MAX || v[0] == '/' ||
            strstr(v, "..") || strchr(v, '\n')) {
            st = kvp_ydoc_fail(&d, name ? name : e, err, KVP_ERR_SCHEMA, "a file without a usable 'rfilename'");
            goto done;
        }
        if (!push(&out->files, &out->n_files, v, strlen(v))) {
            st = kvp_ydoc_fail(&d, e, err, KVP_ERR_RANGE, "more than %d files, or out of memory", KVP_HUB_MAX_FILES);
            goto done;
        }
    }
done:
    kvp_ydoc_release(&d);
    if (st != KVP_OK)
        kvp_hub_info_free(out);
    return st;
}

/* ---- which files ---- */

static bool word_char(char c)
{
    return isalnum((unsigned char)c) || c == '_';
}

/* Is type a whole word of name, ignoring case? */
static bool has_word(const char *name, const char *type)
{
    size_t k = strlen(type);
    for (const char *p = name; *p; p++)
        if (strncasecmp(p, type, k) == 0 && (p == name || !word_char(p[-1])) && !word_char(p[k]))
            return true;
    return false;
}

/* A GGUF that can be a model: not a vision projector, not a later part of
 * a split file (NAME-00002-of-00003.gguf, llama.cpp's llama_split_path). */
static bool model_gguf(const char *name)
{
    const char *base = strrchr(name, '/'), *p;
    size_t n = strlen(name);
    bool split = n >= 20;
    base = base ? base + 1 : name;
    if (!has_suffix(name, ".gguf") || strncasecmp(base, "mmproj", 6) == 0)
        return false;
    p = split ? name + n - 20 : name;
    for (int i = 1; split && i < 15; i++)
        split = i >= 6 && i < 10 ? p[i] == "-of-"[i - 6] : isdigit((unsigned char)p[i]) != 0;
    return !split || p[0] != '-' || strncmp(p + 1, "00001", 5) == 0;
}

int32_t kvp_hub_pick_gguf(char *const *files, uint32_t n, const struct kvp_hub_ref *r, struct kvp_error *err)
{
    int32_t only = -1, q4km = -1, typed = -1;
    uint32_t count = 0;
    char list[256] = "";

    for (uint32_t i = 0; i < n; i++) {
        const char *base = strrchr(files[i], '/');
        base = base ? base + 1 : files[i];
        if (r->file[0]) {
            if (strcmp(files[i], r->file) == 0)
                return (int32_t)i;
            continue;
        }
        if (!model_gguf(files[i]))
            continue;
        count++;
        only = (int32_t)i;
        if (strlen(list) + strlen(base) + 3 < sizeof list)
            snprintf(list + strlen(list), sizeof list - strlen(list), "%s%s", list[0] ? ", " : "", base);
        if (r->type[0] && typed < 0 && has_word(base, r->type))
            typed = (int32_t)i;
        if (q4km < 0 && has_word(base, "Q4_K_M"))
            q4km = (int32_t)i;
    }
    if (r->file[0]) {
        kvp_fail(err, KVP_ERR_NOTFOUND, "%s@%s has no file '%s'", r->repo, r->rev, r->file);
        return -1;
    }
    if (count == 0) {
        kvp_fail(err, KVP_ERR_NOTFOUND, "%s@%s has no config.json and no GGUF file", r->repo, r->rev);
        return -1;
    }
    if (r->type[0]) {
        if (typed < 0)
            kvp_fail(err, KVP_ERR_NOTFOUND, "%s@%s has no %s GGUF (it has %s)", r->repo, r->rev, r->type, list);
        return typed;
    }
    if (count == 1)
        return only;
    if (q4km < 0)
        kvp_fail(err, KVP_ERR_USAGE, "%s@%s has %u GGUF files and none is Q4_K_M: name one as %s:TYPE (it has %s)",
                 r->repo, r->rev, count, r->repo, list);
    return q4km;
}

enum kvp_status kvp_hub_plan(const struct kvp_hub_ref *r, char *const *files, uint32_t n, uint32_t *want,
                             enum kvp_hub_part *part, uint32_t *n_want, int32_t *model, struct kvp_error *err)
{
    int32_t config = -1, g;
    uint32_t k = 0, shards;
    char **names;

    *n_want = 0;
    *model = -1;
    for (uint32_t i = 0; i < n; i++)
        if (!r->file[0] && !r->type[0] && strcmp(files[i], "config.json") == 0)
            config = (int32_t)i;
    if (config < 0) { /* a GGUF */
        if ((g = kvp_hub_pick_gguf(files, n, r, err)) < 0)
            return err->code;
        if (!has_suffix(files[g], ".gguf"))
            return kvp_fail(err, KVP_ERR_USAGE, "'%s' in %s: kvplan reads a repo's config.json or a GGUF file",
                            files[g], r->repo);
        want[0] = (uint32_t)g;
        part[0] = KVP_HUB_GGUF;
        *n_want = 1;
        *model = g;
        return KVP_OK;
    }
    /* config.json and the top folder's shards, as kvp_safetensors_read reads a folder */
    if (!(names = malloc((n ? n : 1) * sizeof *names)))
        return kvp_fail(err, KVP_ERR_NOMEM, "out of memory");
    for (uint32_t i = 0; i < n; i++)
        if (!strchr(files[i], '/') && has_suffix(files[i], ".safetensors"))
            names[k++] = files[i];
    shards = kvp_safetensors_pick(names, &k, false);
    for (uint32_t i = 0; i < n; i++)
        for (uint32_t j = 0; j < shards; j++)
            if (names[j] == files[i]) {
                want[*n_want] = i;
                part[(*n_want)++] = KVP_HUB_SAFETENSORS;
            }
    free(names);
    want[*n_want] = (uint32_t)config;
    part[(*n_want)++] = KVP_HUB_WHOLE;
    return KVP_OK;
}

enum kvp_status kvp_hub_http_error(const struct kvp_hub_ref *r, const char *endpoint, long status, const char *code,
                                   const char *what, struct kvp_error *err)
{
    const char *id = r->url[0] ? r->url : r->repo;
    if (r->url[0])
        return kvp_fail(err, status == 404 ? KVP_ERR_NOTFOUND : KVP_ERR_IO, "%s: HTTP %ld", id, status);
    if (strcmp(code, "GatedRepo") == 0 || (status == 403 && !code[0]))
        return kvp_fail(err, KVP_ERR_IO,
                        "%s is gated%s: accept its license at https://huggingface.co/%s and set HF_TOKEN to a token "
                        "of that account (HTTP %ld)",
                        id, status == 401 ? " and no token was sent" : " and the token's account has no access",
                        r->repo, status);
    if (strcmp(code, "RevisionNotFound") == 0)
        return kvp_fail(err, KVP_ERR_NOTFOUND, "%s has no revision '%s' (a branch, tag or commit) at %s", id,
                        r->rev, endpoint);
    if (strcmp(code, "EntryNotFound") == 0)
        return kvp_fail(err, KVP_ERR_NOTFOUND, "%s@%s has no file %s", id, r->rev, what);
    if (strcmp(code, "RepoNotFound") == 0 || status == 401 || status == 404)
        return kvp_fail(err, KVP_ERR_NOTFOUND,
                        "no model '%s' at %s (or it is private: set HF_TOKEN); 'kvplan models' lists the built-in ones",
                        id, endpoint);
    return kvp_fail(err, KVP_ERR_IO, "%s: HTTP %ld for %s at %s", id, status, what, endpoint);
}
