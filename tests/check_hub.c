/* check_hub.c -- Hub references, the caches' layout, the Hub's answers and
 * which files of a repo kvplan reads (hub.h); the fetching itself runs
 * against the test Hub in tests/hub.sh. */
#include <sys/stat.h>
#include <unistd.h>

#include "kvplan/hub.h"
#include "testutil.h"

static const char *const COMMIT = "0123456789abcdef0123456789abcdef01234567";

START_TEST(refs_parse)
{
    static const struct {
        const char *s;
        enum kvp_status st;
        const char *repo, *rev, *type, *file;
    } t[] = {
        {"Qwen/Qwen3-32B", KVP_OK, "Qwen/Qwen3-32B", "main", "", ""},
        {"google/gemma-3-12b-it@v1.0", KVP_OK, "google/gemma-3-12b-it", "v1.0", "", ""},
        {"org/name@refs/pr/1", KVP_OK, "org/name", "refs/pr/1", "", ""},
        {"unsloth/Qwen3-30B-A3B-GGUF:Q4_K_M", KVP_OK, "unsloth/Qwen3-30B-A3B-GGUF", "main", "Q4_K_M", ""},
        {"unsloth/Qwen3-30B-A3B-GGUF@main:q8_0", KVP_OK, "unsloth/Qwen3-30B-A3B-GGUF", "main", "q8_0", ""},
        {"hf://org/name", KVP_OK, "org/name", "main", "", ""},
        {"hf://org/name@dev/sub/x-Q4_K_M.gguf", KVP_OK, "org/name", "dev", "", "sub/x-Q4_K_M.gguf"},
        {"hf://org/name/x.gguf", KVP_OK, "org/name", "main", "", "x.gguf"},
        /* paths and names: not a reference at all */
        {"llama-3.1-8b", KVP_ERR_NOTFOUND, "", "", "", ""},
        {"./org/name", KVP_ERR_NOTFOUND, "", "", "", ""},
        {"/abs/path", KVP_ERR_NOTFOUND, "", "", "", ""},
        {"models/llama.yaml", KVP_ERR_NOTFOUND, "", "", "", ""},
        {"a/b/c", KVP_ERR_NOTFOUND, "", "", "", ""},
        {"org--x/name", KVP_ERR_NOTFOUND, "", "", "", ""},
        {"org/-name", KVP_ERR_NOTFOUND, "", "", "", ""},
        {"my dir/x", KVP_ERR_NOTFOUND, "", "", "", ""},
        /* a reference written wrong */
        {"org/name@", KVP_ERR_USAGE, "", "", "", ""},
        {"org/name@../../etc", KVP_ERR_USAGE, "", "", "", ""},
        {"org/name:", KVP_ERR_USAGE, "", "", "", ""},
        {"org/name:Q4 K", KVP_ERR_USAGE, "", "", "", ""},
        {"hf://org", KVP_ERR_USAGE, "", "", "", ""},
        {"hf://org/name/", KVP_ERR_USAGE, "", "", "", ""},
        {"https://example.com/x.bin", KVP_ERR_USAGE, "", "", "", ""},
    };
    for (size_t i = 0; i < N_ELEMS(t); i++) {
        struct kvp_hub_ref r;
        struct kvp_error err = {0};
        enum kvp_status st = kvp_hub_ref_parse(t[i].s, &r, &err);
        ck_assert_msg(st == t[i].st, "'%s': status %d, want %d (%s)", t[i].s, st, t[i].st, err.msg);
        if (st != KVP_OK)
            continue;
        ck_assert_str_eq(r.repo, t[i].repo);
        ck_assert_str_eq(r.rev, t[i].rev);
        ck_assert_str_eq(r.type, t[i].type);
        ck_assert_str_eq(r.file, t[i].file);
    }
}
END_TEST

START_TEST(url_ref)
{
    struct kvp_hub_ref r;
    struct kvp_error err = {0};
    char a[KVP_HUB_PATH_MAX], b[KVP_HUB_PATH_MAX];
    ck_assert_kvp_ok(kvp_hub_ref_parse("https://host/dir/model-Q8_0.gguf", &r, &err), err);
    ck_assert_str_eq(r.url, "https://host/dir/model-Q8_0.gguf");
    ck_assert(kvp_hub_repo_dir("/c", &r, a, sizeof a));
    ck_assert_int_eq(strncmp(a, "/c/urls/", 8), 0);
    ck_assert_uint_eq(strlen(a), 8 + 16);
    ck_assert_kvp_ok(kvp_hub_ref_parse("https://host/dir/other.gguf", &r, &err), err);
    ck_assert(kvp_hub_repo_dir("/c", &r, b, sizeof b));
    ck_assert_str_ne(a, b);
    ck_assert(kvp_hub_is_commit(COMMIT));
    ck_assert(!kvp_hub_is_commit("main"));
    ck_assert(!kvp_hub_is_commit("0123456789ABCDEF0123456789abcdef01234567"));
}
END_TEST

