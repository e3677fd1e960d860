%%% EUnit tests of the report encoders, the printed views and the hotspot
%%% rules' arithmetic (exact rates) on views built by hand, so every figure
%%% is known; msgflow_hotspots_tests checks the rules on rows the real row
%%% builder makes.
-module(msgflow_report_tests).
-include_lib("eunit/include/eunit.hrl").

%% A view by process as msgflow_rows:build/2 makes it with per-window
%% counts.  Windows: [{EndMs, DurationMs, #{{S, R} => Messages},
%% #{Receiver => QueueLen}}], oldest first.
view(Windows, Dead) ->
    Pairs = lists:usort(lists:append([maps:keys(W) || {_, _, W, _} <- Windows])),
    {_, Ms, _, _} = lists:last(Windows),
    Rows = lists:reverse(lists:keysort(2,
             [{P, lists:sum(Cs), Cs} || P <- Pairs,
                                        Cs <- [[maps:get(P, W, 0) || {_, _, W, _} <- Windows]]])),
    Ends = lists:usort(lists:append([[S, R] || {S, R} <- Pairs ++ maps:keys(Dead)])),
    #{by => process, node => node(), taken_at => 0, started_at => 0, stopped_at => undefined,
      running => true, window_ms => Ms, scale => 1, estimated => false, sample => off,
      events => lists:sum([T || {_, T, _} <- Rows]), dead_letters => lists:sum(maps:values(Dead)),
      overflow => 0, proc_events_dropped => 0, pairs => length(Rows), groups => length(Rows),
      rows => [#{sender => S, receiver => R, count => T, last_count => lists:last(Cs),
                 rate => lists:last(Cs) * 1000 / Ms, prev_rate => undefined, mean_rate => 0.0,
                 peak_rate => 0.0, windows => Cs} || {{S, R}, T, Cs} <- Rows],
      windows => [#{n => I, at => End, window_ms => D, queue_lens => Q}
                  || {I, {End, D, _, Q}} <- lists:zip(lists:seq(1, length(Windows)), Windows)],
      dead => [{S, R, N} || {{S, R}, N} <- maps:to_list(Dead)],
      endpoints => maps:from_list([{E, #{label => atom_to_binary(E), text => atom_to_binary(E),
                                         display => atom_to_binary(E), module => m,
                                         application => undefined, node => node()}}
                                   || E <- Ends])}.

