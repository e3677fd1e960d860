%%% EUnit tests of option validation (pure: no tracing).
-module(msgflow_opts_tests).
-include_lib("eunit/include/eunit.hrl").

defaults_test() ->
    ?assertEqual({ok, msgflow_opts:defaults()}, msgflow_opts:validate(#{})),
    ?assertMatch(#{procs := all, interval := 1000, max_pairs := 1000000,
                   duration := infinity, windows := 60, sample := off},
                 msgflow_opts:defaults()).

good_values_test_() ->
    Pid = self(),
    [?_assertMatch({ok, #{K := V}}, msgflow_opts:validate(#{K => V}))
     || {K, V} <- [{procs, all}, {procs, new}, {procs, existing}, {procs, [Pid, foo]},
                   {interval, 10}, {interval, 3600000}, {max_pairs, 1},
                   {duration, 1}, {duration, infinity}, {windows, 1},
                   {sample, off}, {sample, {1, 2}}, {sample, {100, 1000}}]].

bad_values_test_() ->
    Pid = self(),
    [?_assertEqual({error, {badopt, {K, V}}}, msgflow_opts:validate(#{K => V}))
     || {K, V} <- [{procs, everything}, {procs, []}, {procs, [1]}, {procs, [Pid, Pid]},
                   {procs, {Pid}}, {interval, 9}, {interval, 0}, {interval, -1},
                   {interval, 1.0}, {max_pairs, 0}, {max_pairs, (1 bsl 32) + 1},
                   {duration, 0}, {duration, forever}, {windows, 0},
                   {unknown_key, 1}, {"interval", 10},
                   {sample, on}, {sample, {0, 10}}, {sample, {10, 10}}, {sample, {5, 1.0}},
                   {sample, {1, 3600001}}]].

sample_needs_a_procs_spec_test() ->
    ?assertEqual({error, {badopt, {sample, {1, 10}}}},
                 msgflow_opts:validate(#{procs => new, sample => {1, 10}})),
    ?assertMatch({ok, _}, msgflow_opts:validate(#{procs => existing, sample => {1, 10}})).

%% The first bad key in key order is the one named.
first_bad_named_test() ->
    ?assertEqual({error, {badopt, {interval, x}}},
                 msgflow_opts:validate(#{interval => x, windows => y})).

not_a_map_test() ->
    ?assertEqual({error, {badopt, [{procs, all}]}}, msgflow_opts:validate([{procs, all}])).