START_TEST(env_roots)
{
    struct kvp_hub_env e;
    setenv("HOME", "/home/u", 1);
    unsetenv("HF_HUB_CACHE");
    unsetenv("HF_HOME");
    unsetenv("XDG_CACHE_HOME");
    unsetenv("HF_ENDPOINT");
    unsetenv("HF_HUB_OFFLINE");
    unsetenv("KVPLAN_CACHE");
    kvp_hub_env_read(&e);
    ck_assert_str_eq(e.hf_cache, "/home/u/.cache/huggingface/hub");
    ck_assert_str_eq(e.cache, "/home/u/.cache/kvplan");
    ck_assert_str_eq(e.endpoint, "https://huggingface.co");
    ck_assert(!e.offline);
    setenv("XDG_CACHE_HOME", "/x", 1);
    setenv("HF_HOME", "/hf", 1);
    setenv("HF_ENDPOINT", "http://127.0.0.1:8000//", 1);
    setenv("HF_HUB_OFFLINE", "True", 1);
    kvp_hub_env_read(&e);
    ck_assert_str_eq(e.hf_cache, "/hf/hub");
    ck_assert_str_eq(e.cache, "/x/kvplan");
    ck_assert_str_eq(e.endpoint, "http://127.0.0.1:8000");
    ck_assert(e.offline);
    setenv("HF_HUB_CACHE", "/hc", 1);
    setenv("HF_HUB_OFFLINE", "0", 1);
    setenv("KVPLAN_CACHE", "/kc", 1);
    kvp_hub_env_read(&e);
    ck_assert_str_eq(e.hf_cache, "/hc");
    ck_assert_str_eq(e.cache, "/kc");
    ck_assert(!e.offline);
}
END_TEST

static int32_t pick(const char *ref, char **files, uint32_t n, struct kvp_error *err)
{
    struct kvp_hub_ref r;
    ck_assert_kvp_ok(kvp_hub_ref_parse(ref, &r, err), *err);
    return kvp_hub_pick_gguf(files, n, &r, err);
}

START_TEST(gguf_pick)
{
    char *files[] = {"README.md", "Qwen3-30B-A3B-Q4_K_M.gguf", "Qwen3-30B-A3B-UD-Q4_K_XL.gguf",
                     "Qwen3-30B-A3B-Q8_0.gguf", "mmproj-F16.gguf", "BF16/Qwen3-30B-A3B-BF16-00001-of-00002.gguf",
                     "BF16/Qwen3-30B-A3B-BF16-00002-of-00002.gguf", "Qwen3-30B-A3B-IQ4_XS.gguf"};
    char *two[] = {"a-Q8_0.gguf", "a-F16.gguf"};
    char *one[] = {"config.json", "tiny-Q8_0.gguf", "mmproj-tiny.gguf"};
    struct kvp_error err = {0};
    ck_assert_int_eq(pick("u/m", files, N_ELEMS(files), &err), 1);           /* Q4_K_M by default */
    ck_assert_int_eq(pick("u/m:q8_0", files, N_ELEMS(files), &err), 3);      /* any case */
    ck_assert_int_eq(pick("u/m:Q4_K_XL", files, N_ELEMS(files), &err), 2);
    ck_assert_int_eq(pick("u/m:BF16", files, N_ELEMS(files), &err), 5);      /* a split file's first part */
    ck_assert_int_eq(pick("u/m:IQ4_XS", files, N_ELEMS(files), &err), 7);
    ck_assert_int_eq(pick("u/m:Q4_XS", files, N_ELEMS(files), &err), -1);    /* IQ4_XS is not Q4_XS */
    ck_assert_int_eq(err.code, KVP_ERR_NOTFOUND);
    ck_assert_ptr_nonnull(strstr(err.msg, "u/m@main has no Q4_XS GGUF (it has Qwen3-30B-A3B-Q4_K_M.gguf"));
    ck_assert_int_eq(pick("u/m:Q4_K", files, N_ELEMS(files), &err), -1);     /* Q4_K_M is not Q4_K */
    ck_assert_int_eq(pick("u/m", one, N_ELEMS(one), &err), 1);               /* the only one, mmproj aside */
    ck_assert_int_eq(pick("u/m", two, N_ELEMS(two), &err), -1);
    ck_assert_int_eq(err.code, KVP_ERR_USAGE);
    ck_assert_str_eq(err.msg, "u/m@main has 2 GGUF files and none is Q4_K_M: name one as u/m:TYPE (it has a-Q8_0.gguf, "
                              "a-F16.gguf)");
    ck_assert_int_eq(pick("hf://u/m/a-F16.gguf", two, N_ELEMS(two), &err), 1);
    ck_assert_int_eq(pick("hf://u/m/b.gguf", two, N_ELEMS(two), &err), -1);
    ck_assert_str_eq(err.msg, "u/m@main has no file 'b.gguf'");
}
END_TEST

