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
    [?_assertMatch({error, {badopt, {K, V}, [_ | _]}}, msgflow_opts:validate(#{K => V}))
     || {K, V} <- [{procs, everything}, {procs, []}, {procs, [1]}, {procs, [Pid, Pid]},
                   {procs, {Pid}}, {interval, 9}, {interval, 0}, {interval, -1},
                   {interval, 1.0}, {max_pairs, 0}, {max_pairs, (1 bsl 32) + 1},
                   {duration, 0}, {duration, forever}, {windows, 0},
                   {unknown_key, 1}, {"interval", 10},
                   {sample, on}, {sample, {0, 10}}, {sample, {10, 10}}, {sample, {5, 1.0}},
                   {sample, {1, 3600001}}]].

sample_needs_a_procs_spec_test() ->
    ?assertMatch({error, {badopt, {sample, {1, 10}}, [off, _]}},
                 msgflow_opts:validate(#{procs => new, sample => {1, 10}})),
    ?assertMatch({ok, _}, msgflow_opts:validate(#{procs => existing, sample => {1, 10}})).

%% The first bad key in key order is the one named.
first_bad_named_test() ->
    ?assertEqual({error, {badopt, {interval, x}, [<<"an integer from 10 to 3600000 (ms)">>]}},
                 msgflow_opts:validate(#{interval => x, windows => y})).

not_options_test_() ->
    [?_assertEqual({error, {badopt, Bad, [<<"a map">>, <<"a keyword list">>]}},
                   msgflow_opts:validate(Bad))
     || Bad <- [procs_all, [{procs, all}, oops], [{"procs", all}], [a | b], 42]].

%% Elixir's keyword lists are taken where a map is; the first of a
%% repeated key counts (as Keyword.get/2 reads it).
keyword_list_test() ->
    {ok, Map} = msgflow_opts:validate(#{interval => 500, procs => existing}),
    ?assertEqual({ok, Map}, msgflow_opts:validate([{interval, 500}, {procs, existing}])),
    ?assertEqual({ok, Map}, msgflow_opts:validate([{interval, 500}, {procs, existing},
                                                   {interval, 20}])),
    ?assertMatch({ok, #{by := name, refresh := 1000}}, msgflow_opts:check(top, [{by, name}])).

%% An unknown key is named with the keys the call takes; a bad value with
%% the values allowed: the same shape for every call.
every_call_test_() ->
    Groupings = [process, name, module, application, node, kind],
    [?_assertEqual({error, {badopt, {byy, name}, [by, for, node, refresh, sort]}},
                   msgflow_opts:check(top, #{byy => name})),
     ?_assertEqual({error, {badopt, {intervall, 500},
                            lists:sort(maps:keys(msgflow_opts:defaults())
                                       ++ [coordinator, owner, resume])}},
                   msgflow_opts:check(start, #{intervall => 500})),
     ?_assertEqual({error, {badopt, {by, bogus}, Groupings}},
                   msgflow_opts:check(top, #{by => bogus})),
     ?_assertEqual({error, {badopt, {by, bogus}, Groupings}},
                   msgflow_opts:check(export, #{by => bogus})),
     ?_assertEqual({error, {badopt, {hot_rate, 0}, [<<"a number above 0">>]}},
                   msgflow_opts:check(hotspots, #{hot_rate => 0})),
     ?_assertEqual({error, {badopt, {print, yes}, [true, false]}},
                   msgflow_opts:check(follow, #{print => yes})),
     ?_assertEqual({error, {badopt, {sample, 0}, [<<"an integer from 1 to 4294967296 (calls)">>]}},
                   msgflow_opts:check(follow_calls, #{sample => 0})),
     ?_assertEqual({error, {badopt, {duration, never},
                            [infinity, <<"an integer from 1 to 31536000000 (ms)">>]}},
                   msgflow_opts:check(start, #{duration => never})),
     ?_assertEqual({error, {badarg, {by, bogus}, Groupings}},
                   msgflow_opts:arg(by, bogus, {one_of, Groupings})),
     ?_assertEqual(ok, msgflow_opts:arg(by, name, {one_of, Groupings}))].

%% Every call's defaults pass its own check.
defaults_pass_test_() ->
    [?_assertEqual({ok, msgflow_opts:defaults(C)}, msgflow_opts:check(C, msgflow_opts:defaults(C)))
     || C <- [start, top, export, hotspots, follow, follow_calls]].
