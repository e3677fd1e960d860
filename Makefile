# msgflow: the README's commands.  `make demo` and `make test` install the
# Debian packages they need first (as root), or say which to install.
REBAR ?= rebar3
ERL_PA = -pa _build/default/lib/msgflow/ebin

.PHONY: all deps build demo test bench clean

all: build

deps:
	@tools/install-deps.sh

build: deps
	$(REBAR) compile

# The main job: msgflow on OTP's inets httpd driven by httpc.
demo: build
	erl -noshell $(ERL_PA) -eval 'msgflow_demo:main()'

# C unit tests (ctest), EUnit/PropEr, then the Common Test suite.
test: build
	cd _build/cmake && ctest --output-on-failure
	$(REBAR) eunit
	$(REBAR) ct

# Cost per traced send under six tracer setups, side by side (a few
# minutes; MSGFLOW_BENCH_QUICK=1 for a smoke run).  Prints, judges nothing.
bench: build
	mkdir -p _build/bench
	erlc -o _build/bench tools/bench/*.erl
	erl -noshell $(ERL_PA) -pa _build/bench -eval 'msgflow_bench:main()'

clean:
	rm -rf _build priv/*.so
