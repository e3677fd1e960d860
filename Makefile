# msgflow: the README's commands.  `make demo` and `make test` install the
# Debian packages they need first (as root), or say which to install.
REBAR ?= rebar3
# OTP=27: the same targets on OTP 27, built once by tools/otp.sh (its own
# rebar3 and CMake build directories: a NIF built with OTP 27's headers
# does not load on OTP 25)
OTP ?=
ifneq ($(OTP),)
OTP_BIN := $(shell tools/otp.sh $(OTP) | tail -n 1)
ifeq ($(OTP_BIN),)
$(error tools/otp.sh $(OTP) failed)
endif
export PATH := $(OTP_BIN):$(PATH)
export REBAR_BASE_DIR := $(CURDIR)/_build/otp$(OTP)
export MSGFLOW_CMAKE_DIR := _build/cmake-otp$(OTP)
endif
CMAKE_DIR = $(or $(MSGFLOW_CMAKE_DIR),_build/cmake)
# Common Test's logs too: its index cache differs between releases
CT_LOGDIR = $(if $(OTP),_build/otp$(OTP)/ct_logs,_build/ct_logs)
BUILD_BASE = $(or $(REBAR_BASE_DIR),_build)
ERL_PA = -pa $(BUILD_BASE)/default/lib/msgflow/ebin

.PHONY: all deps test-deps build shell docs vendor demo test dialyzer bench bench-ab bench-readings bench-scale bench-live bench-history bench-cluster soak fuzz clean

all: build

# what building and the demo use; `test' adds what the tests drive
deps:
	@tools/install-deps.sh

test-deps:
	@tools/install-deps.sh test
	@tools/web/vendor.sh driver

build: deps
	$(REBAR) compile

# an Erlang shell with msgflow loaded (the README's session)
shell: build
	erl $(ERL_PA)

# the API reference: HTML under doc/ (doc/index.html), from the same edoc
# as the doc chunks h/2 reads (the build writes those)
docs: build
	tools/doc-chunks.sh html doc
	@echo "docs: doc/index.html"

# the web page's scripts in priv/www/vendor, refreshed from the npm lock
vendor:
	tools/web/vendor.sh

# The main job: msgflow on OTP's inets httpd driven by httpc.
# The demo lives outside erl/, so it never ships to a node msgflow counts on.
demo: build
	mkdir -p _build/demo/ebin
	erlc -o _build/demo/ebin tools/demo/msgflow_demo.erl
	@# from a terminal the demo keeps its page up, with live traffic, until Enter
	erl -noshell $(ERL_PA) -pa _build/demo/ebin -eval 'msgflow_demo:main()' \
	    $$([ -t 0 ] && echo -extra wait)
	@echo; echo "msgflow-report on the demo's dump:"
	$(BUILD_BASE)/bin/msgflow-report _build/demo/msgflow-demo.etf --top 10 --by name
	$(BUILD_BASE)/bin/msgflow-report _build/demo/msgflow-demo.etf --top 5 --sort bytes

# The call direction between the layers of erl/ (tools/check/layers.escript),
# Dialyzer, C unit tests (ctest), EUnit/PropEr, the Common Test suite
# (which also runs msgflow-report and msgflow-top against a real node and
# writes dumps), then the decoder's ctest on those dumps, under ASan/UBSan.
test: test-deps build dialyzer
	@erl -noshell -eval 'io:format("OTP ~s~n", [erlang:system_info(otp_release)]), halt().'
	tools/check/layers.escript --selftest
	tools/check/layers.escript $(BUILD_BASE)/default/lib/msgflow/ebin
	cd $(CMAKE_DIR) && ctest --output-on-failure -LE dumps
	$(REBAR) eunit
	mkdir -p $(CT_LOGDIR)
	$(REBAR) ct --logdir $(CT_LOGDIR)
	cd $(CMAKE_DIR) && ctest --output-on-failure -L dumps

# Dialyzer on msgflow's modules, with the release's own dialyzer (a PLT of
# the OTP applications msgflow calls, built once per release)
PLT = $(BUILD_BASE)/dialyzer-$(or $(OTP),25).plt
dialyzer: build
	@# building the PLT warns of OTP's own calls to applications left out
	@# (status 2); only a failure (1) stops
	@[ -f $(PLT) ] || { echo "dialyzer: building $(PLT) (once, a few minutes)"; \
	    dialyzer --build_plt --output_plt $(PLT) --apps erts kernel stdlib crypto inets compiler \
	        >$(PLT).log 2>&1; rc=$$?; [ $$rc -ne 1 ] || { tail -20 $(PLT).log; exit 1; }; }
	dialyzer --plt $(PLT) -Wunknown $(BUILD_BASE)/default/lib/msgflow/ebin

