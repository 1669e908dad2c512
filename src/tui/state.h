/* state.h -- the TUI's state and key handling, without curses.
 *
 * `kvplan tui` is a curses-free state (this file, state.c, state_plan.c,
 * state_sim.c: the simulate view's workload and run) and views
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
#include "kvplan/kv.h"
#include "kvplan/error.h"
#include "kvplan/gpu.h"
#include "kvplan/plan.h"
#include "kvplan/render.h"
#include "kvplan/settings.h"
#include "kvplan/sim.h"

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
 * takes, parsed and printed by the table (kvp_settings_put, kvp_setting_text)
 * -- then one per row of the workload table (state_sim.c: the keys of a
 * plan's `workloads`, as `kvplan simulate`'s options name them). The fit view
 * shows and edits the first two kinds, the simulate view the workload's. */
#define TUI_FIELD_MODEL 0u
uint32_t tui_field_count(void);
/* The field of key ("model", a setting's key such as "tp", a workload's
 * such as "rate"), or -1. */
int tui_field_find(const char *key);

/* The screens: the fit (memory, capacity, the derivation) and the
 * simulate view (kvp_sim_run of a synthetic workload on the deployment). */
enum tui_view { TUI_VIEW_FIT, TUI_VIEW_SIM };

enum tui_mode {
    TUI_MODE_MAIN,       /* arrows move between fields and change them */
    TUI_MODE_EDIT,       /* typing a value for the selected field */
    TUI_MODE_PICK_MODEL, /* type-to-filter list of models (or a path) */
    TUI_MODE_PICK_GPU,   /* type-to-filter list of GPUs */
    TUI_MODE_SAVE,       /* typing the plan file's path */
    TUI_MODE_HELP,       /* the help overlay; any key closes it */
    TUI_MODE_ASK_SPLIT,  /* more than one GPU: do the GPUs mean TP (t, Enter) or PP (p)? */
    TUI_MODE_ASK_LIMIT,  /* saving a run that preempted: the max_preemptions to assert (0 unless typed) */
};

/* What the explain panel shows: a derivation, or the launch command (kvp_emit_command, as `kvplan fit --emit`). */
enum tui_explain { TUI_EXPLAIN_FIT, TUI_EXPLAIN_KV, TUI_EXPLAIN_LAUNCH, TUI_EXPLAIN_COUNT };

#define TUI_INPUT_MAX 256
#define TUI_PICK_MAX 512
#define TUI_CHART_POINTS 24 /* the most columns the chart draws; fewer on a narrow panel */
#define TUI_STATUS_MAX 600
/* The simulate view draws at most this many output tokens (requests x the
 * longest answer): a run keeps its time series for the chart, one entry per
 * step. `kvplan simulate` runs longer workloads. */
#define TUI_SIM_MAX_OUTPUT_TOKENS 2000000u

/* An assertion of the opened plan's first deployment, kept to be written back. */
struct tui_check {
    enum kvp_check_kind kind;
    double limit;                        /* in the kind's unit (plan.h) */
    uint64_t context, concurrency;       /* the modifiers; 0: not given */
    char workload[KVP_PLAN_NAME_MAX];    /* the workload it names; "" for none */
    char name[KVP_PLAN_NAME_MAX];        /* its 'name'; "" for none */
};

/* A named workload of a plan: a trace (kept by its path) or a synthetic one. */
struct tui_workload {
    char name[KVP_PLAN_NAME_MAX];
    char trace[KVP_PLAN_PATH_MAX]; /* the trace file, absolute; "" for a synthetic workload */
    struct kvp_synth synth;        /* synthetic: what kvp_workload_synth draws */
    double max_queue_s;            /* sustained: queueing p99 at most this */
};

