/* tui.c -- `kvplan tui [MODEL | PLAN.yaml]`: the curses main loop.
 *
 * Reads a key, maps it to the model's enum tui_key, lets the model
 * (state.c) change the setup and recompute, and redraws (view.c). Nothing
 * here computes a figure.
 */
#include <curses.h>
#include <langinfo.h>
#include <locale.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <time.h>
#include <unistd.h>

#include "cli.h"
#include "state.h"
#include "view.h"

/* the deployment options (settings.h), as `kvplan fit` takes them, then these */
static const struct cli_opt tui_opts[] = {
    {"bench", "N", "no screen: time N recomputes of the setup and print the time per keypress", NULL},
    {NULL, NULL, NULL, NULL},
};
static struct cli_opt opts[KVP_SETTINGS_MAX + 4];

static const struct cli_cmd cmd = {
    "tui", "[MODEL | PLAN.yaml] [options]",
    "Size a deployment interactively: every setting of 'kvplan fit' is a field (the options\n"
    "below set where it starts; the GPU defaults to the catalog's first). Change them with the\n"
    "keyboard and watch memory and capacity follow; 'w' simulates a workload on it (the\n"
    "figures of 'kvplan simulate'); 's' saves the setup as a plan for 'kvplan check'.\n"
    "Press ? inside for keys.",
    opts,
};

/* curses key codes -> the model's keys; -1 for keys the model has no use for */
static int map_key(int ch)
{
    switch (ch) {
    case KEY_UP: return TUI_KEY_UP;
    case KEY_DOWN: return TUI_KEY_DOWN;
    case KEY_LEFT: return TUI_KEY_LEFT;
    case KEY_RIGHT: return TUI_KEY_RIGHT;
    case KEY_ENTER:
    case '\n':
    case '\r': return TUI_KEY_ENTER;
    case KEY_BACKSPACE:
    case 127:
    case 8: return TUI_KEY_BACKSPACE;
    case 27: return TUI_KEY_ESC;
    case '\t': return TUI_KEY_TAB;
    case KEY_BTAB: return TUI_KEY_BTAB;
    case KEY_PPAGE: return TUI_KEY_PGUP;
    case KEY_NPAGE: return TUI_KEY_PGDN;
    case KEY_HOME: return TUI_KEY_HOME;
    case KEY_END: return TUI_KEY_END;
    case KEY_RESIZE: return TUI_KEY_RESIZE;
    default: return ch >= 0x20 && ch < 0x7f ? ch : -1;
    }
}

static bool utf8_locale(void)
{
    const char *cs = nl_langinfo(CODESET);
    return cs && (strcasecmp(cs, "UTF-8") == 0 || strcasecmp(cs, "utf8") == 0);
}

static int run(struct tui_state *s)
{
    struct tui_look look = {0};
    const char *no_color = getenv("NO_COLOR");
    SCREEN *scr;
    int ch;

    if (!isatty(STDIN_FILENO) || !isatty(STDOUT_FILENO))
        return cli_usage_error("tui: needs a terminal (stdin and stdout); for figures use 'kvplan fit'");
    look.utf8 = utf8_locale();
    if (!(scr = newterm(NULL, stdout, stdin)))
        return cli_usage_error("tui: cannot start the terminal (TERM='%s')", getenv("TERM") ? getenv("TERM") : "");
    set_term(scr);
    cbreak();
    noecho();
    keypad(stdscr, TRUE);
    set_escdelay(25); /* Esc cancels at once, not after a second */
    curs_set(0);
    /* https://no-color.org: present and not empty disables colour */
    look.color = has_colors() && !(no_color && no_color[0]);
    if (look.color) {
        start_color();
        tui_view_colors();
    }
    tui_view_draw(s, &look);
    while ((ch = getch()) != ERR) {
        int k = map_key(ch);
        enum tui_result r;
        if (k < 0)
            continue;
        r = tui_handle(s, k);
        if (r == TUI_QUIT)
            break;
        if (r == TUI_REDRAW)
            tui_view_draw(s, &look);
    }
    endwin();
    delscreen(scr);
    return CLI_OK;
}

