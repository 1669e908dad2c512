/* state.h -- the TUI's state and key handling, without curses.
 *
 * `kvplan tui` is a curses-free state (this file, state.c, state_plan.c) and views
 * (view.c, tui.c: the only curses code). The state holds the setup a user
 * edits -- the model and every setting of settings.h's table, kept as
 * `kvplan fit` takes them (struct kvp_settings) -- and after each change
 * applies them (kvp_settings_apply, as `kvplan fit` does) and recomputes every
 * figure through libkvplan. Views only draw what the state holds, so the TUI is
 * tested by feeding keys here (tests/check_tui.c) with no terminal.
 *
 *     struct tui_state *s = NULL;
 *     struct kvp_error err = {0};
 *     if (tui_init(&s, cat, gpus, "llama-3.1-8b", NULL, NULL, &err) != KVP_OK) ...;
 *     tui_handle(s, TUI_KEY_DOWN);        // select the next field
 *     tui_handle(s, TUI_KEY_RIGHT);       // double it / next choice
 *     printf("%.2f requests fit\n", s->fit.max_concurrency);
 *     tui_free(s);
 *
 * The state borrows the two catalogs (they must outlive it) and owns the
 * model it loaded; tui_free releases it (NULL is a no-op).
 */
#ifndef KVPLAN_TUI_STATE_H
#define KVPLAN_TUI_STATE_H

#include <stdbool.h>
#include <stdint.h>

#include "kvplan/catalog.h"
#include "kvplan/deploy.h"
#include "kvplan/engine.h"
#include "kvplan/error.h"
#include "kvplan/gpu.h"
#include "kvplan/render.h"
#include "kvplan/settings.h"

/* Keys the model understands: printable ASCII as itself, the rest below.
 * The view maps curses key codes onto these, so the model needs no curses. */
enum tui_key {
    TUI_KEY_UP = 0x1000,
    TUI_KEY_DOWN,
    TUI_KEY_LEFT,
    TUI_KEY_RIGHT,
    TUI_KEY_ENTER,
    TUI_KEY_BACKSPACE,
    TUI_KEY_ESC,
    TUI_KEY_TAB,
    TUI_KEY_BTAB,
    TUI_KEY_PGUP,
    TUI_KEY_PGDN,
    TUI_KEY_HOME,
    TUI_KEY_END,
    TUI_KEY_RESIZE,
};

/* What a key did: nothing to redraw, something changed, or leave. */
enum tui_result { TUI_HANDLED, TUI_REDRAW, TUI_QUIT };

/* The fields, in screen order: the model (field 0), then one field per row
 * of settings.h's table, in the table's order -- every setting `kvplan fit`
 * takes, parsed and printed by the table (kvp_settings_put, kvp_setting_text). */
#define TUI_FIELD_MODEL 0u
uint32_t tui_field_count(void);
/* The field of key ("model", or a setting's key such as "tp"), or -1. */
int tui_field_find(const char *key);

enum tui_mode {
    TUI_MODE_MAIN,       /* arrows move between fields and change them */
    TUI_MODE_EDIT,       /* typing a value for the selected field */
    TUI_MODE_PICK_MODEL, /* type-to-filter list of models (or a path) */
    TUI_MODE_PICK_GPU,   /* type-to-filter list of GPUs */
    TUI_MODE_SAVE,       /* typing the plan file's path */
    TUI_MODE_HELP,       /* the help overlay; any key closes it */
    TUI_MODE_ASK_SPLIT,  /* more than one GPU: do the GPUs mean TP (t, Enter) or PP (p)? */
};

/* Which derivation the explain panel shows. */
enum tui_explain { TUI_EXPLAIN_FIT, TUI_EXPLAIN_KV, TUI_EXPLAIN_COUNT };

#define TUI_INPUT_MAX 256
#define TUI_PICK_MAX 512
#define TUI_CHART_POINTS 12
#define TUI_STATUS_MAX 600

/* One GPU's memory, split into what the stacked bar shows (bytes). */
struct tui_bar {
    uint64_t total;   /* memory as the device reports it */
    uint64_t weights; /* weights on this GPU */
    uint64_t kv;      /* KV the requested concurrency x context needs (llama.cpp: its buffer) */
    uint64_t reserve; /* held back: activations, non-torch, and memory outside the engine's fraction */
    uint64_t free;    /* room left for more KV */
    uint64_t over;    /* how much the setup is short (0 when it fits) */
};

/* KV of the requested batch at the context by layer kind (ideal rule, whole model). */
struct tui_kind_row {
    enum kvp_layer_kind kind;
    uint32_t layers;
    uint64_t tokens; /* cached per layer and sequence */
    uint64_t bytes;  /* K + V + state, all layers of the kind, all sequences */
};