START_TEST(plan_files)
{
    char *mistral[] = {"README.md", "config.json", "consolidated.safetensors", "model-00001-of-00002.safetensors",
                       "model-00002-of-00002.safetensors", "model.safetensors.index.json", "params.json",
                       "sub/model.safetensors"};
    char *gguf[] = {"README.md", "tiny-Q4_K_M.gguf", "tiny-Q8_0.gguf"};
    char *none[] = {"README.md"};
    uint32_t want[8], n;
    enum kvp_hub_part part[8];
    int32_t model;
    struct kvp_hub_ref r;
    struct kvp_error err = {0};

    ck_assert_kvp_ok(kvp_hub_ref_parse("mistralai/Mistral-7B-v0.1", &r, &err), err);
    ck_assert_kvp_ok(kvp_hub_plan(&r, mistral, N_ELEMS(mistral), want, part, &n, &model, &err), err);
    ck_assert_uint_eq(n, 3); /* the transformers shards, not consolidated nor a subfolder's; config.json last */
    ck_assert_uint_eq(want[0], 3);
    ck_assert_uint_eq(want[1], 4);
    ck_assert_uint_eq(want[2], 1);
    ck_assert_int_eq(part[0], KVP_HUB_SAFETENSORS);
    ck_assert_int_eq(part[2], KVP_HUB_WHOLE);
    ck_assert_int_eq(model, -1);
    ck_assert_kvp_ok(kvp_hub_ref_parse("test/tiny-GGUF:Q8_0", &r, &err), err);
    ck_assert_kvp_ok(kvp_hub_plan(&r, gguf, N_ELEMS(gguf), want, part, &n, &model, &err), err);
    ck_assert_uint_eq(n, 1);
    ck_assert_int_eq(part[0], KVP_HUB_GGUF);
    ck_assert_int_eq(model, 2);
    ck_assert_kvp_ok(kvp_hub_ref_parse("test/none", &r, &err), err);
    ck_assert_int_eq(kvp_hub_plan(&r, none, N_ELEMS(none), want, part, &n, &model, &err), KVP_ERR_NOTFOUND);
    ck_assert_str_eq(err.msg, "test/none@main has no config.json and no GGUF file");
}
END_TEST

START_TEST(info_answer)
{
    const char *ok = "{\"_id\": \"x\", \"id\": \"org/name\", \"sha\": \"0123456789abcdef0123456789abcdef01234567\", "
                     "\"siblings\": [{\"rfilename\": \"config.json\"}, {\"rfilename\": \"model.safetensors\"}]}";
    const char *bad[] = {
        "[1]",
        "{\"sha\": \"abc\", \"siblings\": []}",
        "{\"sha\": \"0123456789abcdef0123456789abcdef01234567\"}",
        "{\"sha\": \"0123456789abcdef0123456789abcdef01234567\", \"siblings\": [{\"rfilename\": \"../x\"}]}",
        "{\"sha\": \"0123456789abcdef0123456789abcdef01234567\", \"siblings\": [{\"rfilename\": \"/etc/x\"}]}",
        "{\"sha\": \"0123456789abcdef0123456789abcdef01234567\", \"siblings\": [{\"size\": 3}]}",
    };
    struct kvp_hub_info info;
    struct kvp_error err = {0};
    ck_assert_kvp_ok(kvp_hub_info_parse(ok, strlen(ok), "api", &info, &err), err);
    ck_assert_str_eq(info.sha, COMMIT);
    ck_assert_uint_eq(info.n_files, 2);
    ck_assert_str_eq(info.files[1], "model.safetensors");
    kvp_hub_info_free(&info);
    for (size_t i = 0; i < N_ELEMS(bad); i++) {
        ck_assert_msg(kvp_hub_info_parse(bad[i], strlen(bad[i]), "api", &info, &err) != KVP_OK, "%s", bad[i]);
        ck_assert_ptr_null(info.files);
    }
}
END_TEST

static void put(const char *path, const char *text)
{
    FILE *f = fopen(path, "w");
    ck_assert_ptr_nonnull(f);
    fputs(text, f);
    fclose(f);
}

