%%% @doc Hotspot rules over the windows the collector keeps.
%%% Pure functions of rows (msgflow_rows) by process with per-window
%%% counts (spec/1 says which): no tracing, no process state; the rules
%%% run here only.
%%%
%%% The findings msgflow:hotspots/1 returns, each a map
%%% `#{rule, subject, label, evidence, explanation}':
%%% <ul>
%%% <li>`fan_in': a local receiver with at least `fan_in_senders' (10) senders in
%%%     the last window whose message_queue_len grew across the windows
%%%     looked at and was at least `queue_min' (10) messages as each of the
%%%     last two closed;</li>
%%% <li>`hot_pair': a pair at `hot_rate' (10,000) msg/s or more in the last window;</li>
%%% <li>`spike': a pair with at least `spike_min' (100) messages in the last window,
%%%     `spike_factor' (5) times the mean of the windows before it;</li>
%%% <li>`fan_out': a sender to `fan_out_receivers' (20) receivers or more in the last window;</li>
%%% <li>`dead_letters': a sender with at least `dead_min' (1) sends to processes
%%%     that did not exist, since start;</li>
%%% <li>`slow_calls' (slow_calls/2, from the calls view): a call edge whose
%%%     sampled round trips have a p99 of `slow_call_ms' (100) or more since
%%%     start, or whose last window's p99 is `slow_growth' (3) times the
%%%     window before's and at least `slow_call_ms' / 10.</li>
%%% </ul>
%%% `windows' (5) is how many of the latest closed windows are looked at;
%%% evidence figures are messages, msg/s, ms and queue lengths (messages),
%%% and `kind => {Kind, Tag, SharePercent}', the main kind of the traffic
%%% behind the finding.  Findings of one rule whose subjects share a label
%%% are one finding for the group: `members' (how many), `subject' the
%%% list of their subjects, evidence `#{members, min, max}' (each figure's
%%% lowest and highest): `21 x xmpp_stream_in:init/1: each sends to 24
%%% receivers, 769-812 messages in the last window'.
%%% `large_messages': an edge whose sampled messages since start reach
%%% `large_words' (1,000) heap words, ran out the size walk's budget, or
%%% reference `large_binary_bytes' (1 MiB) of binaries on average; `long_wait': a
%%% receiver whose messages waited `long_wait_ms' (100) or more in its
%%% mailbox in the last window, longer than the window before or with a
%%% queue that grew all window (msgflow_store_sizes, msgflow_store_waits).
%%% A node of a cluster that did not answer in time is a finding too:
%%% `no_answer', its reason in its evidence.
%%%
%%% The `hotspots' view (msgflow:hotspots/1 prints it): options are the
%%% rules' thresholds and `windows' (msgflow_query adds `node' and
%%% `timeout'); each node finds its own from its windows; the value is
%%% the findings, strongest first within each rule.
-module(msgflow_hotspots).
-behaviour(msgflow_view).
-export([options/0, rules/0, check/1, build/2, merge/3, text/3, json/2, fresh/0]).
-export([find/2]).

-export_type([finding/0]).

%% the latest closed windows the rules look at, unless `windows' says
-define(WINDOWS, 5).

%% what a person does about a large_messages and a long_wait finding
-define(LARGE_ADVICE, "send less, or a key to the data (ETS, persistent_term) instead of it").
-define(WAIT_ADVICE, "it receives faster than it handles them: spread the work, or make "
                     "its senders wait for it (calls instead of casts)").

%% the sampled round trips a call group needs to be judged slow by its
%% median, its p90, its p99
-define(MIN_SLOW_SAMPLES, 3).
-define(MIN_P90_SAMPLES, 10).
-define(MIN_P99_SAMPLES, 100).

%% fan-in and fan-out subjects whose pairs are read for their kind in one
%% read of the pairs, with a guard naming each
-define(KIND_ENDS, 32).
%% rows a finding's kinds are read from, at most, for each ?KIND_ENDS of
%% its subjects
-define(KIND_ROWS, 256).

%% `node' (the node it was found on) when msgflow counts across a cluster.
%% `members' (and `subject' the list of the members' subjects) when the
%% finding stands for several subjects that share a label (find/2).
-type finding() :: #{rule := bottleneck | fan_in | hot_pair | spike | fan_out | dead_letters | slow_calls
                             | large_messages | long_wait | no_answer,
                     subject := term(), label := binary(), evidence := map(),
                     explanation := binary(), members => pos_integer(), node => node(),
                     cause => msgflow_bottlenecks_view:cause()}.