struct tui_state {
    /* borrowed */
    const struct kvp_catalog *cat;
    const struct kvp_gpu_catalog *gpus;
    /* the setup */
    struct kvp_model *model;  /* owned */
    struct kvp_settings set;  /* what the user gave, row by row, as `kvplan fit` takes it */
    const struct kvp_gpu *gpu; /* kvp_settings_apply(set): the named GPU (NULL: a memory size) */
    struct kvp_deploy d;       /* kvp_settings_apply(set) for the model: what is computed */
    /* navigation */
    enum tui_mode mode;
    uint32_t field;           /* < tui_field_count() */
    uint32_t ask_gpus;        /* TUI_MODE_ASK_SPLIT: the GPU count asked about */
    enum tui_explain explain;
    uint32_t explain_scroll; /* first line of the derivation shown */
    char input[TUI_INPUT_MAX]; /* text typed in EDIT, PICK and SAVE modes */
    uint32_t input_len;
    uint32_t pick[TUI_PICK_MAX]; /* catalog indices that match input */
    uint32_t n_pick, pick_sel;
    char plan_path[TUI_INPUT_MAX]; /* last saved or opened plan ("" = none) */
    char status[TUI_STATUS_MAX];   /* a line for the user: what happened, or an error */
    char note[TUI_STATUS_MAX / 2]; /* what the last edit changed besides its field, shown before the fit */
    bool status_error;
    /* results of the last recompute (valid when ok) */
    bool ok;
    struct kvp_error err;      /* why not ok */
    struct kvp_fit fit;        /* kvp_fit_compute: as `kvplan fit` */
    struct kvp_kv_plan kv;     /* kvp_kv_compute at context x concurrency, whole model */
    bool have_roofline;
    struct kvp_roofline roof;
    uint32_t n_kinds;
    struct tui_kind_row kinds[KVP_LAYER_KIND_COUNT];
    uint32_t n_chart;
    uint64_t chart_context[TUI_CHART_POINTS]; /* tokens per request */
    uint64_t chart_kv[TUI_CHART_POINTS];      /* KV required per GPU at that context, 0 = error */
};

/* Set up for MODEL (a catalog name, HF id or path), or for the first
 * deployment of a plan file when arg ends in .yaml/.yml and holds
 * `kvplan_plan:`; NULL picks the first catalog model. set (NULL: none) is
 * the settings given on the command line, over the plan's; with no GPU in
 * either, the catalog's first. On failure *out is NULL, err says why and
 * *bad_row (when not NULL) is the setting that did not apply (-1: none). */
enum kvp_status tui_init(struct tui_state **out, const struct kvp_catalog *cat, const struct kvp_gpu_catalog *gpus,
                         const char *arg, const struct kvp_settings *set, int *bad_row, struct kvp_error *err);
void tui_free(struct tui_state *s);

/* Apply one key (enum tui_key or a printable character). */
enum tui_result tui_handle(struct tui_state *s, int key);

/* Recompute every figure from the setup. Sets s->ok, s->err. */
void tui_recompute(struct tui_state *s);

/* The field's label (the plan key, "model") and its current value as text:
 * kvp_setting_text of the deployment; where that is empty (the engine
 * decides), what the fit chose or "default". */
const char *tui_field_label(uint32_t f);
const char *tui_field_value(const struct tui_state *s, uint32_t f, char *buf, uint32_t n);
/* Whether the user gave field f a value (the model always counts as given);
 * the view dims the others. */
bool tui_field_given(const struct tui_state *s, uint32_t f);
/* The field's one-line help (settings.h's), for the edit prompt. */
const char *tui_field_help(uint32_t f);

/* GPU i's stacked bar (i < d.n_gpus; every rank is the busiest one except
 * under llama.cpp, which splits layers unevenly). */
void tui_bar_of(const struct tui_state *s, uint32_t i, struct tui_bar *b);

/* The derivation the explain panel shows, appended to b. */
void tui_explain_text(const struct tui_state *s, struct kvp_buf *b);

/* Name of a pick-list entry (model or GPU) for display. */
const char *tui_pick_name(const struct tui_state *s, uint32_t i);

/* Requests at the context: d.concurrency, 1 where none is given (as
 * `kvplan fit` reads it). */
uint64_t tui_batch(const struct tui_state *s);

/* Time n recomputes of the current setup; returns seconds per recompute
 * (for `make bench`: one keypress must cost well under a 16 ms frame). */
double tui_bench(struct tui_state *s, uint32_t n);

/* Plan files (state_plan.c): write the setup as a `kvplan check` plan,
 * atomically (a temporary file in the same directory, then rename), and
 * read one back into the setup: its model, and its deployment as settings
 * (s->set), which tui_init then applies. */
enum kvp_status tui_plan_save(const struct tui_state *s, const char *path, struct kvp_error *err);
enum kvp_status tui_plan_load(struct tui_state *s, const char *path, struct kvp_error *err);

/* The settings that give d (with gpu) for m: every row whose text differs
 * from the engine's default deployment, the engine and the GPU always.
 * kvp_settings_apply of the result gives d back. */
void tui_settings_of(const struct kvp_deploy *d, const struct kvp_gpu *gpu, const struct kvp_model *m,
                     struct kvp_settings *out);

#endif