/* One GPU's memory, split into what the stacked bar shows (bytes). */
struct tui_bar {
    uint64_t total;   /* memory as the device reports it */
    uint64_t weights; /* weights on this GPU */
    uint64_t kv;      /* KV the requested concurrency x context needs (llama.cpp: its buffer), and a
                       * hybrid's recurrent-state pool */
    uint64_t reserve; /* the start-up reserve, as `kvplan fit` and the page name it: activations
                       * (llama.cpp: compute buffers), non-torch memory, CUDA graphs */
    uint64_t free;    /* room left for more KV */
    uint64_t rest;    /* the rest of the device: outside the engine's memory fraction */
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
    char save_path[TUI_INPUT_MAX]; /* TUI_MODE_ASK_LIMIT: the path the plan goes to */
    /* the user's max_preemptions for a saved plan, asked when the run preempted
     * (a limit of the run's own count would make its failure the CI's limit) */
    bool preempt_asked, preempt_omit;
    uint64_t preempt_limit;
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
    /* the simulate view (state_sim.c) */
    enum tui_view view;
    uint32_t fit_field;        /* the fit view's field while the simulate view is shown */
    struct tui_workload work;  /* the view's workload: its fields edit it */
    bool work_used;            /* the view was opened or the plan gave the workload: a saved plan holds it */
    int32_t work_at;           /* its place in plan_wl (it came from the plan), or -1 */
    struct tui_workload *plan_wl; /* owned: the opened plan's workloads (of its first deployment's file) */
    uint32_t n_plan_wl;
    struct tui_check *plan_checks; /* owned: the assertions of its first deployment */
    uint32_t n_plan_checks;
    bool sim_stale;            /* an input changed since the last run: tui_sim_update runs again */
    bool sim_ok;               /* sim, sim_cfg hold the run of work on the deployment */
    struct kvp_error sim_err;  /* why not sim_ok */
    struct kvp_sim_config sim_cfg;
    struct kvp_sim_result sim; /* owned, with its series */
    uint64_t sim_runs;         /* kvp_sim_run calls so far */
    bool have_max_rate;        /* max_rate holds kvp_sim_max_rate for the current inputs ('r') */
    double max_rate;
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

/* The fields the current view shows and moves between: [*first, *first + *n). */
void tui_view_fields(const struct tui_state *s, uint32_t *first, uint32_t *n);

/* ---- the simulate view (state_sim.c) ----
 * The workload's fields: the rows of sim.h's table (kvp_synth_key_at), read
 * with kvp_synth_set and printed with kvp_synth_text. */
/* The text of row's next value up (dir > 0) or down from w: doubled and
 * halved (add false: the arrows) or by one step (add: + and -). */
const char *tui_wl_step(const struct tui_workload *w, uint32_t row, int dir, bool add, char *buf, uint32_t n);
/* The workload the view starts from, named "tui" (or "tui-2" ... beside the plan's). */
void tui_wl_default(const struct tui_state *s, struct tui_workload *w);
/* Whether w can be simulated by the view: it draws (kvp_workload_synth's
 * checks) and holds at most TUI_SIM_MAX_OUTPUT_TOKENS; else err says why. */
enum kvp_status tui_wl_check(const struct tui_workload *w, struct kvp_error *err);

/* Run the view's workload on the deployment when an input changed since the
 * last run (sim_stale): the pool and limits kvplan simulate uses
 * (kvp_sim_config_from_fit with the GPU's roofline), the series kept.
 * Errors (no fit, an engine not simulated, a request too long) go to sim_err. */
void tui_sim_update(struct tui_state *s);
/* kvp_sim_max_rate of the view's workload into max_rate ('r'; it runs the
 * workload some twenty times). False, with err, when it cannot run. */
bool tui_sim_find_max_rate(struct tui_state *s, struct kvp_error *err);
/* Column col of ncols over the run's duration: the step in that stretch of
 * time with the most blocks in use (the state carried over where no step
 * ends in it). False when there is no series. */
bool tui_sim_column(const struct tui_state *s, uint32_t col, uint32_t ncols, struct kvp_sim_step *out);
/* Free what the simulate view owns (tui_free does). */
void tui_sim_free(struct tui_state *s);

/* Plan files (state_plan.c): write the setup as a `kvplan check` plan,
 * atomically (a temporary file in the same directory, then rename), and
 * read one back into the setup: its model, and its deployment as settings
 * (s->set), which tui_init then applies. A plan's workloads (those its
 * first deployment can name) are kept and written back; its first
 * synthetic one becomes the simulate view's; so are the first deployment's
 * assertions. The view's workload, once used, is written with assertions on
 * what the view shows, in place of the plan's unnamed ones of the same kind
 * on it: max_preemptions (0 when the run had none, else the limit the user
 * answered, s->preempt_limit, or none) and min_sustained_rate (the rate 'r'
 * found, rounded down to three digits). tui_plan_asks_limit: whether saving
 * asks that limit first (the view's run preempted). */
bool tui_plan_asks_limit(const struct tui_state *s);
enum kvp_status tui_plan_save(const struct tui_state *s, const char *path, struct kvp_error *err);
enum kvp_status tui_plan_load(struct tui_state *s, const char *path, struct kvp_error *err);

/* The settings that give d (with gpu) for m: every row whose text differs
 * from the engine's default deployment, the engine and the GPU always.
 * kvp_settings_apply of the result gives d back. */
void tui_settings_of(const struct kvp_deploy *d, const struct kvp_gpu *gpu, const struct kvp_model *m,
                     struct kvp_settings *out);

#endif