%% @doc The view's options: `windows' (the latest closed windows looked
%% at, 5) and `rules', a map of the rules' thresholds (rules/0, each with
%% its default).  The thresholds given flat (`hot_rate => 1000', 0.1's
%% form) still work in 0.2 (check/1 says once that they are deprecated).
-spec options() -> msgflow_opts:schema().
options() ->
    maps:merge(#{windows => {?WINDOWS, {int, 1, 10000, "windows"}},
                 rules => {#{}, {group, rules()}}},
               maps:map(fun(_, {_, Rule}) -> {none, Rule} end, rules())).

%% @doc The rules' thresholds, with their defaults: `rules => #{...}'.
-spec rules() -> msgflow_opts:schema().
rules() ->
    maps:merge(msgflow_bottlenecks_view:rules(), own_rules()).

own_rules() ->
    #{fan_in_senders => {10, pos_number},   %% distinct senders to call it fan-in
      queue_min => {10, pos_number},        %% messages queued in the last window, at least
      hot_rate => {10000, pos_number},      %% messages/s over the last window
      spike_factor => {5, pos_number},      %% last window >= factor x mean of the earlier ones
      spike_min => {100, pos_number},       %% messages in the last window, at least
      fan_out_receivers => {20, pos_number},%% distinct receivers of one sender
      dead_min => {1, pos_number},          %% dead letters from one sender, at least
      slow_call_ms => {100, pos_number},    %% a call edge's p99, ms, at least
      slow_growth => {3, pos_number},       %% last window's p99 >= growth x the one before
      large_words => {1000, pos_number},    %% a sampled message's heap words, at least
      large_binary_bytes => {1048576, pos_number}, %% off-heap binary bytes a message, mean
      long_wait_ms => {100, pos_number}}.   %% a mailbox's wait in the last window, ms

