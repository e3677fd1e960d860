%%% EUnit tests of the hotspot rules on rows the real row builder makes:
%%% a store fed with known deltas window by window (msgflow_store_feed,
%%% no tracer), live processes as the ends, a receiver's queue filled by
%%% sending it messages it never takes.  Each rule's finding is checked
%%% field by field, and each threshold shown to turn it off.  Rates depend
%%% on how long a window lasted (here a few ms), so the rules on rates are
%%% given thresholds that every window of the test passes or none does.
-module(msgflow_hotspots_tests).
-include_lib("eunit/include/eunit.hrl").

%% 12 senders send 100 each a window to one server that takes nothing:
%% its queue, read as each window closes, grows by 20 a window (20 to
%% 100: fan_in), unless it holds 20 all along (flat) or one sender sends
%% (too few).
fan_in_test_() ->
    {setup, fun() -> ok end,
     fun(_) -> ok end,
     fun(_) ->
             Growing = fan_in(12, grow),
             Flat = fan_in(12, flat),
             Few = fan_in(1, grow),
             [?_assertMatch([#{rule := fan_in, evidence := #{senders := 12,
                                                             queue_len := [20, 40, 60, 80, 100]}}],
                            of_rule(fan_in, maps:get(default, Growing))),
              ?_assertEqual([], of_rule(fan_in, maps:get(default, Flat))),
              ?_assertEqual([], of_rule(fan_in, maps:get(default, Few))),
              ?_assertEqual([], of_rule(fan_in, maps:get(senders_13, Growing))),
              ?_assertEqual([], of_rule(fan_in, maps:get(queue_101, Growing)))]
     end}.

%% Findings on the server's queue (Mode grow: 20 more messages each
%% window; flat: 20 before the first window closes, none after), by
%% option set.
fan_in(NSenders, Mode) ->
    msgflow_store_feed:with_ends(
      NSenders + 1,
      fun(Ends, _Name) ->
              [Srv | Senders] = tuple_to_list(Ends),
              W = {[{S, Srv, 100} || S <- Senders], []},
              Fill = fun(I) when Mode =:= grow; I =:= 1 -> [Srv ! fill || _ <- lists:seq(1, 20)];
                        (_) -> ok
                     end,
              {S, H} = msgflow_store_feed:feed(lists:duplicate(6, W), #{}, Fill),
              Found = #{default => build(H, #{}),
                        senders_13 => build(H, #{fan_in_senders => 13}),
                        queue_101 => build(H, #{queue_min => 101})},
              msgflow_store_feed:retire(S),
              [?assertEqual(Srv, Sub) || #{rule := fan_in, subject := Sub} <- maps:get(default, Found)],
              Found
      end).

%% Four calm windows of 50 messages on each of two pairs, then 20,000 on
%% one: a spike of it (count 20,000 over a mean of 50), and with every
%% window's rate past hot_rate, that pair among the hot ones.
spike_test() ->
    msgflow_store_feed:with_ends(
      4,
      fun(Ends, _Name) ->
              {A, B, C, D} = Ends,
              Calm = {[{A, B, 50}, {C, D, 50}], []},
              %% each window lasts 2 ms or more, so that it has a rate (a
              %% window closed within its first millisecond has none)
              {S, H} = msgflow_store_feed:feed([Calm, Calm, Calm, Calm,
                                                {[{A, B, 20000}, {C, D, 60}], []}, {[], []}],
                                               #{}, fun(_) -> receive after 2 -> ok end end),
              Found = build(H, #{}),
              ?assertMatch([#{subject := {A, B}, evidence := #{count := 20000, mean := 50.0}}],
                           of_rule(spike, Found)),
              ?assertEqual([], of_rule(spike, build(H, #{spike_factor => 401}))),
              %% the pairs whose last window's rate passes hot_rate: both
              %% with a rate no window can stay under, neither with one no
              %% window can reach
              ?assertEqual([{A, B}, {C, D}],
                           lists:sort([P || #{subject := P} <- of_rule(hot_pair, build(H, #{hot_rate => 1.0e-6}))])),
              ?assertEqual([], of_rule(hot_pair, build(H, #{hot_rate => 1.0e15}))),
              [#{evidence := #{count := 20000}}] =
                  [F || F = #{subject := {A1, _}} <- of_rule(hot_pair, build(H, #{hot_rate => 1.0e-6})),
                        A1 =:= A],
              msgflow_store_feed:retire(S)
      end).

%% One process sends 2 messages to each of 25: a fan-out with 25
%% receivers and 50 messages, none past fan_out_receivers 26.
fan_out_test() ->
    msgflow_store_feed:with_ends(
      26,
      fun(Ends, _Name) ->
              [Bcast | Rs] = tuple_to_list(Ends),
              W = {[{Bcast, R, 2} || R <- Rs], []},
              {S, H} = msgflow_store_feed:feed([W, {[], []}], #{}, fun(_) -> ok end),
              ?assertMatch([#{subject := Bcast, evidence := #{receivers := 25, count := 50}}],
                           of_rule(fan_out, build(H, #{}))),
              ?assertEqual([], of_rule(fan_out, build(H, #{fan_out_receivers => 26}))),
              msgflow_store_feed:retire(S)
      end).

%% The hotspots view's value on the store's handle, with the thresholds
%% Rules (the view's options: rules grouped, as a user gives them).
build(H, Rules) ->
    {ok, Opts} = msgflow_opts:check(msgflow_hotspots:options(), #{rules => Rules}),
    {ok, Checked} = msgflow_hotspots:check(Opts),
    msgflow_hotspots:build(H, Checked).

of_rule(K, Found) ->
    [F || F = #{rule := K1} <- Found, K1 =:= K].
