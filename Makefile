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
             -fvisibility=hidden -MMD -MP -DKVP_VERSION='"$(VERSION)"' -DKVP_DATADIR='"$(DATADIR)"' $(YAML_CFLAGS)
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

# pkg-config is asked when a flag is first used, once, not when make starts: `make run` and
# `make check` install the packages (deps, a prerequisite) before anything that uses them is built
pkg_flags = $(shell $(PKG_CONFIG) $(1) $(2) 2>/dev/null || echo $(3))
once = $(eval $(1) := $(call pkg_flags,$(2),$(3),$(4)))$($(1))
YAML_CFLAGS   = $(call once,YAML_CFLAGS,--cflags,yaml-0.1,)
YAML_LIBS     = $(call once,YAML_LIBS,--libs,yaml-0.1,-lyaml)
CHECK_CFLAGS  = $(call once,CHECK_CFLAGS,--cflags,check,)
CHECK_LIBS    = $(call once,CHECK_LIBS,--libs,check,-lcheck)
CURSES_CFLAGS = $(call once,CURSES_CFLAGS,--cflags,ncursesw,)
CURSES_LIBS   = $(call once,CURSES_LIBS,--libs,ncursesw,-lncursesw)
CURL_CFLAGS   = $(call once,CURL_CFLAGS,--cflags,libcurl,)
CURL_LIBS     = $(call once,CURL_LIBS,--libs,libcurl,-lcurl)

