/* view.h -- drawing the TUI's state with curses (the only curses code is in
 * view.c and tui.c). The view reads a struct tui_state and never changes it.
 */
#ifndef KVPLAN_TUI_VIEW_H
#define KVPLAN_TUI_VIEW_H

#include <stdbool.h>

#include "state.h"

#define TUI_MIN_COLS 80
#define TUI_MIN_ROWS 24

/* How the terminal can draw, decided once at start-up. */
struct tui_look {
    bool color; /* the terminal has colours and NO_COLOR is not set */
    bool utf8;  /* the locale's charset is UTF-8: bars in block glyphs */
};

/* Draw the whole screen for s at the current terminal size (LINES x COLS):
 * the layout at 80x24 and larger, a request for a bigger terminal below. */
void tui_view_draw(const struct tui_state *s, const struct tui_look *look);

/* Colour pairs; call once after start_color when look->color. */
void tui_view_colors(void);

#endif
