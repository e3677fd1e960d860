%%% EUnit tests of option validation (pure: no tracing).
-module(msgflow_opts_tests).
-include_lib("eunit/include/eunit.hrl").

defaults_test() ->
    ?assertEqual({ok, msgflow_opts:defaults()}, msgflow_opts:validate(#{})),
    ?assertMatch(#{procs := all, interval := 1000, max_pairs := 2000000,
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
    ?assertMatch({ok, #{by := name, limit := 10}}, msgflow_opts:check(view(top), [{by, name}])).

%% A view's options as the query path checks them: its own and, for a
%% view built on every node, `node' and `timeout'.
view(Name) ->
    {ok, Schema} = msgflow_query:options(Name),
    Schema.

%% An unknown key is named with the keys the call takes; a bad value with
%% the values allowed: the same shape for every call.
every_call_test_() ->
    Groupings = [process, name, module, application, node, kind],
    Keys = lists:sort(maps:keys(msgflow_opts:defaults()) ++ [owner]),
    [?_assertEqual({error, {badopt, {byy, name}, [by, bytes, filter, from, history, limit, node, sort, sync, timeout, to, windows]}},
                   msgflow_opts:check(view(top), #{byy => name})),
     ?_assertEqual({error, {badopt, {byy, name}, [by, bytes, filter, from, history, limit, node, sort, sync, timeout, to, windows]}},
                   msgflow_query:run(top, #{byy => name})),
     ?_assertEqual({error, {badopt, {intervall, 500}, Keys}},
                   msgflow_opts:check(msgflow_opts:schema(start), #{intervall => 500})),
     %% internal options are no user's
     ?_assertEqual({error, {badopt, {coordinator, self()}, Keys}},
                   msgflow_opts:validate(#{coordinator => self()})),
     ?_assertEqual({error, {badopt, {resume, true}, Keys}},
                   msgflow_opts:validate(#{resume => true})),
     ?_assertEqual({error, {badopt, {by, bogus}, Groupings}},
                   msgflow_opts:check(view(top), #{by => bogus})),
     ?_assertEqual({error, {badopt, {by, bogus}, Groupings}},
                   msgflow_opts:check(msgflow_export:options(), #{by => bogus})),
     ?_assertEqual({error, {badopt, {hot_rate, 0}, [<<"a number above 0">>]}},
                   msgflow_opts:check(view(hotspots), #{hot_rate => 0})),
     ?_assertEqual({error, {badopt, {print, yes}, [true, false]}},
                   msgflow_opts:check(msgflow_flow:options(follow), #{print => yes})),
     ?_assertEqual({error, {badopt, {sample, 0}, [<<"an integer from 1 to 4294967296 (calls)">>]}},
                   msgflow_opts:check(msgflow_flow:options(follow_calls), #{sample => 0})),
     ?_assertEqual({error, {badopt, {duration, never},
                            [infinity, <<"an integer from 1 to 31536000000 (ms)">>]}},
                   msgflow_opts:check(msgflow_opts:schema(start), #{duration => never})),
     ?_assertEqual({error, {badarg, {view, bogus}, msgflow_view:names()}},
                   msgflow_query:run(bogus, #{})),
     ?_assertEqual({error, {badarg, {by, bogus}, Groupings}},
                   msgflow_opts:arg(by, bogus, {one_of, Groupings})),
     ?_assertEqual(ok, msgflow_opts:arg(by, name, {one_of, Groupings}))].

%% Every call's defaults pass its own check, every view's too.
defaults_pass_test_() ->
    [?_assertEqual({ok, msgflow_opts:defaults(S)}, msgflow_opts:check(S, msgflow_opts:defaults(S)))
     || S <- [msgflow_opts:schema(start), msgflow_export:options(), msgflow_flow:options(follow),
              msgflow_flow:options(follow_calls)]
            ++ [view(N) || N <- msgflow_view:names()]].

%% The history's options as one map are the flat keys of 0.1, which
%% still work and are named deprecated; an Elixir keyword list too; a
%% bad inner value names its key.
history_grouped_test() ->
    Flat = #{history => "/tmp/h", history_bytes => 1 bsl 20, history_segment => 5,
             history_whole => 2, history_tenths => 7},
    Grouped = #{history => #{dir => "/tmp/h", max_bytes => 1 bsl 20,
                             tiers => #{segment => 5, tier0 => 2, tier1 => 7}}},
    ?assertEqual(msgflow_opts:validate(Flat), msgflow_opts:validate(Grouped)),
    ?assertEqual(msgflow_opts:validate(Grouped),
                 msgflow_opts:validate([{history, [{dir, "/tmp/h"}, {max_bytes, 1 bsl 20},
                                                   {tiers, [{segment, 5}, {tier0, 2}, {tier1, 7}]}]}])),
    {ok, #{history_bytes := B, history_segment := 60, history_whole := 10, history_tenths := 60}} =
        msgflow_opts:validate(#{history => #{dir => "/tmp/h"}}),
    ?assertEqual(64 * 1024 * 1024, B),
    ?assertEqual([history_bytes, history_segment, history_tenths, history_whole],
                 [K || {K, _} <- msgflow_opts:deprecated(Flat)]),
    ?assertEqual([], msgflow_opts:deprecated(Grouped)),
    ?assertMatch({error, {badopt, {max_bytes, 1}, _}},
                 msgflow_opts:validate(#{history => #{dir => "/tmp/h", max_bytes => 1}})),
    ?assertMatch({error, {badopt, {tier2, 1}, [segment, tier0, tier1]}},
                 msgflow_opts:validate(#{history => #{dir => "/tmp/h", tiers => #{tier2 => 1}}})),
    ?assertMatch({error, {badopt, {history, #{max_bytes := 1}}, _}},
                 msgflow_opts:validate(#{history => #{max_bytes => 1}})),
    %% what is no map of options is named as the option it was given for
    [?assertMatch({error, {badopt, {tiers, T}, [_ | _]}},
                  msgflow_opts:validate(#{history => #{dir => "/tmp/h", tiers => T}}))
     || T <- [5, "abc", [1], [{"segment", 1}]]],
    %% one form at a time
    ?assertMatch({error, {badopt, {history_bytes, 70000}, _}},
                 msgflow_opts:validate(#{history => #{dir => "/tmp/h"}, history_bytes => 70000})).