/* Seconds per full redraw of s at 80x24 into /dev/null (every cell
 * repainted, the worst a keypress costs); 0 when no terminal type is known. */
static double bench_draw(const struct tui_state *s, uint32_t n)
{
    struct tui_look look = {false, utf8_locale()};
    struct timespec a, b;
    FILE *out = fopen("/dev/null", "w"), *in = fopen("/dev/null", "r");
    SCREEN *scr = NULL;
    double t = 0;

    if (out && in && n && getenv("TERM") && (scr = newterm(NULL, out, in))) {
        set_term(scr);
        resizeterm(TUI_MIN_ROWS, TUI_MIN_COLS);
        clock_gettime(CLOCK_MONOTONIC, &a);
        for (uint32_t i = 0; i < n; i++) {
            clearok(stdscr, TRUE);
            tui_view_draw(s, &look);
        }
        clock_gettime(CLOCK_MONOTONIC, &b);
        endwin();
        delscreen(scr);
        t = ((double)(b.tv_sec - a.tv_sec) + (double)(b.tv_nsec - a.tv_nsec) / 1e9) / n;
    }
    if (out)
        fclose(out);
    if (in)
        fclose(in);
    return t;
}

int cmd_tui(int argc, char **argv)
{
    const char *pos[1], *b;
    int npos, rc, bad;
    const struct kvp_catalog *cat = NULL;
    const struct kvp_gpu_catalog *gpus = NULL;
    struct tui_state *s = NULL;
    struct kvp_settings set;
    struct kvp_error err = {0};

    setlocale(LC_ALL, "");
    if (!opts[0].name)
        cli_deploy_opts(opts, sizeof opts / sizeof opts[0], tui_opts);
    if ((rc = cli_parse(&cmd, argc, argv, pos, 1, &npos)) != CLI_OK || (rc = cli_deploy_settings(&cmd, &set)) != CLI_OK)
        return rc;
    if ((rc = cli_catalog(&cat)) != CLI_OK || (rc = cli_gpus(&gpus)) != CLI_OK)
        return rc;
    /* with no MODEL, a small common one to start from */
    if (tui_init(&s, cat, gpus, npos ? pos[0] : kvp_catalog_find(cat, "llama-3.1-8b") ? "llama-3.1-8b" : NULL, &set,
                 &bad, &err) != KVP_OK) {
        char opt[48];
        if (bad < 0)
            return cli_error(&err);
        snprintf(opt, sizeof opt, "%s", kvp_setting_at((uint32_t)bad)->key); /* as kvplan fit names it */
        for (char *p = opt; *p; p++)
            *p = *p == '_' ? '-' : *p;
        return cli_usage_error("--%s: %s", opt, err.msg);
    }
    if ((b = cli_opt(&cmd, "bench"))) {
        uint64_t n = 0;
        if ((rc = cli_count(&cmd, "bench", 1, &n)) != CLI_OK) {
            tui_free(s);
            return rc;
        }
        double t = tui_bench(s, n > 1000000 ? 1000000 : (uint32_t)n),
               dt = bench_draw(s, n > 10000 ? 10000 : (uint32_t)n);
        printf("tui: %s on %s, %s: %.1f us per recompute", s->model->name, s->gpu ? s->gpu->id : "?",
               kvp_engine_info(s->d.engine)->name, t * 1e6);
        if (dt > 0)
            printf(", %.1f us per full redraw at 80x24", dt * 1e6);
        printf(" (%llu runs; a frame is 16667 us)\n", (unsigned long long)n);
        tui_free(s);
        return CLI_OK;
    }
    rc = run(s);
    tui_free(s);
    return rc;
}