# Cost per traced send under six tracer setups, side by side (a few
# minutes; MSGFLOW_BENCH_QUICK=1 for a smoke run).  Prints, judges nothing.
# It also runs the callbacks' direct loop on this tree and on BENCH_BASE's,
# interleaved (the hot path's A/B): by default the last commit before the
# message was read once a send.
BENCH_BASE ?= eef3cac
# msgflow_bench:$(1)() with the bench's modules and tracers built, and the
# old tree's ebin for the A/B (none when it cannot be built)
define bench_run
	mkdir -p _build/bench
	erlc -o _build/bench tools/bench/*.erl
	cp $(CMAKE_DIR)/bench/*.so _build/bench/
	base=$$(tools/bench/base.sh $(BENCH_BASE)) || base=; \
	MSGFLOW_BENCH_BASE=$$base MSGFLOW_BENCH_BASE_REV=$(BENCH_BASE) \
	    erl -noshell $(ERL_PA) -pa _build/bench -eval 'msgflow_bench:$(1)()'
endef
bench: build
	$(call bench_run,main)

# the hot path's A/B alone (a minute or two)
bench-ab: build
	$(call bench_run,main_ab)

# What the collector's readings of the watched processes cost a window
# (issue 56), beside 0.1's queue-only readings (half a minute)
bench-readings: build
	mkdir -p _build/bench
	erlc -o _build/bench tools/bench/*.erl
	erl -noshell $(ERL_PA) -pa _build/bench -eval 'msgflow_bench_readings:main()'

# What the views cost on a big node: 100,000 processes with 200,000 pairs,
# and 1,000,000 pairs (a few minutes, ~2 GB).  Prints, judges nothing.
bench-scale: build
	mkdir -p _build/bench
	erlc -o _build/bench tools/bench/*.erl
	erl -noshell +P 1000000 $(ERL_PA) -pa _build/bench -eval 'msgflow_bench_scale:main()'
	$(MAKE) --no-print-directory bench-cluster
	$(MAKE) --no-print-directory soak

# What the kept history costs: 200,000 pairs a window, history off and
# on, side by side (a minute).  Prints, judges nothing.
bench-history: build
	mkdir -p _build/bench
	erlc -o _build/bench tools/bench/*.erl
	erl -noshell +P 1000000 $(ERL_PA) -pa _build/bench -eval 'msgflow_bench_history:main()'

# Views across a cluster: MSGFLOW_CLUSTER_NODES (10) peer nodes of
# MSGFLOW_CLUSTER_PAIRS (200,000) pairs each, counted from this node; part
# of bench-scale
bench-cluster: build
	mkdir -p _build/bench
	erlc -o _build/bench tools/bench/*.erl
	erl -noshell $(ERL_PA) -pa _build/bench -eval 'msgflow_bench_cluster:main()'

# A live many-to-many node: 10,000 clients calling 100 servers at random
# (25,000 calls/s) and 2,000 casters to 50 sinks, msgflow off and on in
# interleaved phases: the views' wall time, msgflow's added CPU, own
# memory against max_memory, msgflow-top's first screen after a million
# new pairs (MSGFLOW_LIVE_S seconds a phase, 30 by default; about 5
# minutes).  Prints, judges nothing.
bench-live: build
	mkdir -p _build/bench
	erlc -o _build/bench tools/bench/*.erl
	cp $(CMAKE_DIR)/bench/*.so _build/bench/
	erl -noshell +P 1000000 $(ERL_PA) -pa _build/bench -eval 'msgflow_bench_live:main()'

# msgflow left running under process churn (MSGFLOW_SOAK_S seconds, 1800
# by default); part of bench-scale
soak: build
	mkdir -p _build/bench
	erlc -o _build/bench tools/bench/*.erl
	erl -noshell $(ERL_PA) -pa _build/bench -eval 'msgflow_bench_soak:main()'

# libFuzzer on the dump decoder: FUZZ_JOBS processes for FUZZ_SECONDS each
# (default 2 x 300 s = 10 CPU-minutes), from test/fuzz/corpus; new inputs
# go to _build/fuzz/corpus, findings to _build/fuzz/crash-*.
FUZZ_SECONDS ?= 300
FUZZ_JOBS ?= 2
fuzz: build
	@tools/install-deps.sh fuzz
	cmake -S . -B _build/fuzz -DCMAKE_C_COMPILER=clang -DMSGFLOW_FUZZ=ON >_build/fuzz.log
	cmake --build _build/fuzz --target fuzz_dump >>_build/fuzz.log
	mkdir -p _build/fuzz/corpus
	cd _build/fuzz && ./fuzz_dump -max_total_time=$(FUZZ_SECONDS) -jobs=$(FUZZ_JOBS) \
	    -workers=$(FUZZ_JOBS) -print_final_stats=1 corpus ../../test/fuzz/corpus
	@! ls _build/fuzz/crash-* _build/fuzz/leak-* _build/fuzz/timeout-* 2>/dev/null
	@echo "fuzz: $(FUZZ_JOBS) x $(FUZZ_SECONDS) s, no finding"

clean:
	rm -rf _build priv/*.so doc