# libkvplan: the engine, parsers, renderers (src/lib) and the reference decoder (src/ref)
LIB_SRC  := $(wildcard src/lib/*/*.c src/ref/*.c)
# the TUI's curses-free state (src/tui/state*.c) is linked into the tests too;
# its views (the only curses code) only into the binary
TUI_STATE_SRC := $(wildcard src/tui/state*.c)
TUI_VIEW_SRC  := $(filter-out $(TUI_STATE_SRC),$(wildcard src/tui/*.c))
CLI_SRC  := $(wildcard src/cli/*.c) $(TUI_STATE_SRC) $(TUI_VIEW_SRC)
TEST_SRC := $(wildcard tests/check_*.c)
LIB_OBJ  := $(LIB_SRC:%.c=$(BUILD)/%.o)
CLI_OBJ  := $(CLI_SRC:%.c=$(BUILD)/%.o)
TUI_STATE_OBJ := $(TUI_STATE_SRC:%.c=$(BUILD)/%.o)
TEST_BIN := $(TEST_SRC:tests/%.c=$(BUILD)/tests/%)
LIB      := $(BUILD)/libkvplan.a
LIB_INTERNAL := $(BUILD)/libkvplan-internal.a
OBJCOPY  ?= objcopy
BIN      := $(BUILD)/kvplan
# kvplan-hub (src/hub): the Hub client kvplan runs for a model no cache holds; a program
# of its own, linked against the shared libcurl (which cannot be linked statically). The client
# over its libcurl transport; page.c is the page's transport (WEB_OBJ)
HUB_SRC  := src/hub/client.c src/hub/curl.c
HUB_OBJ  := $(HUB_SRC:%.c=$(BUILD)/%.o)
HUB_BIN  := $(BUILD)/kvplan-hub

.PHONY: all deps run check clean install help
all: $(BIN) $(HUB_BIN) kvplan

help:
	@echo "make                build libkvplan.a and kvplan (./kvplan links to it)"
	@echo "make run            install missing Debian packages, build, size the default deployment"
	@echo "make check          build and run every suite, each with its time (SANITIZE=address,undefined: sanitizers)"
	@echo "make check-SUITE    build and run one suite: $(patsubst check_%,%,$(notdir $(TEST_BIN))) cli xml hub"
	@echo "make check-ref-independent  the decoder's objects call no engine pricing function (in check)"
	@echo "make check-mutation an engine mispriced by a byte per row is caught by the decoder (in check)"
	@echo "make check-symbols  libkvplan exports exactly what include/kvplan declares with KVP_API (in check)"
	@echo "make check-includes no cycle among src/'s includes, nor among its files' calls (tests/cycles.py; in check)"
	@echo "make check-style    no line of C over 120 columns (.clang-format; in check)"
	@echo "make check-architecture  docs/architecture.md names every tracked file (data and generated pages aside; in check)"
	@echo "make check-examples the plans in docs/examples through kvplan check"
	@echo "make check-plan-cli kvplan check's reports read by real JSON/XML parsers"
	@echo "make tui-test       the TUI driven in tmux"
	@echo "make docs           regenerate docs/tables and docs/charts; docs-check: fail when they are stale"
	@echo "make oracle         the real llama.cpp (npm) against kvplan, byte for byte (downloads once)"
	@echo "make valgrind       the suites and the CLI under valgrind, less the cases tagged release or float; valgrind-full: all"
	@echo "make fuzz           libFuzzer harnesses (clang); fuzz-smoke: a short run of each, as CI does;"
	@echo "                    fuzz-long: each to FUZZ_RUNS (10^7) executions, FUZZ_NAMES a subset (build/fuzz/long.txt)"
	@echo "make bench          benchmarks into docs/performance.md; tui-bench: the TUI's redraw"
	@echo "make cuda-build     the reference decoder's CUDA backend (nvcc)"
	@echo "make web            the page: the CLI in WebAssembly (emscripten) in build/web/index.html; check-web: in chromium"
	@echo "make install        PREFIX=/usr/local: binary, headers, man page, pkg-config, models"
	@echo "make clean          remove build/ and ./kvplan"

# Installs the Debian packages the build needs when pkg-config cannot find them.
deps:
	@sh .ci/deps.sh

$(BUILD)/%.o: %.c
	@mkdir -p $(@D)
	$(CC) $(ALL_CFLAGS) -c $< -o $@

# The decoder's float loops (row conversions, attention's value sums, the
# recurrence) vectorize only under GCC's dynamic cost model, which -O2's
# very-cheap one refuses for a loop with a remainder (compilers without the
# option, clang, vectorize them at -O2 already), and the f16 conversions'
# selects only when FP operations may be assumed not to trap
# (-fno-trapping-math changes no result). No -ffast-math: every sum keeps its
# order, so the logits do not depend on the vector width.
REF_VECT := $(shell $(CC) -fvect-cost-model=dynamic -E -x c /dev/null >/dev/null 2>&1 && echo -fvect-cost-model=dynamic)
$(BUILD)/src/ref/%.o: ALL_CFLAGS += $(REF_VECT) -fno-trapping-math

$(BUILD)/src/tui/%.o: src/tui/%.c
	@mkdir -p $(@D)
	$(CC) $(ALL_CFLAGS) $(CURSES_CFLAGS) -Isrc/cli -c $< -o $@

# Two archives of the same objects. $(LIB), the one installed and linked into the
# programs, is one relocatable object whose hidden names are made local: it exports
# exactly what include/kvplan declares with KVP_API (api.h; make check-symbols). The
# white-box tests, which call the library's internals and link mutated copies of its
# files, link $(LIB_INTERNAL), the objects as compiled.
$(LIB_INTERNAL): $(LIB_OBJ)
	@mkdir -p $(@D)
	rm -f $@
	$(AR) rcs $@ $^
# GCC gives target_clones' dispatchers (the decoder's KVP_REF_HOT loops: an IFUNC and
# its .resolver) default visibility whatever the function's: they are localized by kind.
$(BUILD)/libkvplan.o: $(LIB_OBJ)
	$(LD) -r -o $@.tmp $^
	$(OBJCOPY) --localize-hidden $$(nm $@.tmp | awk '$$2 == "i" {print "--localize-symbol=" $$3}') \
	    --wildcard --localize-symbol='*.resolver' $@.tmp $@
	rm -f $@.tmp
$(LIB): $(BUILD)/libkvplan.o
	rm -f $@
	$(AR) rcs $@ $<

# The binary is linked statically, libc included (libc6-dev, libyaml-dev and libncurses-dev
# ship the .a files): a shared kvplan spent more CPU starting (the loader mapping libyaml,
# ncursesw, tinfo, libm and libc and applying libtinfo's 1,691 relocations) than answering
# (docs/performance.md, Process start). `make STATIC=` links it against shared libraries.
# Shared where static cannot work: SANITIZE (the sanitizers' runtimes), CUDA (libcudart opens
# the driver with dlopen), and $(VALGRIND_BIN) for `make valgrind`, since memcheck cannot
# replace a static glibc's malloc.
STATIC ?= 1
ifneq ($(SANITIZE)$(CUDA),)
override STATIC :=
endif
VALGRIND_BIN := $(if $(STATIC),$(BUILD)/kvplan-shared,$(BIN))
link_bin = $(CC) $(LDFLAGS) $(1) $(CLI_OBJ) $(LIB) $(YAML_LIBS) $(CURSES_LIBS) $(LDLIBS) -o $@
$(BIN): $(CLI_OBJ) $(LIB)
	$(call link_bin,$(if $(STATIC),-static))
$(BUILD)/kvplan-shared: $(CLI_OBJ) $(LIB)
	$(call link_bin,)
$(BUILD)/src/hub/%.o: src/hub/%.c
	@mkdir -p $(@D)
	$(CC) $(ALL_CFLAGS) $(CURL_CFLAGS) -c $< -o $@
$(HUB_BIN): $(HUB_OBJ) $(LIB)
	$(CC) $(LDFLAGS) $(HUB_OBJ) $(LIB) $(YAML_LIBS) $(CURL_LIBS) $(LDLIBS) -o $@

# The release binary is also linked at the top for `./kvplan`.
kvplan: $(BIN) $(HUB_BIN)
	@[ -n "$(SANITIZE)" ] || ln -sf $(BIN) kvplan

$(BUILD)/tests/%: tests/%.c $(LIB_INTERNAL) $(TUI_STATE_OBJ) tests/testutil.h
	@mkdir -p $(@D)
	$(CC) $(ALL_CFLAGS) $(CHECK_CFLAGS) -Itests -Isrc/cli $< $(TUI_STATE_OBJ) $(LIB_INTERNAL) $(LDFLAGS) $(CHECK_LIBS) \
	    $(YAML_LIBS) $(LDLIBS) -o $@

# The harnesses whose finds tests/data/fuzz-regressions/NAME/ keeps and `make check` replays
# through the harness itself (tests/fuzz/replay.c; yaml, hf, gguf and num go through check_robust).
FUZZ_REPLAY := $(patsubst tests/data/fuzz-regressions/%/,%,$(filter-out \
    $(addprefix tests/data/fuzz-regressions/,yaml/ hf/ gguf/ num/),$(wildcard tests/data/fuzz-regressions/*/)))