%% @doc The thresholds as the rules read them: the defaults, those given
%% flat (deprecated, said once in the log), then `rules'; `rules' itself
%% dropped.
-spec check(map()) -> {ok, map()}.
check(O) ->
    Flat = maps:with(maps:keys(rules()), O),
    ok = msgflow_opts:warn_deprecated(hotspots, [{K, iolist_to_binary(io_lib:format("rules => #{~p => ...}", [K]))}
                                                 || K <- lists:sort(maps:keys(Flat))]),
    {ok, Given} = msgflow_opts:to_map(maps:get(rules, O, #{})),
    {ok, maps:merge(maps:remove(rules, O), thresholds(maps:merge(Flat, Given)))}.

%% Given (thresholds, and whatever else) over the thresholds' defaults.
thresholds(Given) ->
    maps:merge(msgflow_opts:defaults(rules()), Given).

%% @doc false: the rules read closed windows (and the round trips and
%% sizes merged by then), so the findings are built from the store as the
%% collector last merged it, with no snapshot first: hotspots() answers
%% while a merge of a million new pairs is under way (the web page asks
%% every 5 s).
-spec fresh() -> false.
fresh() -> false.

%% @doc This node's findings, each with `node'.  The rules read what the
%% store keeps as snapshots merge (inputs/2): the last window's ends (each
%% receiver's distinct senders and messages in, each sender's distinct
%% receivers and messages out) and the rows of only the pairs that can be
%% a hot pair or a spike (the busiest of the last window); the kind of a
%% fan finding is then read from the rows into or out of its subjects
%% (fan_kinds/3).  A store that does not keep them (its index let go of
%% pairs that could be a finding) is read whole.
-spec build(msgflow_store:store(), map()) -> [finding()].
build(Store, Opts0) ->
    Opts = maps:merge(thresholds(#{windows => ?WINDOWS}), Opts0),
    Found = case inputs(Store, Opts) of
                {ok, Keys, Ends = #{ins := Ins, outs := Outs}} ->
                    %% the fan subjects labelled too: their pairs may not be read
                    Spec = (spec(Opts))#{keys => Keys, ends => maps:keys(Ins) ++ maps:keys(Outs)},
                    View = msgflow_rows:build(Store, Spec),
                    Fs = rules(View, Ends, Opts),
                    Kinds = maps:merge(kinds_of(View), fan_kinds(Store, Fs, Opts)),
                    [with_kind(F, Kinds) || F <- Fs];
                unknown ->
                    find(msgflow_rows:build(Store, spec(Opts)), Opts)
            end,
    Measured = grouped(large_messages(Store, Opts) ++ long_wait(Store, Opts), meta_label(Store), Opts),
    %% (an edge is slow or growing only with a round trip of at least
    %% growth_floor_us/1: the rest of the edges are not built)
    Slowest = ceil(growth_floor_us(maps:get(slow_call_ms, Opts))),
    Bottlenecks = [#{rule => bottleneck, subject => S, label => L,
                     evidence => E#{verdict => V, cost => C},
                     explanation => msgflow_bottlenecks_view:summary(B), cause => B}
                   || B = #{verdict := V, subject := S, label := L, evidence := E, cost := C}
                          <- maps:get(causes, msgflow_bottlenecks_view:build(Store, Opts))],
    [F#{node => node()} || F <- Bottlenecks ++ Found
                               ++ slow_calls(msgflow_calls_view:build(Store, #{slowest_us => Slowest}), Opts)
                               ++ Measured].

%% @doc Every node's findings, this node's first, and one `no_answer'
%% finding for each node that did not answer.
-spec merge([[finding()]], map(), msgflow_view:context()) -> [finding()].
merge(Parts, _Opts, #{missing := Missing}) ->
    lists:append(Parts)
        ++ [#{rule => no_answer, subject => N, label => atom_to_binary(N), node => N,
              evidence => #{reason => Why},
              explanation => fmt("~s did not answer in time (~0tp): its findings are not here",
                                 [N, Why])} || {N, Why} <- Missing].

%% @doc The findings, a line each in the area's width (longer
%% explanations go on, indented, on the next lines): the rule, the node of
%% a finding of another node (across a cluster), and the explanation with
%% its figures.
-spec text([finding()], map(), msgflow_view:area()) -> unicode:chardata().
text([], #{windows := Windows}, _Area) ->
    io_lib:format("msgflow hotspots: none in the last ~b windows (the rules and their "
                  "thresholds: msgflow_hotspots)~n", [Windows]);
text(Findings, #{windows := Windows}, #{width := Width}) ->
    [io_lib:format("msgflow hotspots: ~b in the last ~b windows~n", [length(Findings), Windows]),
     [begin
          %% a finding of another node names it
          Node = case F of
                     #{node := N} when N =/= node() -> [msgflow_fmt:name(N), " "];
                     _ -> ""
                 end,
          Text = unicode:characters_to_list([Node, Why]),
          [msgflow_fmt:cell(atom_to_list(Rule), 15, "~"), msgflow_fmt:wrap(Text, max(20, Width - 15), 15)]
      end || F = #{rule := Rule, explanation := Why} <- Findings]].

%% @doc The findings as JSON: each one's rule, label, explanation and
%% node, and a bottleneck's cause with its chain (as the bottlenecks
%% view's JSON gives it: the page colours the graph from it).
-spec json([finding()], map()) -> msgflow_view:json().
json(Findings, _Opts) ->
    [(case F of
          #{cause := C} -> #{<<"cause">> => msgflow_bottlenecks_view:cause_json(C)};
          _ -> #{}
      end)#{<<"rule">> => atom_to_binary(R), <<"label">> => L, <<"explanation">> => E,
            <<"node">> => atom_to_binary(maps:get(node, F, node()))}
     || F = #{rule := R, label := L, explanation := E} <- Findings].

%% The view the rules read, for checked options: pairs by process with
%% traffic in the `windows' latest closed windows, their counts per
%% window, and the dead letters.
spec(#{windows := N}) ->
    #{by => process, limit => all, windows => N, active => true, dead => true}.

%% @doc Findings in View (built with spec/1), strongest first within each
%% kind; the findings of one rule on subjects that share a label are one
%% finding for the group (grouped/3).  Opts are thresholds as options/0
%% checks them (their defaults fill in the rest).
-spec find(map(), map()) -> [finding()].
find(View, Opts) ->
    Kinds = kinds_of(View),
    [with_kind(F, Kinds) || F <- rules(View, rows, maps:merge(thresholds(#{windows => ?WINDOWS}), Opts))].

%% Each row's kinds, by pair: `#{{S, R} => [kind_count()]}'.
kinds_of(#{rows := Rows}) ->
    maps:from_list([{{S, R}, Ks} || #{sender := S, receiver := R, kinds := Ks} <- Rows]).

%% The findings of View, whose rows are every pair's (Ends `rows': the
%% last window's ends are summed from them) or the candidates' (Ends the
%% store's, inputs/2), without their kind (with_kind/2).
rules(View = #{windows := All, rows := Rows, endpoints := Ends}, EndsIn, O = #{windows := N}) ->
    Kept = lists:nthtail(max(0, length(All) - N), All),
    %% per window: {DurationMs, #{{S, R} => Messages}, #{Receiver => QueueLen}}
    Counts = lists:foldl(
               fun(Row = #{sender := S, receiver := R}, Acc) ->
                       %% no `windows' in a row before the first window closed
                       Cs = maps:get(windows, Row, []),
                       [case C of
                            0 -> M;
                            _ -> M#{{S, R} => C}
                        end || {C, M} <- lists:zip(lists:nthtail(length(Cs) - length(Kept), Cs),
                                                   Acc)]
               end, [#{} || _ <- Kept], Rows),
    Ws = [{D, C, Q} || {#{window_ms := D, queue_lens := Q}, C} <- lists:zip(Kept, Counts)],
    %% an endpoint's display (its label, with its pid when shared) or label
    Field = fun(F) ->
                    fun(E) ->
                            case Ends of
                                #{E := #{F := L}} -> L;
                                _ -> msgflow_fmt:endpoint(E)
                            end
                    end
            end,
    Label = Field(display),
    Scale = maps:get(scale, View, 1),
    Group = Field(label),
    #{ins := Ins, outs := Outs} = case {EndsIn, Ws} of
                                      {rows, []} -> #{ins => #{}, outs => #{}};
                                      {rows, _} -> ends(element(2, lists:last(Ws)), kinds_of(View));
                                      _ -> EndsIn
                                  end,
    [F
     || Found <- [fan_in(Ws, Ins, O, Label, Scale), hot_pair(Ws, O, Label, Scale),
                  spike(Ws, O, Label), fan_out(Ws, Outs, O, Label),
                  dead_letters(View, O, Label)],
        F <- grouped(Found, Group, O)].

%% The last window's ends from its pairs' counts (Last: `#{{S, R} =>
%% Messages}'): `ins', each receiver's distinct senders and messages in;
%% `outs', each sender's distinct receivers and messages out, of the
%% messages that are no replies (a server answering many callers sends to
%% each of them, but it is asked): a pair's window counted for the share
%% of its messages that are no replies (all of it with kinds off).
ends(Last, Kinds) ->
    maps:fold(fun({S, R}, C, #{ins := In, outs := Out}) ->
                      {Ns, Ni} = maps:get(R, In, {0, 0}),
                      Out1 = case round(C * asked_share(maps:get({S, R}, Kinds, []))) of
                                 0 -> Out;
                                 CO ->
                                     {Ro, No} = maps:get(S, Out, {0, 0}),
                                     Out#{S => {Ro + 1, No + CO}}
                             end,
                      #{ins => In#{R => {Ns + 1, Ni + C}}, outs => Out1}
              end, #{ins => #{}, outs => #{}}, Last).

%% What the rules need of the store, read from what it keeps as
%% snapshots merge: the pairs that can be a hot pair or a spike (the last
%% closed window's busiest index holds every pair with as many messages
%% as either rule asks for) and the last window's ends (its receivers that
%% had their queue read, and its senders with fan_out_receivers receivers
%% or more).  `unknown' when the store does not keep them, its index let
%% go of pairs that could be a finding, or a fan rule asks for fewer
%% partners than it keeps ends with.
inputs(Store = #{busiest := #{last := Last}, window_ends := #{last := {In, Out}, min_partners := Kept},
                 windows := [_ | _] = Ws},
       #{hot_rate := Hot, spike_min := SpikeMin, fan_out_receivers := MinR,
         fan_in_senders := MinS, queue_min := QMin})
  when Last =/= none, MinR >= Kept, MinS >= Kept ->
    #{window_ms := WinMs, scale := Scale} = msgflow_rows:rate_window(Store),
    %% a pair with fewer messages than this in the last window is no hot
    %% pair and no spike
    Thr = max(1, min(ceil(SpikeMin), floor(Hot * WinMs / (1000 * Scale)))),
    try msgflow_store_index:above(Last, Thr) of
        unknown ->
            unknown;
        {ok, Busy} ->
            #{queue_lens := QN} = lists:last(Ws),
            Ins = maps:from_list(
                    [{P, Sum} || {P, Len} <- maps:to_list(QN), Len >= QMin,
                                 Sum = {Ns, _} <- [in_sum(In, P)], Ns >= MinS]),
            Outs = maps:from_list([{Sn, {Nr, Nm}}
                                   || {Sn, Nr, Nm} <- ets:select(Out, [{{'_', '$1', '_'},
                                                                        [{'>=', '$1', MinR}],
                                                                        ['$_']}])]),
            {ok, [K || {K, _} <- Busy], #{ins => Ins, outs => Outs}}
    catch
        %% the window's ends, deleted since (a window after they were
        %% the last's): the store is read whole
        error:badarg -> unknown
    end;
inputs(#{windows := []}, _) ->
    %% no window closed yet: only the dead letters can be a finding
    {ok, [], #{ins => #{}, outs => #{}}};
inputs(_, _) ->
    unknown.

%% Receiver P's distinct senders and messages in the last window, sent to
%% it or to its registered name (a sender that used both counts twice).
in_sum(In, P) ->
    Names = names_of(P),
    lists:foldl(fun(K, {A, B}) ->
                        case ets:lookup(In, K) of
                            [{_, Ns, Nm}] -> {A + Ns, B + Nm};
                            [] -> {A, B}
                        end
                end, {0, 0}, [P | Names ++ [{N, node()} || N <- Names]]).

%% The name a local process is registered under, if any.
names_of(P) when is_pid(P), node(P) =:= node() ->
    case process_info(P, registered_name) of
        {registered_name, N} -> [N];
        _ -> []
    end;
names_of(_) ->
    [].

%% The kinds of the rows out of Found's fan-out subjects and into its
%% fan-in ones (`#{{S, R} => [kind_count()]}'), for with_kind/2: a read
%% of the pairs for each ?KIND_ENDS of them, with a guard naming each, that
%% stops at ?KIND_ROWS rows.  A finding of a group gives the kinds of its
%% first ?KIND_ENDS members, its strongest (a group of 1,000 senders at a
%% million pairs took 32 reads of them, 20 s, for one note; a read of the
%% whole table, 0.6 s, while the finding was in the last window).
fan_kinds(Store = #{pairs := T}, Found, Opts) ->
    Subjects = fun kind_subjects/1,
    Into = lists:append([[P | names_of(P) ++ [{N, node()} || N <- names_of(P)]]
                         || F = #{rule := fan_in} <- Found, P <- Subjects(F)]),
    Out = lists:append([Subjects(F) || F = #{rule := fan_out} <- Found]),
    Is = fun(Var, Ends) -> [{'=:=', Var, {const, E}} || E <- Ends] end,
    Keys = lists:append(
             [case msgflow_row_table:select(T, [{msgflow_row:pattern(#{key => {'$1', '$2'}}),
                                   [list_to_tuple(['orelse', false | Guards])], [{{'$1', '$2'}}]}],
                              ?KIND_ROWS) of
                  {Some, _} -> Some;
                  '$end_of_table' -> []
              end || Guards <- chunks(Is('$1', Out) ++ Is('$2', Into), ?KIND_ENDS)]),
    case Keys of
        [] -> #{};
        _ -> kinds_of(msgflow_rows:build(Store, (spec(Opts))#{keys => Keys, labelled => 0}))
    end.

chunks([], _) -> [];
chunks(L, N) when length(L) =< N -> [L];
chunks(L, N) ->
    {H, T} = lists:split(N, L),
    [H | chunks(T, N)].

%% Findings of one rule whose subjects share a label (21 sessions of
%% xmpp_stream_in:init/1, each a fan_out) become one finding for the
%% group: `subject' the list of the members' subjects, `members' their
%% number, evidence `#{members, min, max}' (min and max: each numeric
%% figure of the members' evidence, lowest and highest) and the spread in
%% its explanation: `21 x xmpp_stream_in:init/1: each sends to 24
%% receivers, 769-812 messages in the last window'.  A subject alone with
%% its label stays as it was found.  Groups come in the order of their
%% strongest member, and a group's members strongest first (by their
%% rule's figure, strength/1; equal ones by subject, so that the order is
%% the same however the rules met them).
grouped(Found, Group, O) ->
    Key = fun(#{subject := {S, R}, rule := K}) when K =:= hot_pair; K =:= spike;
                                                    K =:= large_messages ->
                  {Group(S), Group(R)};
             (#{subject := E}) -> Group(E)
          end,
    {Order, ByKey} = lists:foldl(
                       fun(F, {Ks, M}) ->
                               K = Key(F),
                               case M of
                                   #{K := Fs} -> {Ks, M#{K := [F | Fs]}};
                                   _ -> {[K | Ks], M#{K => [F]}}
                               end
                       end, {[], #{}}, Found),
    [case maps:get(K, ByKey) of
         [F] -> F;
         Fs -> group_finding(K, [F || {_, _, F} <- lists:sort([{-strength(F), maps:get(subject, F), F}
                                                                 || F <- Fs])], O)
     end || K <- lists:reverse(Order)].

%% The figure a finding of its rule is strongest by.
strength(#{rule := Rule, evidence := Ev}) ->
    maps:get(case Rule of
                 fan_in -> rate;
                 hot_pair -> rate;
                 large_messages -> words_max;
                 long_wait -> wait_ms;
                 _ -> count   %% fan_out, spike, dead_letters
             end, Ev, 0).

group_finding(Key, Fs = [#{rule := Rule} | _], O) ->
    N = length(Fs),
    Evs = [Ev || #{evidence := Ev} <- Fs],
    Nums = [K || {K, V} <- maps:to_list(hd(Evs)), is_number(V)],
    Min = maps:from_list([{K, lists:min([maps:get(K, Ev) || Ev <- Evs])} || K <- Nums]),
    Max = maps:from_list([{K, lists:max([maps:get(K, Ev) || Ev <- Evs])} || K <- Nums]),
    Label = case Key of
                {SL, RL} -> iolist_to_binary([SL, " -> ", RL]);
                L -> L
            end,
    Spread = fun(K, Fmt) ->
                     case {Fmt(maps:get(K, Min)), Fmt(maps:get(K, Max))} of
                         {Same, Same} -> Same;
                         {Lo, Hi} -> [Lo, "-", Hi]
                     end
             end,
    Int = fun msgflow_fmt:int/1,
    Rate = fun msgflow_fmt:rate/1,
    Text = case Rule of
               fan_out ->
                   fmt("~b x ~ts: each sends to ~s receivers, ~s messages in the last window",
                       [N, Label, Spread(receivers, Int), Spread(count, Int)]);
               fan_in ->
                   fmt("~b x ~ts: ~s senders each, ~s msg/s in, queues up to ~s",
                       [N, Label, Spread(senders, Int), Spread(rate, Rate),
                        Int(lists:max([lists:last(Q) || #{queue_len := Q} <- Evs]))]);
               hot_pair ->
                   fmt("~b x ~ts: ~s msg/s each (threshold ~s)",
                       [N, Label, Spread(rate, Rate), Rate(maps:get(hot_rate, O))]);
               spike ->
                   fmt("~b x ~ts: ~s messages each in the last window, ~s x the mean "
                       "of the windows before",
                       [N, Label, Spread(count, Int),
                        Spread(factor, fun(F) -> io_lib:format("~.1f", [F]) end)]);
               dead_letters ->
                   fmt("~b x ~ts sent ~s messages each to ~s processes that did not exist",
                       [N, Label, Spread(count, Int), Spread(receivers, Int)]);
               large_messages ->
                   case maps:get(large, Max) of
                       0 ->
                           fmt("~b x ~ts: messages of up to ~s words each (~s copied a send at "
                               "most): ~ts",
                               [N, Label, Spread(words_max, Int),
                                msgflow_fmt:bytes(maps:get(bytes_max, Max)), ?LARGE_ADVICE]);
                       _ ->
                           fmt("~b x ~ts: messages larger than msgflow measures (~s words, ~s "
                               "copied a send, or more): ~ts",
                               [N, Label, Int(maps:get(words_max, Max)),
                                msgflow_fmt:bytes(maps:get(bytes_max, Max)), ?LARGE_ADVICE])
                   end;
               long_wait ->
                   fmt("~b x ~ts: messages wait ~s ms each in the mailbox: ~ts",
                       [N, Label, Spread(wait_ms, fun(W) -> integer_to_list(round(W)) end),
                        ?WAIT_ADVICE])
           end,
    #{rule => Rule, subject => [S || #{subject := S} <- Fs], members => N, label => Label,
      evidence => #{members => N, min => Min, max => Max}, explanation => Text}.

%% A finding with the dominant kind and tag of the traffic behind it
%% (`kind => {Kind, Tag, SharePercent}' in its evidence, and in its
%% explanation: `call get 97%'), from the kinds of the rows it is about:
%% a pair's, or every row into (fan_in) or out of (fan_out) its subject
%% (a group's: its first ?KIND_ENDS members', kind_subjects/1).
with_kind(F = #{rule := dead_letters}, _) ->
    F;
with_kind(F = #{rule := Rule, evidence := Ev, explanation := Ex}, Kinds) ->
    Subjs = kind_subjects(F),
    In = maps:from_keys(Subjs, true),
    Rows = case Rule of
               fan_in -> [Ks || {{_, R}, Ks} <- maps:to_list(Kinds), is_map_key(R, In)];
               fan_out -> [Ks || {{S, _}, Ks} <- maps:to_list(Kinds), is_map_key(S, In)];
               _ -> [maps:get(Subj, Kinds, []) || Subj <- Subjs]
           end,
    case msgflow_row:sum_kinds(Rows) of
        [] ->
            F;
        Summed = [{K, T, N} | _] ->
            Share = round(100 * N / lists:sum([C || {_, _, C} <- Summed])),
            F#{evidence := Ev#{kind => {K, T, Share}},
               explanation := iolist_to_binary([Ex, ", ", msgflow_fmt:kind(K, T),
                                                io_lib:format(" ~b%", [Share])])}
    end.

%% The subjects whose rows give a finding its kind: its own, or a
%% group's first ?KIND_ENDS members'.
kind_subjects(#{members := _, subject := Ss}) -> lists:sublist(Ss, ?KIND_ENDS);
kind_subjects(#{subject := S}) -> [S].

%% Many senders into one receiver whose queue grew from the first window
%% looked at to the last.
%% The queue must be at least queue_min in the last two windows: one
%% reading of a queue is an instant, and a receiver that keeps up can be
%% caught with its senders' messages not yet read.
fan_in(Ws, Ins, #{fan_in_senders := MinS, queue_min := QMin}, Label, Scale) when length(Ws) >= 2 ->
    {_, _, Q0} = hd(Ws),
    [{Dur, _, QN}, {_, _, QPrev} | _] = lists:reverse(Ws),
    Found = [begin
                 Lens = [maps:get(R, Q, 0) || {_, _, Q} <- Ws],
                 Rate = msgflow_row:per_s(In, Dur, Scale),
                 #{rule => fan_in, subject => R, label => Label(R),
                   evidence => #{senders => Ns, rate => Rate, queue_len => Lens,
                                 window_ms => Dur},
                   explanation => fmt("~ts: ~s senders, ~s msg/s in, queue ~s -> ~s over "
                                      "~b windows",
                                      [Label(R), msgflow_fmt:int(Ns), msgflow_fmt:rate(Rate),
                                       msgflow_fmt:int(hd(Lens)), msgflow_fmt:int(lists:last(Lens)),
                                       length(Lens)])}
             end
             || {R, {Ns, In}} <- maps:to_list(Ins), Ns >= MinS,
                is_map_key(R, QN), maps:get(R, QN) >= QMin, maps:get(R, QPrev, 0) >= QMin,
                maps:get(R, QN) > maps:get(R, Q0, 0)],
    by_desc(fun(#{evidence := #{senders := S}}) -> S end, Found);
fan_in(_, _, _, _, _) ->
    [].

hot_pair([], _, _, _) ->
    [];
hot_pair(Ws, #{hot_rate := Min}, Label, Scale) ->
    {Dur, Last, _} = lists:last(Ws),
    Found = [#{rule => hot_pair, subject => {S, R}, label => pair_label(S, R, Label),
               evidence => #{rate => Rate, count => C, window_ms => Dur},
               explanation => fmt("~ts: ~s msg/s (threshold ~s)",
                                  [pair_label(S, R, Label), msgflow_fmt:rate(Rate),
                                   msgflow_fmt:rate(Min)])}
             || {{S, R}, C} <- maps:to_list(Last), Rate <- [msgflow_row:per_s(C, Dur, Scale)],
                Rate >= Min],
    by_desc(fun(#{evidence := #{rate := R}}) -> R end, Found).

%% A pair whose last window is spike_factor times the mean of the earlier
%% windows looked at (windows where it sent nothing count as 0).
spike(Ws, #{spike_factor := K, spike_min := Min}, Label) when length(Ws) >= 3 ->
    {Before, [{Dur, Last, _}]} = lists:split(length(Ws) - 1, Ws),
    Found = [#{rule => spike, subject => {S, R}, label => pair_label(S, R, Label),
               evidence => #{count => C, mean => Mean, factor => C / max(Mean, 1),
                             window_ms => Dur, windows => length(Before)},
               explanation => fmt("~ts: ~s messages in the last window, ~.1f x the "
                                  "mean of the ~b before",
                                  [pair_label(S, R, Label), msgflow_fmt:int(C), C / max(Mean, 1),
                                   length(Before)])}
             || {{S, R}, C} <- maps:to_list(Last), C >= Min,
                Mean <- [lists:sum([maps:get({S, R}, W, 0) || {_, W, _} <- Before])
                         / length(Before)],
                C >= K * Mean],
    by_desc(fun(#{evidence := #{factor := F}}) -> F end, Found);
spike(_, _, _) ->
    [].

%% One sender sending to many receivers in the last window (Outs: each
%% sender's distinct receivers and messages, of those that are no
%% replies: ends/2, or the store's, where a receiver counts when the
%% pair's first messages of the window were no reply).
fan_out([], _, _, _) ->
    [];
fan_out(Ws, Outs, #{fan_out_receivers := Min}, Label) ->
    {Dur, _, _} = lists:last(Ws),
    Found = [#{rule => fan_out, subject => S, label => Label(S),
               evidence => #{receivers => Nr, count => N, window_ms => Dur},
               explanation => fmt("~ts: ~s messages to ~s receivers in the last window",
                                  [Label(S), msgflow_fmt:int(N), msgflow_fmt:int(Nr)])}
             || {S, {Nr, N}} <- maps:to_list(Outs), Nr >= Min],
    by_desc(fun(#{evidence := #{receivers := R}}) -> R end, Found).

%% Sends to processes that no longer existed, by sender, since start.
dead_letters(#{dead := Dead}, #{dead_min := Min}, Label) ->
    BySender = lists:foldl(fun({S, R, C}, Acc) ->
                                   {Rs, N} = maps:get(S, Acc, {[], 0}),
                                   Acc#{S => {[R | Rs], N + C}}
                           end, #{}, Dead),
    Found = [#{rule => dead_letters, subject => S, label => Label(S),
               evidence => #{count => N, receivers => length(Rs)},
               explanation => fmt("~ts sent ~s messages to ~s processes that did not "
                                  "exist", [Label(S), msgflow_fmt:int(N), msgflow_fmt:int(length(Rs))])}
             || {S, {Rs, N}} <- maps:to_list(BySender), N >= Min],
    by_desc(fun(#{evidence := #{count := C}}) -> C end, Found).

%% Slow call edges in a calls view (msgflow_calls_view:build/2), slowest
%% first, for checked options (`slow_call_ms', `slow_growth'): the edges
%% whose callers share a label, and whose servers do, with one kind and
%% tag, are one group (their round trips added up: 28 callers of one
%% kind with a sampled call each are 28 samples of one edge), and a group
%% is judged by the highest quantile its samples tell (quantile/1: a p99
%% from one sample is no p99); a group of fewer than ?MIN_SLOW_SAMPLES
%% is not judged at all.  A group of one edge has that edge as its
%% subject, of several `members' and their subjects.
slow_calls(#{entries := Es}, #{slow_call_ms := Ms, slow_growth := Growth}) ->
    Groups = lists:foldl(
               fun(E = #{caller_label := CL, server_label := SL, kind := K, tag := T}, Acc) ->
                       maps:update_with({CL, SL, K, T}, fun(Xs) -> [E | Xs] end, [E], Acc)
               end, #{}, Es),
    Found = [F || {{CL, SL, Kind, Tag}, Members} <- maps:to_list(Groups),
                  F <- slow_group(CL, SL, Kind, Tag, lists:reverse(Members), Ms, Growth)],
    by_desc(fun(#{evidence := #{figure_us := P}}) -> P end, Found).

slow_group(CL, SL, Kind, Tag, Members, Ms, Growth) ->
    Hist = lists:foldl(fun(#{hist := H}, Acc) -> msgflow_call_row:add_hists(Acc, H) end, [], Members),
    Sampled = lists:sum([S || #{sampled := S} <- Members]),
    Calls = case [C || #{calls := C} <- Members, C =/= undefined] of
                [] -> undefined;
                Cs -> lists:sum(Cs)
            end,
    %% growth: the group's busiest-growing edge (each edge's windows)
    Grew = [E || E = #{p99_last := L, p99_prev := P} <- Members, growing(L, P, Growth, growth_floor_us(Ms))],
    case quantile(Sampled) of
        none -> [];
        {Name, Q} ->
            [Figure, P50] = msgflow_call_row:percentiles(Hist, [Q, 0.5]),
            case slow(Figure, Ms * 1000) orelse Grew =/= [] of
                false -> [];
                true ->
                    N = length(Members),
                    Label = iolist_to_binary([CL, " -> ", SL]),
                    Subject = case Members of
                                  [#{caller := C, server := S}] -> {C, S, Kind, Tag};
                                  _ -> [{C, S, Kind, Tag} || #{caller := C, server := S} <- Members]
                              end,
                    Last = max_num([L || #{p99_last := L} <- Members, is_number(L)]),
                    Prev = max_num([P || #{p99_prev := P} <- Members, is_number(P)]),
                    Ev = #{figure_us => Figure, quantile => Name, p50_us => P50, calls => Calls,
                           sampled => Sampled, p99_last_us => num(Last), p99_prev_us => num(Prev)},
                    [(case N of
                          1 -> #{};
                          _ -> #{members => N}
                      end)#{rule => slow_calls, subject => Subject, label => Label,
                            evidence => case N of 1 -> Ev; _ -> Ev#{members => N} end,
                            explanation => fmt("~ts~ts: ~s ~ts calls, ~s ~s~s over ~s sampled~ts",
                                               [case N of 1 -> ""; _ -> io_lib:format("~b x ", [N]) end,
                                                Label, Kind, msgflow_fmt:name(Tag), Name,
                                                msgflow_fmt:micros(Figure),
                                                case Name of
                                                    p50 -> "";
                                                    _ -> [" (p50 ", msgflow_fmt:micros(P50), ")"]
                                                end,
                                                msgflow_fmt:int(Sampled),
                                                case Grew of
                                                    [] -> "";
                                                    _ -> io_lib:format("; last window p99 ~s, the one before ~s",
                                                                       [msgflow_fmt:micros(num(Last)),
                                                                        msgflow_fmt:micros(num(Prev))])
                                                end])}]
            end
    end.

%% The highest quantile N samples tell: p99 from ?MIN_P99_SAMPLES, p90
%% from ?MIN_P90_SAMPLES, else the median from ?MIN_SLOW_SAMPLES; none
%% from fewer.
quantile(N) when N >= ?MIN_P99_SAMPLES -> {p99, 0.99};
quantile(N) when N >= ?MIN_P90_SAMPLES -> {p90, 0.9};
quantile(N) when N >= ?MIN_SLOW_SAMPLES -> {p50, 0.5};
quantile(_) -> none.

max_num([]) -> undefined;
max_num(Xs) -> lists:max(Xs).

num(undefined) -> undefined;
num(X) when is_number(X) -> X.

%% Edges whose sampled messages are large: a message of large_words heap
%% words or more (what a send copies), one larger than the size walk
%% measures (1,024 terms), or off-heap binaries of large_binary_bytes on
%% average (shared, not copied, but held while any process holds the
%% message); read from the store's sizes (msgflow_store_sizes).
large_messages(Store = #{sizes := T}, #{large_words := LW, large_binary_bytes := LB}) ->
    Label = meta_label(Store),
    Wsz = erlang:system_info(wordsize),
    Rows = ets:select(T, [{{'_', '$2', '_', '$4', '$5', '$6'},
                           [{'orelse', {'>=', '$4', LW}, {'>', '$6', 0}, {'>=', '$5', {'*', LB, '$2'}}}],
                           ['$_']}]),
    Found = [#{rule => large_messages, subject => {S, R}, label => PL,
               evidence => #{words_max => WMax, words_mean => W / N, bytes_max => WMax * Wsz,
                             binary_bytes_mean => B / N, sampled => N, large => L},
               explanation => fmt("~ts: messages of ~s ~s words (~s copied a send)~ts~ts, "
                                  "over ~s sampled: ~ts",
                                  [PL, case L of 0 -> "up to"; _ -> "at least" end,
                                   msgflow_fmt:int(WMax), msgflow_fmt:bytes(WMax * Wsz),
                                   case B of
                                       0 -> "";
                                       _ -> [", ", msgflow_fmt:bytes(round(B / N)),
                                             " of binaries on average"]
                                   end,
                                   case L of
                                       0 -> "";
                                       _ -> io_lib:format(", ~s of them larger than msgflow measures",
                                                          [msgflow_fmt:int(L)])
                                   end,
                                   msgflow_fmt:int(N), ?LARGE_ADVICE])}
             || {{S, R}, N, W, WMax, B, L} <- Rows, PL <- [pair_label(S, R, Label)]],
    by_desc(fun(#{evidence := #{words_max := M}}) -> M end, Found);
large_messages(_, _) ->
    [].

%% Receivers whose messages waited long_wait_ms or more in their mailbox
%% in the last closed window, and longer than in the window before (or
%% whose mailbox grew all window): msgflow_store_waits' figures.
long_wait(Store = #{windows := Ws}, #{long_wait_ms := Min}) when Ws =/= [] ->
    Label = meta_label(Store),
    {Last, Prev} = case lists:reverse(Ws) of
                       [L, P | _] -> {maps:get(waits, L, #{}), maps:get(waits, P, #{})};
                       [L] -> {maps:get(waits, L, #{}), #{}}
                   end,
    Found = [#{rule => long_wait, subject => R, label => Label(R),
               evidence => #{wait_ms => W, queue_len => Q, growing => G,
                             prev_wait_ms => PrevW},
               explanation => fmt("~ts: messages wait ~s ms in its mailbox (~s queued on "
                                  "average~ts): ~ts",
                                  [Label(R), msgflow_fmt:int(round(W)), msgflow_fmt:int(round(Q)),
                                   case G of
                                       true -> ", growing all window";
                                       false -> io_lib:format(", ~s ms the window before",
                                                              [msgflow_fmt:int(round(PrevW))])
                                   end, ?WAIT_ADVICE])}
             || {R, #{wait_ms := W, queue_len := Q, growing := G}} <- maps:to_list(Last),
                is_number(W), W >= Min,
                PrevW <- [case Prev of
                              #{R := #{wait_ms := PW}} when is_number(PW) -> PW;
                              _ -> 0
                          end],
                G orelse W > PrevW],
    by_desc(fun(#{evidence := #{wait_ms := W}}) -> W end, Found);
long_wait(_, _) ->
    [].

%% An endpoint's label, as the labels tables give it.
meta_label(#{labels := Tables}) ->
    fun(E) -> maps:get(label, msgflow_labels:meta(Tables, E)) end.

%% The p99 a call edge's last window needs for the growth rule, µs: a
%% tenth of slow_call_ms (the least round trip any finding of slow_calls
%% can have, so the calls view is asked for those edges only).
growth_floor_us(SlowMs) -> SlowMs * 100.

slow(undefined, _) -> false;
slow(P99, Limit) -> P99 >= Limit.

growing(Last, Prev, Growth, Min) when is_number(Last), is_number(Prev) ->
    Last >= Min andalso Last >= Growth * Prev;
growing(_, _, _, _) -> false.

%% The share of a row's messages that are no replies (1 with kinds off).
asked_share([]) ->
    1;
asked_share(Ks) ->
    Replies = lists:sum([N || {reply, _, N} <- Ks]),
    1 - Replies / lists:sum([N || {_, _, N} <- Ks]).

pair_label(S, R, Label) ->
    iolist_to_binary([Label(S), " -> ", Label(R)]).

by_desc(F, L) ->
    [X || {_, X} <- lists:reverse(lists:keysort(1, [{F(X), X} || X <- L]))].

fmt(Format, Args) ->
    unicode:characters_to_binary(io_lib:format(Format, Args)).