/* huggingface_hub's layout: refs/main holds the commit, snapshots/COMMIT the files. */
START_TEST(cache_layout)
{
    char root[] = "/tmp/kvp-hub-XXXXXX", p[KVP_HUB_PATH_MAX], path[KVP_HUB_PATH_MAX];
    struct kvp_hub_ref r;
    struct kvp_error err = {0};

    ck_assert_ptr_nonnull(mkdtemp(root));
    ck_assert_kvp_ok(kvp_hub_ref_parse("Org/Model-7B", &r, &err), err);
    ck_assert(kvp_hub_repo_dir(root, &r, p, sizeof p));
    ck_assert_ptr_nonnull(strstr(p, "/models--Org--Model-7B"));
    ck_assert_int_eq(kvp_hub_cache_find(root, &r, true, path, sizeof path, &err), KVP_ERR_NOTFOUND);
    snprintf(path, sizeof path, "%s/models--Org--Model-7B", root);
    mkdir(path, 0755);
    snprintf(path, sizeof path, "%s/models--Org--Model-7B/refs", root);
    mkdir(path, 0755);
    snprintf(path, sizeof path, "%s/models--Org--Model-7B/snapshots", root);
    mkdir(path, 0755);
    snprintf(path, sizeof path, "%s/models--Org--Model-7B/snapshots/%s", root, COMMIT);
    mkdir(path, 0755);
    snprintf(path, sizeof path, "%s/models--Org--Model-7B/refs/main", root);
    put(path, "0123456789abcdef0123456789abcdef01234567");
    /* a snapshot without config.json and no GGUF: not there */
    ck_assert_int_eq(kvp_hub_cache_find(root, &r, true, path, sizeof path, &err), KVP_ERR_NOTFOUND);
    snprintf(path, sizeof path, "%s/models--Org--Model-7B/snapshots/%s/config.json", root, COMMIT);
    put(path, "{}");
    ck_assert_kvp_ok(kvp_hub_cache_find(root, &r, true, p, sizeof p, &err), err);
    snprintf(path, sizeof path, "%s/models--Org--Model-7B/snapshots/%s", root, COMMIT);
    ck_assert_str_eq(p, path);
    /* --refresh: a branch is not read from refs/; a commit needs no refs/ */
    ck_assert_int_eq(kvp_hub_cache_find(root, &r, false, p, sizeof p, &err), KVP_ERR_NOTFOUND);
    ck_assert_kvp_ok(kvp_hub_ref_parse("Org/Model-7B@0123456789abcdef0123456789abcdef01234567", &r, &err), err);
    ck_assert_kvp_ok(kvp_hub_cache_find(root, &r, false, p, sizeof p, &err), err);
    ck_assert_kvp_ok(kvp_hub_ref_parse("Org/Model-7B@v2", &r, &err), err);
    ck_assert_int_eq(kvp_hub_cache_find(root, &r, true, p, sizeof p, &err), KVP_ERR_NOTFOUND);
    /* a GGUF picked from .kvplan-files: the repo's list, not only what was fetched */
    snprintf(path, sizeof path, "%s/models--Org--Model-7B/snapshots/%s/.kvplan-files", root, COMMIT);
    put(path, "config.json\nm-Q4_K_M.gguf\nm-Q8_0.gguf\n");
    snprintf(path, sizeof path, "%s/models--Org--Model-7B/snapshots/%s/m-Q8_0.gguf", root, COMMIT);
    put(path, "GGUF");
    ck_assert_kvp_ok(kvp_hub_ref_parse("Org/Model-7B:Q8_0", &r, &err), err);
    ck_assert_kvp_ok(kvp_hub_cache_find(root, &r, true, p, sizeof p, &err), err);
    ck_assert_str_eq(p, path);
    ck_assert_kvp_ok(kvp_hub_ref_parse("Org/Model-7B:Q4_K_M", &r, &err), err);
    ck_assert_int_eq(kvp_hub_cache_find(root, &r, true, p, sizeof p, &err), KVP_ERR_NOTFOUND);
    snprintf(path, sizeof path, "rm -rf '%s'", root);
    ck_assert_int_eq(system(path), 0);
}
END_TEST

static Suite *suite(void)
{
    Suite *s = suite_create("hub");
    TCase *core = tcase_create("core");
    tcase_add_test(core, refs_parse);
    tcase_add_test(core, url_ref);
    tcase_add_test(core, env_roots);
    tcase_add_test(core, gguf_pick);
    tcase_add_test(core, plan_files);
    tcase_add_test(core, info_answer);
    tcase_add_test(core, cache_layout);
    suite_add_tcase(s, core);
    return s;
}

int main(void)
{
    return run_suite(suite());
}