REPLAY_BIN := $(FUZZ_REPLAY:%=$(BUILD)/tests/replay_%)
$(BUILD)/tests/replay_%: tests/fuzz/fuzz_%.c tests/fuzz/replay.c tests/fuzz/fuzz_common.h $(LIB_INTERNAL)
	@mkdir -p $(@D)
	$(CC) $(ALL_CFLAGS) tests/fuzz/replay.c $< $(LIB_INTERNAL) $(LDFLAGS) $(YAML_LIBS) $(LDLIBS) -o $@
.PHONY: check-fuzz-regressions
check-fuzz-regressions: $(REPLAY_BIN)
	@for n in $(FUZZ_REPLAY); do $(BUILD)/tests/replay_$$n tests/data/fuzz-regressions/$$n/* || exit 1; done

run: deps $(BIN) kvplan
	./$(BIN) fit llama-3.1-8b --gpu h100 --context 32k --concurrency 8 --explain

# every suite, with the wall time each took. Under SANITIZE the cases tagged
# "release" (the fidelity grid: float loops whose memory smaller cases prove)
# are left out, in the Check suites (CK_EXCLUDE_TAGS) and tests/cli/cases.txt alike.
SUITE_RUN = KVPLAN_DATADIR=models KVPLAN_BIN=$(BIN) CK_FORK=yes $(if $(SANITIZE),CK_EXCLUDE_TAGS=release)
CLI_RUN   = KVPLAN_BIN=$(BIN) $(if $(SANITIZE),KVPLAN_CLI_SANITIZED=1)
# No suite reads the user's model caches or the network: a Hub reference answers from these
# empty caches, offline (tests/hub.sh sets its own, against its test Hub on 127.0.0.1).
export HF_HUB_OFFLINE := 1
export HF_HUB_CACHE := $(CURDIR)/build/no-cache/hf
export KVPLAN_CACHE := $(CURDIR)/build/no-cache/kvplan
check: deps $(BIN) $(HUB_BIN) kvplan $(TEST_BIN) $(REPLAY_BIN)
	@failed=0; timed() { s=$$(date +%s%N); "$$@" || failed=1; echo "time: $$* $$(( ($$(date +%s%N) - s) / 1000000 )) ms"; }; \
	for t in $(TEST_BIN); do timed env $(SUITE_RUN) ./$$t; done; \
	for n in $(FUZZ_REPLAY); do timed $(BUILD)/tests/replay_$$n tests/data/fuzz-regressions/$$n/*; done; \
	timed env $(CLI_RUN) sh tests/cli.sh; \
	timed env KVPLAN_BIN=$(BIN) sh tests/hub.sh; \
	timed env KVPLAN_BIN=$(BIN) python3 tests/plan_cli.py; \
	timed env KVPLAN_BIN=$(BIN) python3 tests/check_xml.py; \
	timed env KVPLAN_BIN=$(BIN) sh tests/tui.sh; \
	exit $$failed

# one suite: make check-engine, check-ref, ..., check-cli, check-xml
check-cli: $(BIN)
	$(CLI_RUN) sh tests/cli.sh
check-xml: $(BIN)
	KVPLAN_BIN=$(BIN) python3 tests/check_xml.py
check-hub: $(BIN) $(HUB_BIN)
	KVPLAN_BIN=$(BIN) sh tests/hub.sh
check-%: $(BUILD)/tests/check_% $(BIN)
	$(SUITE_RUN) ./$<

# The decoder (src/ref) is the engine's independent witness: its objects may
# call the engine only for the token-holding rule (kvp_cache_tokens, which
# tests/check_engine.c checks against a step-by-step simulation), the paged
# refusal, errors, names, format parsing (the fidelity grid's cells) and model
# building -- never a byte price
# (kvp_cache_bytes, kvp_kv_compute, kvp_format_row_bytes, kvp_dtype_info ...).
REF_ENGINE_OK := kvp_cache_tokens kvp_fail kvp_format_check_paged kvp_format_name kvp_format_parse kvp_format_plain \
                 kvp_layer_kind_name kvp_model_add_layers kvp_model_init
REF_OBJ := $(filter $(BUILD)/src/ref/%,$(LIB_OBJ))
.PHONY: check-ref-independent
check-ref-independent: $(LIB_OBJ)
	@own=$$(nm -g --defined-only $(REF_OBJ) | awk 'NF == 3 {print $$3}' | sort -u); \
	bad=$$(nm -u $(REF_OBJ) | awk '$$2 ~ /^kvp_/ {print $$2}' | sort -u | grep -vxF $(REF_ENGINE_OK:%=-e %) | \
	    grep -vxF $$(echo "$$own" | sed 's/^/-e /')); \
	if [ -n "$$bad" ]; then echo "check-ref-independent: src/ref calls the engine's" $$bad; exit 1; fi; \
	echo "check-ref-independent: src/ref/*.o call no engine pricing function"

# The files of src/ form no cycle, neither by #include nor by one object
# using a symbol another defines (a helper living in a dispatcher's file).
# Not yet in check: deploy.c <-> profile_*.c and src/ref are still cycles.
.PHONY: check-includes
check-includes: $(LIB_OBJ) $(CLI_OBJ)
	python3 tests/cycles.py $(LIB_OBJ) $(CLI_OBJ)

# docs/architecture.md walks the whole tree: every tracked file outside
# tests/data/, tests/fuzz/corpus/ (seeds, data), docs/tables/ and docs/charts/ is named on it.
.PHONY: check-architecture
check-architecture:
	@missing=$$(git ls-files | grep -v '^tests/data/\|^tests/fuzz/corpus/\|^docs/tables/\|^docs/charts/\|^models/[^/]*\.yaml$$' | \
	    while read -r f; do grep -qF -- "$$(basename "$$f")" docs/architecture.md || echo "$$f"; done); \
	if [ -n "$$missing" ]; then echo "check-architecture: docs/architecture.md does not name:" $$missing; exit 1; fi; \
	echo "check-architecture: docs/architecture.md names every tracked file"

# Mutation tests: tests/check_ref.c's `mutation` case against an engine built
# to price one format a byte per row too high, or the recurrent state an
# element too large; the decoder's counts must show the difference.
MUT_FLAGS_row   := -DKVP_MUTATE_ROW=KVP_DTYPE_Q8_0
MUT_FLAGS_state := -DKVP_MUTATE_STATE
MUT_BIN := $(BUILD)/tests/check_ref_mutate_row $(BUILD)/tests/check_ref_mutate_state
.PHONY: check-mutation
.SECONDARY: $(BUILD)/mut/row/kv.o $(BUILD)/mut/state/kv.o
$(BUILD)/mut/%/kv.o: src/lib/engine/kv.c
	@mkdir -p $(@D)
	$(CC) $(ALL_CFLAGS) $(MUT_FLAGS_$*) -c $< -o $@

$(BUILD)/tests/check_ref_mutate_%: tests/check_ref.c $(BUILD)/mut/%/kv.o $(LIB_INTERNAL) $(TUI_STATE_OBJ) tests/testutil.h
	@mkdir -p $(@D)
	$(CC) $(ALL_CFLAGS) $(MUT_FLAGS_$*) $(CHECK_CFLAGS) -Itests -Isrc/cli $< $(BUILD)/mut/$*/kv.o $(TUI_STATE_OBJ) \
	    $(LIB_INTERNAL) $(LDFLAGS) $(CHECK_LIBS) $(YAML_LIBS) $(LDLIBS) -o $@