win(I, Counts) -> win(I, Counts, #{}).
win(I, Counts, Q) -> {I * 1000, 1000, Counts, Q}.

fan_in_test_() ->
    Senders = [list_to_atom("s" ++ integer_to_list(I)) || I <- lists:seq(1, 12)],
    Counts = maps:from_list([{{S, srv}, 100} || S <- Senders]),
    Growing = view([win(I, Counts, #{srv => 20 * I}) || I <- lists:seq(1, 5)], #{}),
    Flat = view([win(I, Counts, #{srv => 20}) || I <- lists:seq(1, 5)], #{}),
    Few = view([win(I, maps:with([{s1, srv}], Counts), #{srv => 20 * I})
                || I <- lists:seq(1, 5)], #{}),
    %% a queue caught full once, as the last window closed
    Blip = view([win(I, Counts, #{srv => case I of 5 -> 50; _ -> 0 end})
                 || I <- lists:seq(1, 5)], #{}),
    [?_assertMatch([#{rule := fan_in, subject := srv,
                      evidence := #{senders := 12, rate := 1200.0,
                                    queue_len := [20, 40, 60, 80, 100]}}],
                   of_rule(fan_in, msgflow_hotspots:find(Growing, #{}))),
     ?_assertEqual([], of_rule(fan_in, msgflow_hotspots:find(Flat, #{}))),
     ?_assertEqual([], of_rule(fan_in, msgflow_hotspots:find(Few, #{}))),
     ?_assertEqual([], of_rule(fan_in, msgflow_hotspots:find(Blip, #{}))),
     ?_assertEqual([], of_rule(fan_in, msgflow_hotspots:find(Growing, #{fan_in_senders => 13}))),
     ?_assertEqual([], of_rule(fan_in, msgflow_hotspots:find(Growing, #{queue_min => 101})))].

hot_pair_and_spike_test_() ->
    Calm = [win(I, #{{a, b} => 50, {c, d} => 50}) || I <- lists:seq(1, 4)],
    V = view(Calm ++ [win(5, #{{a, b} => 20000, {c, d} => 60})], #{}),
    [?_assertMatch([#{rule := hot_pair, subject := {a, b}, evidence := #{rate := 20000.0}}],
                   of_rule(hot_pair, msgflow_hotspots:find(V, #{}))),
     ?_assertMatch([#{rule := spike, subject := {a, b}, evidence := #{count := 20000,
                                                                       mean := 50.0}}],
                   of_rule(spike, msgflow_hotspots:find(V, #{}))),
     ?_assertEqual(2, length(of_rule(hot_pair, msgflow_hotspots:find(V, #{hot_rate => 60})))),
     ?_assertEqual([], of_rule(spike, msgflow_hotspots:find(V, #{spike_factor => 401})))].

fan_out_and_dead_letters_test_() ->
    Rs = [list_to_atom("r" ++ integer_to_list(I)) || I <- lists:seq(1, 25)],
    V = view([win(1, maps:from_list([{{bcast, R}, 2} || R <- Rs]))],
             #{{bcast, r1} => 3, {other, r2} => 1}),
    [?_assertMatch([#{rule := fan_out, subject := bcast,
                      evidence := #{receivers := 25, count := 50}}],
                   of_rule(fan_out, msgflow_hotspots:find(V, #{}))),
     ?_assertMatch([#{subject := bcast, evidence := #{count := 3}},
                    #{subject := other, evidence := #{count := 1}}],
                   of_rule(dead_letters, msgflow_hotspots:find(V, #{}))),
     ?_assertEqual(1, length(of_rule(dead_letters, msgflow_hotspots:find(V, #{dead_min => 2}))))].

bad_options_test_() ->
    [?_assertMatch({error, {badopt, {Bad, Val}, [_ | _]}},
                   msgflow_opts:check(msgflow_hotspots:options(), #{Bad => Val}))
     || {Bad, Val} <- [{hot_rate, 0}, {hot_rate, fast}, {windows, 1.5}, {nope, 1}]].

csv_quoting_test() ->
    V0 = view([win(1, #{{a, b} => 7})], #{}),
    V = V0#{endpoints := maps:map(fun(a, M) -> M#{label := <<"x,\"y\"">>,
                                                  display := <<"x,\"y\"">>};
                                     (_, M) -> M end, maps:get(endpoints, V0))},
    Csv = iolist_to_binary(msgflow_report:csv(V, none)),
    ?assertEqual(<<"sender,receiver,sender_label,receiver_label,messages,msg_per_s,kinds,call_rtt_us,bytes\n"
                   "a,b,\"x,\"\"y\"\"\",b,7,7.0,,,\n">>, Csv),
    %% kinds, most first, an Elixir tag as Elixir writes it
    [Row] = maps:get(rows, V),
    VK = V#{rows := [Row#{kinds => [{call, get, 5}, {info, 'Elixir.Tick', 2}]}]},
    CsvK = iolist_to_binary(msgflow_report:csv(VK, none)),
    ?assertMatch({_, _}, binary:match(CsvK, <<",7,7.0,call:get=5 info:Tick=2,,\n">>)),
    Json = iolist_to_binary(msgflow_report:json(VK, none)),
    ?assertMatch({_, _}, binary:match(Json, <<"{\"kind\":\"call\",\"messages\":5,\"tag\":\"get\"}">>)),
    #{version := 6, rows := [#{messages := 7, window_messages := 7,
                               kinds := [#{kind := call, tag := get, messages := 5},
                                         #{kind := info, tag := 'Elixir.Tick', messages := 2}]}]} =
        msgflow_dump:of_top(VK, none, []).

%% One output for both encoders: OTP's json (OTP 27+) and msgflow's own.
json_encoder_test_() ->
    Doc = #{<<"a">> => [1, 2.5, true, false, null],
            <<"s">> => <<"q\"\\\n\t", 1, "é"/utf8, $\b, $\f, 16#0B, 16#1F, $\r, "/">>},
    Want = <<"{\"a\":[1,2.5,true,false,null],"
             "\"s\":\"q\\\"\\\\\\n\\t\\u0001é\\b\\f\\u000B\\u001F\\r/\"}"/utf8>>,
    Otp = case code:ensure_loaded(json) of
              {module, json} ->
                  [{"OTP's json", ?_assertEqual(Want, iolist_to_binary(apply(json, encode, [Doc])))}];
              _ ->
                  []
          end,
    [{"fallback", ?_assertEqual(Want, iolist_to_binary(msgflow_report:json_fallback(Doc)))},
     {"json_encode", ?_assertEqual(Want, iolist_to_binary(msgflow_report:json_encode(Doc)))}
     | Otp].

%% Rows keyed by group (a module, a label) print as their text.
grouped_exports_test() ->
    V = view([win(1, #{{a, b} => 7, {c, b} => 5})], #{}),
    Row = fun(S, R, C) -> #{sender => S, receiver => R, count => C, last_count => C,
                            rate => float(C), prev_rate => undefined, mean_rate => 0.0,
                            peak_rate => 0.0} end,
    ByModule = V#{by := module, rows := [Row(m, m, 12)], endpoints := #{}},
    Csv = iolist_to_binary(msgflow_report:csv(ByModule, none)),
    ?assertEqual(<<"sender,receiver,sender_label,receiver_label,messages,msg_per_s,kinds,call_rtt_us,bytes\n"
                   "m,m,m,m,12,12.0,,,\n">>, Csv),
    ByName = V#{by := name, rows := [Row(<<"a">>, <<"b">>, 7), Row(<<"c">>, <<"b">>, 5)],
                endpoints := #{}},
    Dot = iolist_to_binary(msgflow_report:dot(ByName, 200)),
    ?assertMatch({_, _}, binary:match(Dot, <<"n1 -> n2 [weight=100">>)),
    ?assertEqual([csv, dot, json, etf, svg, html], msgflow_report:formats()).

%% A label two processes share is shown with each one's pid.
repeated_labels_test() ->
    V0 = view([win(1, #{{a, c} => 7, {b, c} => 5})], #{}),
    Ends = maps:get(endpoints, V0),
    Same = fun(E, T) -> (maps:get(E, Ends))#{label := <<"h:init/1">>, text := T,
                                             display := <<"h:init/1 ", T/binary>>} end,
    V = V0#{endpoints := Ends#{a := Same(a, <<"<0.1.0>">>), b := Same(b, <<"<0.2.0>">>)}},
    Csv = iolist_to_binary(msgflow_report:csv(V, none)),
    ?assertEqual(<<"sender,receiver,sender_label,receiver_label,messages,msg_per_s,kinds,call_rtt_us,bytes\n"
                   "<0.1.0>,c,h:init/1 <0.1.0>,c,7,7.0,,,\n<0.2.0>,c,h:init/1 <0.2.0>,c,5,5.0,,,\n">>,
                 Csv).

of_rule(K, Found) ->
    [F || F = #{rule := K1} <- Found, K1 =:= K].

%% The top table fits the width it is given: every line at most Width
%% columns; MEAN/S and PEAK/S from 120 columns on; a long label cut keeps
%% its start, the module a person recognises (msgflow_fmt:label_cell/4);
%% the KIND cell keeps the kind and the share.
top_width_test_() ->
    V0 = view([win(1, #{{a, b} => 92, {c, b} => 5})], #{}),
    Long = <<"a_rather_long_module_name_for_a_worker:init/1">>,
    Ends = maps:get(endpoints, V0),
    V = V0#{sort => messages,
            rows := [R#{kinds => [{call, a_long_request_tag_name, 90}, {cast, add, 2}]}
                     || R <- maps:get(rows, V0)],
            endpoints := Ends#{a := (maps:get(a, Ends))#{label := Long, display := Long}}},
    Lines = fun(W) -> string:split(unicode:characters_to_list(msgflow_top_view:text(V, #{}, #{width => W, height => 50})), "\n", all)
            end,
    [[?_assert(lists:all(fun(L) -> string:length(L) =< W end, Lines(W))) || W <- [80, 100, 120, 200]],
     ?_assertEqual(nomatch, string:find(lists:nth(2, Lines(80)), "MEAN/S")),
     ?_assertNotEqual(nomatch, string:find(lists:nth(2, Lines(120)), "MEAN/S")),
     ?_assertMatch({match, _}, re:run(lists:nth(3, Lines(80)), "^ +1 a_rather_long_mod", [unicode])),
     ?_assertMatch({match, _}, re:run(lists:nth(3, Lines(80)), "call a_long.* 98%", [unicode]))].

%% The printed matrix in 80 columns: two labels that read the same cut by
%% label_cell are cut at their end instead; every line fits; a cell
%% with no messages is `.'; what does not fit is named.
matrix_text_test() ->
    A = <<"tcp_inet <- httpc_handler:init/1">>,
    B = <<"tcp_inet <- httpd_request_handler:init/1">>,
    Cols = [list_to_binary("r" ++ integer_to_list(I)) || I <- lists:seq(1, 12)],
    Cells = maps:from_list([{{S, C}, #{count => 10, rate => 1.0}} || S <- [A, B], C <- Cols]),
    M = #{by => name, rows => [A, B], cols => Cols, cells => Cells,
          sent => #{A => 120, B => 120}, received => maps:from_list([{C, 20} || C <- Cols]),
          labels => maps:from_list([{K, K} || K <- [A, B | Cols]]), messages => 240,
          running => false, window_ms => 1000, estimated => false},
    Lines = string:split(unicode:characters_to_list(msgflow_matrix_view:text(M, #{}, #{width => 80, height => 24})), "\n", all),
    ?assert(lists:all(fun(L) -> string:length(L) =< 80 end, Lines)),
    [_, _, Row1, Row2 | _] = Lines,
    ?assertMatch({match, _}, re:run(Row1, "^  1 tcp_inet <- httpc_handler", [unicode])),
    ?assertMatch({match, _}, re:run(Row2, "^  2 tcp_inet <- httpd_request", [unicode])),
    ?assertMatch({match, _}, re:run(lists:last([L || L <- Lines, L =/= []]),
                                    "^not shown: 8 more receivers \\(160 messages\\)")).

%% The thresholds in `rules' are the flat ones of 0.1: check/1 gives the
%% rules the same map either way, `rules' winning over a flat key, the
%% defaults filled in.
rules_grouped_test() ->
    Check = fun(O) -> {ok, C} = msgflow_opts:check(msgflow_hotspots:options(), O),
                      {ok, R} = msgflow_hotspots:check(C),
                      R end,
    ?assertEqual(Check(#{hot_rate => 7}), Check(#{rules => #{hot_rate => 7}})),
    ?assertEqual(Check(#{rules => [{hot_rate, 7}]}), Check(#{rules => #{hot_rate => 7}})),
    ?assertMatch(#{hot_rate := 9, queue_min := 10, windows := 5},
                 Check(#{hot_rate => 7, rules => #{hot_rate => 9}})),
    ?assertNot(is_map_key(rules, Check(#{}))),
    ?assertMatch({error, {badopt, {hot_rate, 0}, _}},
                 msgflow_opts:check(msgflow_hotspots:options(), #{rules => #{hot_rate => 0}})),
    [?assertMatch({error, {badopt, {rules, R}, [_ | _]}},
                  msgflow_opts:check(msgflow_hotspots:options(), #{rules => R}))
     || R <- [5, [1, 2], {hot_rate, 1}, [{"hot_rate", 5}]]].
