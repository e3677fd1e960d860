%%% The set-up every suite that traces shares, as a Common Test hook (a
%%% suite names it in suite/0): msgflow started before the suite and
%%% stopped after it, each case begun with no run and ended by
%%% msgflow_test_lib:clean/0 (no web server, no run, no followed request).
-module(msgflow_test_hook).

-export([init/2, pre_init_per_suite/3, post_end_per_suite/4, pre_init_per_testcase/4,
         post_end_per_testcase/5]).

init(_Id, _Opts) ->
    {ok, none}.

pre_init_per_suite(_Suite, Config, State) ->
    {ok, _} = application:ensure_all_started(msgflow),
    {Config, State}.

post_end_per_suite(_Suite, _Config, Return, State) ->
    ok = msgflow:stop(),
    {Return, State}.

pre_init_per_testcase(_Suite, _Case, Config, State) ->
    ok = msgflow:stop(),
    {Config, State}.

post_end_per_testcase(_Suite, _Case, _Config, Return, State) ->
    ok = msgflow_test_lib:clean(),
    {Return, State}.