# tests/check_serve.c's `mutation` case against a simulator whose pool is
# one block short: the replay on the decoder's real pool must catch it.
MUT_BIN += $(BUILD)/tests/check_serve_mutate_sim
$(BUILD)/mut/sim/sim.o: src/lib/sim/sim.c
	@mkdir -p $(@D)
	$(CC) $(ALL_CFLAGS) -DKVP_MUTATE_SIM -c $< -o $@

$(BUILD)/tests/check_serve_mutate_sim: tests/check_serve.c $(BUILD)/mut/sim/sim.o $(LIB_INTERNAL) $(TUI_STATE_OBJ) tests/testutil.h
	@mkdir -p $(@D)
	$(CC) $(ALL_CFLAGS) -DKVP_MUTATE_SIM $(CHECK_CFLAGS) -Itests -Isrc/cli $< $(BUILD)/mut/sim/sim.o $(TUI_STATE_OBJ) \
	    $(LIB_INTERNAL) $(LDFLAGS) $(CHECK_LIBS) $(YAML_LIBS) $(LDLIBS) -o $@

check-mutation: $(MUT_BIN)
	@for t in $(MUT_BIN); do KVPLAN_DATADIR=models CK_RUN_CASE=mutation ./$$t || exit 1; done

# the source's properties are the same in every build: checked once, in the release pass
ifndef SANITIZE
check: check-ref-independent check-mutation check-symbols check-includes check-architecture check-style
endif

