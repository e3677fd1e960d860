# msgflow: the README's commands.  `make demo` and `make test` install the
# Debian packages they need first (as root), or say which to install.
REBAR ?= rebar3
ERL_PA = -pa _build/default/lib/msgflow/ebin

.PHONY: all deps build demo test bench bench-scale soak fuzz clean

all: build

deps:
	@tools/install-deps.sh

build: deps
	$(REBAR) compile

# The main job: msgflow on OTP's inets httpd driven by httpc.
demo: build
	erl -noshell $(ERL_PA) -eval 'msgflow_demo:main()'
	@echo; echo "msgflow-report on the demo's dump:"
	_build/bin/msgflow-report _build/demo/msgflow-demo.etf --top 10 --by name

# C unit tests (ctest), EUnit/PropEr, the Common Test suite (which also
# runs msgflow-report and msgflow-top against a real node and writes
# dumps), then the decoder's ctest on those dumps, under ASan/UBSan.
test: build
	cd _build/cmake && ctest --output-on-failure -LE dumps
	$(REBAR) eunit
	$(REBAR) ct
	cd _build/cmake && ctest --output-on-failure -L dumps

# Cost per traced send under six tracer setups, side by side (a few
# minutes; MSGFLOW_BENCH_QUICK=1 for a smoke run).  Prints, judges nothing.
bench: build
	mkdir -p _build/bench
	erlc -o _build/bench tools/bench/*.erl
	erl -noshell $(ERL_PA) -pa _build/bench -eval 'msgflow_bench:main()'

# What the views cost on a big node: 100,000 processes with 200,000 pairs,
# and 1,000,000 pairs (a few minutes, ~2 GB).  Prints, judges nothing.
bench-scale: build
	mkdir -p _build/bench
	erlc -o _build/bench tools/bench/*.erl
	erl -noshell +P 1000000 $(ERL_PA) -pa _build/bench -eval 'msgflow_bench_scale:main()'
	$(MAKE) --no-print-directory soak

# msgflow left running under process churn (MSGFLOW_SOAK_S seconds, 600
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
	rm -rf _build priv/*.so
