# kvplan -- KV-cache memory planner. `make help` lists the targets.
.SUFFIXES:

PREFIX   ?= /usr/local
DATADIR  ?= $(PREFIX)/share/kvplan
VERSION  := 0.1.0
ifeq ($(origin CC),default)
CC := cc
endif
PKG_CONFIG ?= pkg-config

WARN     := -Wall -Wextra -Wpedantic -Wshadow -Wstrict-prototypes -Wmissing-prototypes
CFLAGS   ?= -O2 -g
ALL_CFLAGS = -std=c11 -D_POSIX_C_SOURCE=200809L $(WARN) $(CFLAGS) $(EXTRA_CFLAGS) -Iinclude -Isrc/lib \
             -MMD -MP -DKVP_VERSION='"$(VERSION)"' -DKVP_DATADIR='"$(DATADIR)"' $(YAML_CFLAGS)
LDLIBS   := -lm

ifdef WERROR
ALL_CFLAGS += -Werror
endif
ifdef SANITIZE
ALL_CFLAGS += -fsanitize=$(SANITIZE) -fno-omit-frame-pointer -fno-sanitize-recover=all
LDFLAGS  += -fsanitize=$(SANITIZE)
BUILD    := build/san
else
BUILD    := build/rel
endif

YAML_CFLAGS := $(shell $(PKG_CONFIG) --cflags yaml-0.1 2>/dev/null)
YAML_LIBS   := $(shell $(PKG_CONFIG) --libs yaml-0.1 2>/dev/null || echo -lyaml)
CHECK_CFLAGS := $(shell $(PKG_CONFIG) --cflags check 2>/dev/null)
CHECK_LIBS   := $(shell $(PKG_CONFIG) --libs check 2>/dev/null || echo -lcheck)
CURSES_CFLAGS := $(shell $(PKG_CONFIG) --cflags ncursesw 2>/dev/null)
CURSES_LIBS   := $(shell $(PKG_CONFIG) --libs ncursesw 2>/dev/null || echo -lncursesw)