# No line of C over 120 columns, the limit .clang-format states (docs/testing.md, Style)
STYLE_COLUMNS := 120
.PHONY: check-style
check-style:
	@bad=$$(git ls-files 'src/*.[ch]' 'src/*.cu' 'include/*.h' 'tests/*.[ch]' | grep -v '^tests/data/' | \
	    LC_ALL=C.UTF-8 xargs grep -n '.\{$(STYLE_COLUMNS)\}.' | cut -c1-100); \
	if [ -n "$$bad" ]; then printf "%s\n" "$$bad"; echo "check-style: $$(printf "%s\n" "$$bad" | wc -l) line(s) over $(STYLE_COLUMNS) columns"; exit 1; fi; \
	echo "check-style: no line of C over $(STYLE_COLUMNS) columns"

# libkvplan exports exactly the names include/kvplan declares with KVP_API (tests/symbols.py)
.PHONY: check-symbols
check-symbols: $(LIB)
	python3 tests/symbols.py $(LIB)

install: $(BIN) $(HUB_BIN)
	install -d $(DESTDIR)$(PREFIX)/bin $(DESTDIR)$(PREFIX)/include/kvplan $(DESTDIR)$(DATADIR)/models \
	    $(DESTDIR)$(PREFIX)/lib/pkgconfig $(DESTDIR)$(PREFIX)/share/man/man1 $(DESTDIR)$(PREFIX)/lib
	install -m 755 $(BIN) $(DESTDIR)$(PREFIX)/bin/kvplan
	install -m 755 $(HUB_BIN) $(DESTDIR)$(PREFIX)/bin/kvplan-hub
	install -m 644 $(LIB) $(DESTDIR)$(PREFIX)/lib/libkvplan.a
	install -m 644 include/kvplan/*.h $(DESTDIR)$(PREFIX)/include/kvplan/
	install -m 644 models/*.yaml $(DESTDIR)$(DATADIR)/models/
	install -m 644 docs/kvplan.1 $(DESTDIR)$(PREFIX)/share/man/man1/kvplan.1
	sed -e 's|@PREFIX@|$(PREFIX)|' -e 's|@VERSION@|$(VERSION)|' src/kvplan.pc.in \
	    > $(DESTDIR)$(PREFIX)/lib/pkgconfig/kvplan.pc

clean:
	rm -rf build kvplan

-include $(LIB_OBJ:.o=.d) $(CLI_OBJ:.o=.d) $(HUB_OBJ:.o=.d)
# the mutated objects depend on the headers too (a changed struct must rebuild them)
-include $(BUILD)/mut/row/kv.d $(BUILD)/mut/state/kv.d $(BUILD)/mut/sim/sim.d

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

# ---- robustness: fuzzing (clang + libFuzzer) and valgrind ----------------------
# `make fuzz` builds the libFuzzer harnesses of tests/fuzz/ into build/fuzz/
# (yaml, hf, gguf, num, plan; libkvplan rebuilt with clang, ASan, UBSan and unsigned-overflow checks),
# replays tests/data/fuzz-regressions/, then fuzzes each harness for
# FUZZ_SECONDS. `make fuzz-smoke` is the same for 10 s each (CI).
# `make valgrind` runs every test binary and a few CLI commands under memcheck.
FUZZ_CC      ?= clang
FUZZ_SECONDS ?= 60
FUZZ_ALL     := yaml hf gguf num plan hub log safetensors trace baseline include
FUZZ_NAMES   ?= $(FUZZ_ALL)
FUZZ_RUNS    ?= 10000000
FUZZ_DIR     := build/fuzz
FUZZ_SAN     := -fsanitize=address,undefined,unsigned-integer-overflow -fno-sanitize-recover=all
FUZZ_CFLAGS  := -std=c11 -D_POSIX_C_SOURCE=200809L -g -O1 -fno-omit-frame-pointer $(FUZZ_SAN) \
                -Werror=incompatible-pointer-types \
                -Iinclude -Isrc/lib $(YAML_CFLAGS) -DKVP_VERSION='"$(VERSION)"' -DKVP_DATADIR='"$(DATADIR)"' \
                -DKVP_SIM_AUDIT=1
FUZZ_LIB_OBJ := $(LIB_SRC:%.c=$(FUZZ_DIR)/obj/%.o)
FUZZ_BIN     := $(FUZZ_NAMES:%=$(FUZZ_DIR)/fuzz_%)

.PHONY: fuzz fuzz-smoke fuzz-long fuzz-build fuzz-corpus valgrind
$(FUZZ_DIR)/obj/%.o: %.c
	@mkdir -p $(@D)
	$(FUZZ_CC) $(FUZZ_CFLAGS) -fsanitize=fuzzer-no-link -MMD -MP -c $< -o $@
-include $(FUZZ_LIB_OBJ:.o=.d)

$(FUZZ_DIR)/libkvplan.a: $(FUZZ_LIB_OBJ)
	$(AR) rcs $@ $^

$(FUZZ_DIR)/fuzz_%: tests/fuzz/fuzz_%.c tests/fuzz/fuzz_common.h $(FUZZ_DIR)/libkvplan.a
	$(FUZZ_CC) $(FUZZ_CFLAGS) -fsanitize=fuzzer $< $(FUZZ_DIR)/libkvplan.a $(YAML_LIBS) $(LDLIBS) -o $@

$(FUZZ_DIR)/gguf_seeds: tests/fuzz/gguf_seeds.c src/lib/model/gguf_types.h
	@mkdir -p $(@D)
	$(CC) -std=c11 -O1 -Wall -Wextra -Isrc/lib $< -o $@

fuzz-build: $(FUZZ_BIN) $(FUZZ_DIR)/gguf_seeds

# Seed corpora from the shipped and test inputs (libFuzzer adds what it finds).
# The seeds kept in the tree: tests/fuzz/corpus/NAME/ (safetensors, trace, baseline, include).
fuzz-corpus: $(FUZZ_DIR)/gguf_seeds
	@mkdir -p $(FUZZ_ALL:%=$(FUZZ_DIR)/corpus/%)
	@for d in tests/fuzz/corpus/*/; do cp $$d* $(FUZZ_DIR)/corpus/$$(basename $$d)/; done
	@cp models/*.yaml tests/data/*.yaml tests/data/bad/model-*.yaml $(FUZZ_DIR)/corpus/yaml/
	@rm -f $(FUZZ_DIR)/corpus/yaml/gpus.yaml
	@cp tests/data/hf/*.json tests/data/bad/hf-*.json $(FUZZ_DIR)/corpus/hf/
	@$(FUZZ_DIR)/gguf_seeds $(FUZZ_DIR)/corpus/gguf
	@cp $$(ls tests/data/bad/plan-*.yaml docs/examples/*.yaml 2>/dev/null | grep -v '\.err$$') $(FUZZ_DIR)/corpus/plan/ 2>/dev/null || true
	@cp tests/data/engine-logs/raw/*.log tests/data/bad/log-*.log $(FUZZ_DIR)/corpus/log/
	@i=0; for s in 0 4096 32k 128K 1M 16G 18446744073709551615 80GiB '79.19 GiB' 80GB 0.5TB 512MiB \
	    f16 fp8 q4_0 q8_0 iq4_nl int8 int4:group=64 int2:group=32:axis=channel:residual=128 \
	    int4:scale=bf16:zp=no:outliers=0.01 mxfp4 nvfp4; do \
	    i=$$((i + 1)); printf '%s' "$$s" > $(FUZZ_DIR)/corpus/num/seed-$$i; done
	@printf '%s\n%s' 'unsloth/Qwen3-GGUF@main:Q4_K_M' \
	    '{"sha": "0123456789abcdef0123456789abcdef01234567", "siblings": [{"rfilename": "a-Q4_K_M.gguf"}, {"rfilename": "mmproj-F16.gguf"}]}' \
	    > $(FUZZ_DIR)/corpus/hub/seed-gguf
	@printf '%s\n%s' 'org/name' \
	    '{"sha": "0123456789abcdef0123456789abcdef01234567", "siblings": [{"rfilename": "config.json"}, {"rfilename": "model-00001-of-00002.safetensors"}, {"rfilename": "consolidated.safetensors"}]}' \
	    > $(FUZZ_DIR)/corpus/hub/seed-folder

fuzz: fuzz-build fuzz-corpus
	@sh tests/fuzz/run.sh $(FUZZ_DIR) $(FUZZ_SECONDS) $(FUZZ_NAMES)

fuzz-smoke: fuzz-build fuzz-corpus
	@sh tests/fuzz/run.sh $(FUZZ_DIR) 10 $(FUZZ_NAMES)

# `make fuzz-long`: each harness of FUZZ_NAMES (all unless given) to FUZZ_RUNS
# executions (10^7; no time limit), one after the other at nice 19; the
# figures (runs, seconds, exec/s, corpus, finds) in build/fuzz/long.txt.
fuzz-long: fuzz-build fuzz-corpus
	@FUZZ_RUNS=$(FUZZ_RUNS) nice -n 19 sh tests/fuzz/run.sh $(FUZZ_DIR) 0 $(FUZZ_NAMES) | tee $(FUZZ_DIR)/long.txt

# `make robust-time`: the worst inputs under the size caps (tests/shapes.py: deep
# nesting, long lists, many keys, long scalars, aliases, plans, GPU catalogs, GGUF
# headers), each run through the release kvplan; fails over 1 s of CPU (issue #20).
.PHONY: robust-time
robust-time: build/rel/kvplan
	KVPLAN_DATADIR=models KVPLAN_BIN=build/rel/kvplan python3 tests/shapes.py

# tests/valgrind.sh says what fails the target (memory errors, definite and
# indirect leaks, a test cut short by a timeout or a signal) and runs the
# suites VALGRIND_JOBS at a time (default: the CPUs).
# `make valgrind` leaves out the Check cases tagged "release" and "float"
# (the decoder's float loops at many sizes and on threads, which ASan/UBSan run;
# docs/testing.md); `make valgrind-full` runs every case.
VALGRIND_EXCLUDE ?= release float
.PHONY: valgrind-full
valgrind-full:
	$(MAKE) valgrind VALGRIND_EXCLUDE=
valgrind: $(VALGRIND_BIN) $(TEST_BIN)
	VALGRIND_BIN=$(VALGRIND_BIN) VALGRIND_EXCLUDE="$(VALGRIND_EXCLUDE)" VALGRIND_JOBS=$(VALGRIND_JOBS) \
	    sh tests/valgrind.sh $(TEST_BIN)

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

# ---- benchmarks (issue #10): `make bench` regenerates docs/performance.md ----
# tests/bench/run.sh runs build/rel/bench (engine, CLI, TUI, reference decoder
# against a STREAM-like bandwidth, cached vs recompute) and writes the page
# with the machine it ran on. Not run by `make check` (it builds them): it takes minutes and
# its figures depend on the machine.
.PHONY: bench
BENCH_BIN := build/rel/bench
$(BENCH_BIN): tests/bench/bench.c build/rel/libkvplan.a
	@mkdir -p $(@D)
	$(CC) $(ALL_CFLAGS) -pthread $< build/rel/libkvplan.a $(YAML_LIBS) $(LDLIBS) -pthread -o $@

bench: build/rel/kvplan $(BENCH_BIN)
	KVPLAN_DATADIR=models KVPLAN_BIN=build/rel/kvplan BENCH=$(BENCH_BIN) sh tests/bench/run.sh docs/performance.md

# check builds the benchmarks (a merge once broke bench.c unseen); it does not run them
ifndef SANITIZE
check: $(BENCH_BIN)
endif

# ---- CUDA backend of the reference decoder (issue #5) ----
# `make cuda-build` is `make CUDA=1 BUILD=build/cuda`: libkvplan.a gains
# src/ref/cuda/*.cu (nvcc) and the C sources are compiled with -DKVP_CUDA, all
# under build/cuda/ so that build/rel (no CUDA) is never mixed with it.
# Compiling needs nvcc, not a GPU; running `kvplan validate --device cuda` does.
# Code for sm_80 (A100), sm_89 (L4, RTX 4090), sm_90 (H100, H200), plus
# compute_90 PTX for newer GPUs to JIT.
NVCC      ?= $(shell command -v nvcc 2>/dev/null || echo /usr/local/cuda/bin/nvcc)
CUDA_HOME ?= $(patsubst %/bin/nvcc,%,$(NVCC))
CUDA_ARCH ?= -gencode arch=compute_80,code=sm_80 -gencode arch=compute_89,code=sm_89 \
             -gencode arch=compute_90,code=sm_90 -gencode arch=compute_90,code=compute_90
NVCCFLAGS ?= -O2 -g
.PHONY: cuda-build
cuda-build:
	$(MAKE) CUDA=1 BUILD=build/cuda build/cuda/kvplan build/cuda/tests/check_ref_cuda

ifdef CUDA
ifneq ($(BUILD),build/cuda)
$(error CUDA=1 builds into build/cuda, not $(BUILD): run make cuda-build (or make CUDA=1 BUILD=build/cuda))
endif
CUDA_SRC := $(wildcard src/ref/cuda/*.cu)
CUDA_OBJ := $(CUDA_SRC:%.cu=$(BUILD)/%.o)
comma := ,
CUDA_WARN := -Xcompiler -Wall,-Wextra$(if $(WERROR),$(comma)-Werror) $(if $(WERROR),-Werror all-warnings)
ALL_CFLAGS += -DKVP_CUDA
LDLIBS += -L$(CUDA_HOME)/lib64 -Wl,-rpath,$(CUDA_HOME)/lib64 -lcudart -lstdc++
$(LIB_INTERNAL) $(BUILD)/libkvplan.o: $(CUDA_OBJ)
$(BUILD)/%.o: %.cu
	@mkdir -p $(@D)
	$(NVCC) -std=c++17 $(CUDA_ARCH) $(NVCCFLAGS) $(CUDA_WARN) -Xcompiler -fvisibility=hidden -DKVP_CUDA -Iinclude -Isrc/lib -Isrc/ref \
	    -MMD -MP -c $< -o $@
-include $(CUDA_OBJ:.o=.d)
endif

# ---- kvplan in the browser (issue #22): make web, make check-web ----
# The CLI itself compiled to WebAssembly (Debian's emscripten) with the shipped
# models and GPUs embedded, and the page of web/ around it, into build/web/
# (docs/web.md). libyaml is built from its Debian source (apt-get source, deb-src
# enabled) with emcc. Plain `make` never needs emscripten.
EMCC      ?= emcc
EMAR      ?= emar
# emcc's JS optimizer loads acorn; Debian's node finds it itself, another node needs the path
WEB_ENV   := NODE_PATH=/usr/share/nodejs
WEB       := build/web
WEB_YAML  := $(WEB)/libyaml
WEB_CFLAGS := -std=c11 -D_POSIX_C_SOURCE=200809L $(WARN) -O2 -Iinclude -Isrc/lib -I$(WEB_YAML)/include \
              -DYAML_DECLARE_STATIC -DKVP_NO_TUI -DKVP_VERSION='"$(VERSION)"' -DKVP_DATADIR='"/share/kvplan"' \
              -MMD -MP $(if $(WERROR),-Werror)
# the Hub client over the page's transport (src/hub/page.c: its cli_hub_fetch, not src/cli/hub.c's)
WEB_OBJ   := $(patsubst %.c,$(WEB)/obj/%.o,$(LIB_SRC) $(filter-out src/cli/hub.c,$(wildcard src/cli/*.c)) \
             src/hub/client.c src/hub/page.c)
WEB_PAGE  := $(WEB)/index.html $(WEB)/kvplan.css $(WEB)/page.js
WEB_LINK  := -O2 -sMODULARIZE=1 -sEXPORT_NAME=kvplanModule -sINVOKE_RUN=0 -sEXIT_RUNTIME=0 \
             -sALLOW_MEMORY_GROWTH=1 -sEXPORTED_RUNTIME_METHODS=callMain,FS,ENV -sSINGLE_FILE=1 \
             -sENVIRONMENT=web,node --embed-file models@/share/kvplan/models
.PHONY: web check-web web-screenshot web-deps
web: web-deps $(WEB)/kvplan.js $(WEB_PAGE)

# what make web needs installed, as `make run` installs the build's (.ci/deps.sh --web)
web-deps:
	@sh .ci/deps.sh --web

# apt-get source unpacks libyaml-VERSION/; its version macros come from that name
$(WEB_YAML)/libyaml.a: | web-deps
	rm -rf $(WEB_YAML) $(WEB)/yaml-src && mkdir -p $(WEB)/yaml-src
	cd $(WEB)/yaml-src && apt-get source -qq libyaml || \
	    { echo "make web: apt-get source libyaml failed: it needs deb-src and dpkg-dev (sh .ci/deps.sh --web)"; exit 1; }
	mv $(WEB)/yaml-src/libyaml-*/ $(WEB_YAML)
	@set -e; v=$$(basename $$(ls -d $(WEB)/yaml-src/libyaml_*.orig.tar.* | head -n 1) | sed 's/^libyaml_\([0-9.]*\)\.orig.*/\1/'); \
	ver="-DYAML_VERSION_MAJOR=$${v%%.*} -DYAML_VERSION_MINOR=$$(echo $$v | cut -d. -f2) -DYAML_VERSION_PATCH=$${v##*.}"; \
	for f in $(WEB_YAML)/src/*.c; do echo "$(EMCC) -O2 $$f"; \
	    $(WEB_ENV) $(EMCC) -O2 -I$(WEB_YAML)/include $$ver -DYAML_VERSION_STRING="\"$$v\"" -c $$f -o $${f%.c}.o; done
	$(EMAR) rcs $@ $(WEB_YAML)/src/*.o

# page.c defines cli.h's cli_hub_fetch
$(WEB)/obj/src/hub/%.o: WEB_CFLAGS += -Isrc/cli
$(WEB)/obj/%.o: %.c $(WEB_YAML)/libyaml.a
	@mkdir -p $(@D)
	$(WEB_ENV) $(EMCC) $(WEB_CFLAGS) -c $< -o $@

$(WEB)/kvplan.js: $(WEB_OBJ) $(WEB_YAML)/libyaml.a $(wildcard models/*.yaml)
	$(WEB_ENV) $(EMCC) $(WEB_LINK) $(WEB_OBJ) $(WEB_YAML)/libyaml.a -lm -o $@

$(WEB)/%: web/%
	@mkdir -p $(@D)
	cp $< $@

# the page in Debian's chromium (headless) over tests/web/deployments.txt, each
# JSON against the native kvplan's for the same argv (tests/web/run.py); kvplan-hub for the
# rows against the test Hub
check-web: web $(BIN) $(HUB_BIN)
	KVPLAN_BIN=$(BIN) python3 tests/web/run.py $(WEB)

# docs/web.png: an illustration, not checked by docs-check (docs/web.md)
web-screenshot: web
	python3 tests/web/run.py --screenshot docs/web.png $(WEB)

-include $(WEB_OBJ:.o=.d)