# libkvplan: the engine, parsers, renderers (src/lib) and the reference decoder (src/ref)
LIB_SRC  := $(wildcard src/lib/*.c src/ref/*.c)
# the TUI's curses-free model (src/tui/model*.c) is linked into the tests too;
# its views (the only curses code) only into the binary
TUI_MODEL_SRC := $(wildcard src/tui/model*.c)
TUI_VIEW_SRC  := $(filter-out $(TUI_MODEL_SRC),$(wildcard src/tui/*.c))
CLI_SRC  := $(wildcard src/cli/*.c) $(TUI_MODEL_SRC) $(TUI_VIEW_SRC)
TEST_SRC := $(wildcard tests/check_*.c)
LIB_OBJ  := $(LIB_SRC:%.c=$(BUILD)/%.o)
CLI_OBJ  := $(CLI_SRC:%.c=$(BUILD)/%.o)
TUI_MODEL_OBJ := $(TUI_MODEL_SRC:%.c=$(BUILD)/%.o)
TEST_BIN := $(TEST_SRC:tests/%.c=$(BUILD)/tests/%)
LIB      := $(BUILD)/libkvplan.a
BIN      := $(BUILD)/kvplan

.PHONY: all deps run check clean install help
all: $(BIN) kvplan

help:
	@echo "make            build libkvplan.a and kvplan"
	@echo "make run        install missing Debian packages, build, size the default model"
	@echo "make check      build and run the test suites (SANITIZE=address,undefined for sanitizers)"
	@echo "make install    PREFIX=/usr/local: binary, headers, man page, pkg-config, models"

# Installs the Debian packages the build needs when pkg-config cannot find them.
deps:
	@sh .ci/deps.sh

$(BUILD)/%.o: %.c
	@mkdir -p $(@D)
	$(CC) $(ALL_CFLAGS) -c $< -o $@

$(BUILD)/src/tui/%.o: src/tui/%.c
	@mkdir -p $(@D)
	$(CC) $(ALL_CFLAGS) $(CURSES_CFLAGS) -Isrc/cli -c $< -o $@

$(LIB): $(LIB_OBJ)
	@mkdir -p $(@D)
	$(AR) rcs $@ $^

$(BIN): $(CLI_OBJ) $(LIB)
	$(CC) $(LDFLAGS) $(CLI_OBJ) $(LIB) $(YAML_LIBS) $(CURSES_LIBS) $(LDLIBS) -o $@

# The release binary is also linked at the top for `./kvplan`.
kvplan: $(BIN)
	@[ -n "$(SANITIZE)" ] || ln -sf $(BIN) kvplan

$(BUILD)/tests/%: tests/%.c $(LIB) $(TUI_MODEL_OBJ) tests/testutil.h
	@mkdir -p $(@D)
	$(CC) $(ALL_CFLAGS) $(CHECK_CFLAGS) -Itests -Isrc/cli $< $(TUI_MODEL_OBJ) $(LIB) $(LDFLAGS) $(CHECK_LIBS) \
	    $(YAML_LIBS) $(LDLIBS) -o $@

run: deps $(BIN)
	./$(BIN) size llama-3.1-8b --context 128k --explain

check: deps $(BIN) $(TEST_BIN)
	@failed=0; for t in $(TEST_BIN); do \
	    KVPLAN_DATADIR=models KVPLAN_BIN=$(BIN) CK_FORK=yes ./$$t || failed=1; done; \
	KVPLAN_BIN=$(BIN) sh tests/cli.sh || failed=1; \
	KVPLAN_BIN=$(BIN) python3 tests/plan_cli.py || failed=1; \
	KVPLAN_BIN=$(BIN) python3 tests/check_xml.py || failed=1; \
	KVPLAN_BIN=$(BIN) sh tests/tui.sh || failed=1; \
	exit $$failed

install: $(BIN)
	install -d $(DESTDIR)$(PREFIX)/bin $(DESTDIR)$(PREFIX)/include/kvplan $(DESTDIR)$(DATADIR)/models \
	    $(DESTDIR)$(PREFIX)/lib/pkgconfig $(DESTDIR)$(PREFIX)/share/man/man1 $(DESTDIR)$(PREFIX)/lib
	install -m 755 $(BIN) $(DESTDIR)$(PREFIX)/bin/kvplan
	install -m 644 $(LIB) $(DESTDIR)$(PREFIX)/lib/libkvplan.a
	install -m 644 include/kvplan/*.h $(DESTDIR)$(PREFIX)/include/kvplan/
	install -m 644 models/*.yaml $(DESTDIR)$(DATADIR)/models/
	install -m 644 docs/kvplan.1 $(DESTDIR)$(PREFIX)/share/man/man1/kvplan.1
	sed -e 's|@PREFIX@|$(PREFIX)|' -e 's|@VERSION@|$(VERSION)|' src/kvplan.pc.in \
	    > $(DESTDIR)$(PREFIX)/lib/pkgconfig/kvplan.pc

clean:
	rm -rf build kvplan

-include $(LIB_OBJ:.o=.d) $(CLI_OBJ:.o=.d)

# ---- kvplan check (issue #6): plan files as a CI gate ----
.PHONY: check-examples check-plan-cli
# Every shipped example plan must pass: the project gates itself with its own tool.
check-examples: $(BIN)
	KVPLAN_DATADIR=models ./$(BIN) check docs/examples/*.yaml

# `kvplan check` end to end: exit codes, JSON and JUnit read by real parsers, baselines, atomic writes.
check-plan-cli: $(BIN)
	KVPLAN_BIN=$(BIN) python3 tests/plan_cli.py

# ---- generated sizing tables and charts (docs/tables/, docs/charts/) ----
# `make docs` regenerates them from models/*.yaml with docs/generate.sh;
# `make docs-check` regenerates into a temporary folder and fails when the
# committed pages differ (CI), so they never drift from the code.
.PHONY: docs docs-check
docs: $(BIN)
	KVPLAN=$(BIN) sh docs/generate.sh docs

docs-check: $(BIN)
	@tmp=$$(mktemp -d) || exit 2; \
	KVPLAN=$(BIN) sh docs/generate.sh "$$tmp" && \
	diff -r docs/tables "$$tmp/tables" && diff -r docs/charts "$$tmp/charts"; rc=$$?; \
	rm -rf "$$tmp"; \
	[ $$rc -eq 0 ] || echo "docs-check: docs/tables or docs/charts differ from what the code generates: run make docs"; \
	exit $$rc

# ---- oracle: kvplan's llamacpp profile against the real llama.cpp (tests/oracle/run.sh) ----
# Fetches the prebuilt CPU llama.cpp from npm (@node-llama-cpp/linux-x64@3.22.1, release v0.5.0)
# and its headers into build/oracle/ (cached), then compares exact KV bytes; needs npm, git, a C++
# compiler. Skips with exit 0 when the npm registry cannot be reached.
.PHONY: oracle
oracle: deps $(BIN)
	KVPLAN_BIN=$(BIN) KVPLAN_DATADIR=models sh tests/oracle/run.sh

# ---- kvplan tui (issue #8): the terminal UI ----
# tui-test drives the real binary in tmux (tests/tui.sh: 80x24, typing, resizing to
# 120x40, 20x5 and 1x1, help, model picker, saving a plan `kvplan check` accepts, q).
# tui-bench times what one keypress costs: a recompute and a full redraw (a 60 Hz frame is 16,667 us).
.PHONY: tui-test tui-bench
tui-test: $(BIN)
	KVPLAN_BIN=$(BIN) sh tests/tui.sh

tui-bench: $(BIN)
	@for m in llama-3.1-8b gemma-3-27b qwen3-next-80b-a3b deepseek-v3; do \
	    KVPLAN_DATADIR=models ./$(BIN) tui --bench 200 $$m || exit 1; done
