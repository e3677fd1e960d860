%%% @doc The `bottlenecks' view: which process is the bottleneck, and why
%%% the others wait.  It joins, for the last closed window, the readings
%%% of the watched processes (msgflow_store_waits: each one's share of
%%% readings busy, blocked in a call and on whom, runnable; its mailbox
%%% wait and arrival rate), the node's run queues, the pairs' exact counts
%%% of calls and replies (kinds) and the sampled calls' round trips
%%% (msgflow_call_row), into root causes ranked by the time they cost
%%% others, each with the chain of who waits on it.
%%%
%%% The verdicts (thresholds in the hotspot rules' map, rules/0; the
%%% glossary and guides/bottlenecks.md explain them):
%%% <ul>
%%% <li>`saturated': busy at least `busy_min' (0.9), read `min_readings'
%%%     (20) times or more in the window (a window has 41 readings), or a
%%%     mailbox that grew all window, and blocked less than `blocked_min',
%%%     with waiters or messages waiting for it: a root;</li>
%%% <li>`head_of_line': a saturated one whose messages carry
%%%     `head_of_line_bytes' (64 KiB) or more on average (sampled sizes);</li>
%%% <li>`accumulating': took in `accumulate_ratio' (2) times what it sent,
%%%     this window and the one before, while its live data grew by 8 KB or
%%%     more in each and its mailbox did not grow: a buffer filling in its
%%%     own state, the process it sends to most named as the slow side;</li>
%%% <li>`node_saturated': the node's run queues held `run_queue_min' (1.0)
%%%     processes per scheduler online or more on average over the window:
%%%     a process then waits for a CPU, and the root is the node (a
%%%     saturated process that was runnable half its busy readings or more
%%%     is not named apart);</li>
%%% <li>blocked on X: blocked at least `blocked_min' (0.5), X the process
%%%     its calls wait on; never a root: the chain goes through it to X;</li>
%%% <li>`call_cycle': processes that call each other in a cycle (A calls
%%%     B while B calls A, directly or longer) in the windows looked at:
%%%     a deadlock hazard; `deadlock' when each call of the cycle has
%%%     calls unanswered, from the exact counts of calls and replies (a
%%%     one-shot deadlock is missed 63 times in 64 by sampled round
%%%     trips); a `call_cycle' `by => name' when the cycle is between
%%%     labels only (processes of one label call those of another, which
%%%     call back others of the first): a hazard once each is in such a
%%%     call at once.</li>
%%% </ul>
%%% A process that is idle is never named.  The time a process's waiters
%%% lose on it, in caller-seconds per second: for a waiter read, its share
%%% of readings blocked on it; else its calls per second times the mean of
%%% its sampled round trips (of every caller's to that server when it has
%%% few, msgflow_wait_graph); a caller on another node, its calls per
%%% second times the root's mailbox wait and service time; a root's cost is
%%% what its chain's waiters lose (those waited on themselves are part of
%%% the chain, not counted twice).
%%%
%%% Options (msgflow_query adds `node' and `timeout'): `rules' (the
%%% thresholds above), `windows' (5: the closed windows whose calls are
%%% looked at for cycles), `process' (none; a pid, a pid's text or a
%%% registered name: the chain through that process, msgflow:why/1),
%%% `after_window' (0; N: nothing is looked for unless the last closed
%%% window is numbered past N, so that the bottleneck detector,
%%% msgflow_alerts, asks each second at the cost of a glance).
%%% Each node finds its own; the parts are put together ranked by cost.
%%% Who waits on whom, and the cycles of calls, come from the wait-for
%%% graph (msgflow_wait_graph), which reads every pair's calls on a node
%%% of up to 100,000 pairs and the 20,000 busiest of the last window's
%%% past that.
-module(msgflow_bottlenecks_view).
-behaviour(msgflow_view).

-export([options/0, rules/0, check/1, build/2, merge/3, text/3, json/2, fresh/0, heap/1, summary/1, cause_json/1]).
-export_type([bottlenecks/0, cause/0, load/0, waiter/0]).

-define(WINDOWS, 5).
%% messages/s in, at least, for a process to be called accumulating
-define(MIN_ACCUMULATING, 10).
%% live data a window grows by, at least, for it to be growing: 8 KB
-define(MIN_GROWTH_WORDS, 1024).

%% A watched process's figures in the last window: arrivals and
%% messages served (msg/s: arrivals less the mailbox's growth), mailbox
%% wait (ms) and mean queue (messages), service time per message (ms:
%% busy / served), shares of readings busy, blocked, runnable.
-type load() :: #{process := pid(), label := binary(), in_per_s := float(), out_per_s := float(),
                  wait_ms := float() | undefined, queue_len := float(), growing := boolean(),
                  busy := float(), blocked := float(), runnable := float(), readings := pos_integer(),
                  service_ms := float() | undefined, blocked_on := [{pid(), float()}]}.
%% Who waits on a process: one waiter, or the waiters of one label
%% (`members'), the seconds per second they lose on it, their calls to it
%% (per second, and the p50 of their sampled round trips, ms) where
%% counted, their share of readings blocked on it where read, and who
%% waits on them in turn.
-type waiter() :: msgflow_wait_graph:waiter().
-type cause() :: #{verdict := saturated | head_of_line | accumulating | node_saturated | call_cycle | deadlock,
                   subject := pid() | node() | [pid()] | [binary()], label := binary(),
                   evidence := map(), cost := float(), waiters := [waiter()], node := node()}.
-type bottlenecks() :: #{causes := [cause()], loads := [load()],
                         blocked := [#{process := pid(), label := binary(), on := pid(),
                                       on_label := binary(), share := float()}],
                         node_load := msgflow_store_waits:node_load() | undefined,
                         window_ms := non_neg_integer(), running := boolean(), node := node(),
                         window := non_neg_integer(), started_at := integer() | undefined,
                         remote_waits => [{pid(), pid(), map()}],
                         process => pid(), process_label => binary(), process_waits => [{pid(), map()}], process_now => map() | undefined,
                         nodes => [node()], missing => [{node(), term()}]}.

%% @doc The options, their defaults and rules.
-spec options() -> msgflow_opts:schema().
options() ->
    #{rules => {#{}, {group, rules()}},
      windows => {?WINDOWS, {int, 1, 10000, "windows"}},
      process => {none, {either, [pid, pid_text, atom]}},
      after_window => {0, {int, 0, 1 bsl 40, "window"}}}.

%% @doc The verdicts' thresholds with their defaults (msgflow_hotspots
%% takes them into its `rules' too).
-spec rules() -> msgflow_opts:schema().
rules() ->
    #{busy_min => {0.9, pos_number},      %% share of readings busy: saturated
      blocked_min => {0.5, pos_number},   %% share of readings blocked in a call: blocked on
      min_readings => {20, pos_number},   %% readings of it (41 a window) before a verdict on it
      run_queue_min => {1.0, pos_number}, %% run queue per scheduler, mean: node saturated
      head_of_line_bytes => {65536, pos_number}, %% mean bytes a message into a saturated one carries
      accumulate_ratio => {2, pos_number}}. %% messages in >= ratio x messages out, two windows

%% @doc The thresholds over their defaults; `process' made a pid (a
%% registered name this node knows, or a pid's text), else an error
%% naming it.
-spec check(map()) -> {ok, map()} | msgflow_opts:error().
check(O) ->
    {ok, Given} = msgflow_opts:to_map(maps:get(rules, O, #{})),
    Opts = maps:merge(maps:remove(rules, O), maps:merge(msgflow_opts:defaults(rules()),
                                                        maps:with(maps:keys(rules()), Given))),
    case maps:get(process, Opts, none) of
        none -> {ok, Opts};
        P when is_pid(P) -> {ok, Opts};
        Name when is_atom(Name) ->
            case whereis(Name) of
                P when is_pid(P) -> {ok, Opts#{process := P}};
                undefined -> {error, {badopt, {process, Name}, ["a live pid or registered name"]}}
            end;
        Text ->
            try list_to_pid(unicode:characters_to_list(Text)) of
                P -> {ok, Opts#{process := P}}
            catch error:badarg -> {error, {badopt, {process, Text}, ["a live pid or registered name"]}}
            end
    end.

%% @doc false: built from closed windows only (no snapshot first).
-spec fresh() -> false.
fresh() -> false.

%% @doc It reads rows in chunks and keeps only the pairs with calls: the
%% default heap (the alerts build it every window; a heap sized for the
%% store would be 40 words a pair of it each time).
-spec heap(map()) -> small.
heap(_) -> small.

%% @doc This node's bottlenecks from its last closed window.
-spec build(msgflow_store:store(), map()) -> bottlenecks().
build(Store = #{windows := Ws}, Opts) ->
    O = maps:merge(msgflow_opts:defaults(rules()), Opts),
    {Waits, NodeLoad, WinMs, WinN} = case last_full(Ws, maps:get(interval, Store, 1000)) of
                                         none -> {#{}, undefined, 0, 0};
                                         Last -> {maps:get(waits, Last, #{}), maps:get(node_load, Last, undefined),
                                                  maps:get(window_ms, Last), maps:get(n, Last)}
                                     end,
    case maps:get(after_window, O, 0) of
        After when After > 0, WinN =< After -> (empty(Store, WinN))#{node_load => NodeLoad, window_ms => WinMs};
        _ -> build(Store, O, {Waits, NodeLoad, WinMs, WinN})
    end.

%% A value with nothing found (no window closed after `after_window').
empty(Store, WinN) ->
    #{causes => [], remote_waits => [], loads => [], blocked => [], node_load => undefined, window_ms => 0,
      window => WinN, started_at => maps:get(started_at, Store, undefined),
      running => maps:get(running, Store), node => node()}.

build(Store = #{labels := Tables, windows := Ws}, O, {Waits, NodeLoad, WinMs, WinN}) ->
    K = maps:get(windows, O, ?WINDOWS),
    Calls = msgflow_wait_graph:calls(Store, K),
    SpanMs = lists:sum([maps:get(window_ms, W) || W <- lists:nthtail(max(0, length(Ws) - K), Ws)]),
    Label = fun(P) -> maps:get(label, msgflow_labels:meta(Tables, P)) end,
    Loads = [load(P, W, Label) || {P, W} <- maps:to_list(Waits), is_map_key(busy, W), is_map_key(memory, W)],
    Graph = msgflow_wait_graph:graph(Loads, Calls, maps:get(calls, Store), SpanMs),
    NodeBusy = node_saturated(NodeLoad, O),
    Saturated = [L || L <- Loads, saturated(L, O, NodeBusy)],
    Sizes = sizes_into([P || #{process := P} <- Saturated], Store),
    Prev = case [PW || #{n := PN, waits := PW} <- Ws, PN =:= WinN - 1] of
               [PW | _] -> PW;
               [] -> #{}
           end,
    %% a process busy on its own (a sender as fast as it can, a shell
    %% running a long job) makes no one wait: a root has waiters, or
    %% messages waiting for it while it serves counted traffic (a server
    %% called from other nodes: its replies; their callers are joined
    %% where they run, merge/3)
    Roots = [R || L = #{process := P} <- Saturated,
                  R = #{waiters := RWs} <- [root(L, Graph, Label, maps:get(P, Sizes, none), O)],
                  RWs =/= [] orelse maps:get(growing, L)
                      orelse (maps:get(queue_len, L) >= 1 andalso maps:get(out_per_s, L) > 0)]
        ++ [accumulating(L, Label) || L <- Loads, not lists:member(L, Saturated),
                                      accumulating(L, maps:get(maps:get(process, L), Prev, none), O)]
        ++ node_root(NodeBusy, NodeLoad, Loads)
        ++ msgflow_wait_graph:cycles(Calls, Label),
    Blocked = [#{process => P, label => Lb, on => Q, on_label => Label(Q), share => Sh}
               || #{process := P, label := Lb, blocked := B, blocked_on := [{Q, Sh} | _],
                    readings := R} <- Loads, B >= maps:get(blocked_min, O),
                  R >= maps:get(min_readings, O)],
    %% calls from here to processes of other nodes: their servers' nodes
    %% know whether they are roots (merge/3 joins them)
    Remote = msgflow_wait_graph:remote_edges(Calls, Loads, SpanMs, Label),
    V = (empty(Store, WinN))#{causes => ranked([C#{node => node()} || C <- Roots]), remote_waits => Remote,
                              loads => lists:sort(fun(#{busy := A}, #{busy := B}) -> A >= B end, Loads),
                              blocked => Blocked, node_load => NodeLoad, window_ms => WinMs},
    case maps:get(process, O, none) of
        none -> V;
        P -> V#{process => P, process_label => Label(P), process_waits => [{S, F} || {S, SWs} <- maps:to_list(Graph), {W, F} <- SWs, W =:= P],
                process_now => now_reading(P)}
    end.

%% What a process of this node is doing now (a reading as the watched
%% get, msgflow_store_waits:classify/4), or `undefined' (gone, remote).
now_reading(P) when node(P) =:= node() ->
    case process_info(P, [message_queue_len, status, current_function]) of
        [{message_queue_len, N}, {status, St}, {current_function, F}] ->
            #{status => St, current_function => F, queue => N,
              class => msgflow_store_waits:classify(St, F, N, P)};
        undefined -> undefined
    end;
now_reading(_) ->
    undefined.

%% The last closed window, or the one before when the last is less than
%% half an interval long (the stub a stop closes): its readings are too
%% few to say anything.
last_full([], _) -> none;
last_full(Ws, Interval) ->
    case lists:reverse(Ws) of
        [#{window_ms := Ms}, Before | _] when Ms * 2 < Interval -> Before;
        [Last | _] -> Last
    end.

%% A watched process's figures, its blocked_on most first.
load(P, W = #{busy := Busy, in_per_s := In}, Label) ->
    %% served per second: what came in, less what the mailbox grew by
    %% (a server called from other nodes: its calls are counted where
    %% they were sent, its replies here: those it served)
    Out = case In > 0 of
              true -> In - max(0.0, maps:get(growth_per_s, W, 0.0));
              false -> maps:get(sent_per_s, W, 0.0)
          end,
    (maps:with([in_per_s, wait_ms, queue_len, growing, busy, blocked, runnable, readings, memory,
                sent_per_s, sent_to, live_words, live_growth], W))#{
      process => P, label => Label(P), out_per_s => Out,
      %% Little's law on what it served when what came in was not
      %% counted here
      wait_ms => case {maps:get(wait_ms, W), Out > 0} of
                     {undefined, true} -> maps:get(queue_len, W) * 1000 / Out;
                     {Wt, _} -> Wt
                 end,
      service_ms => case Out > 0 of
                        true -> Busy * 1000 / Out;
                        false -> undefined
                    end,
      blocked_on => lists:reverse(lists:keysort(2, maps:to_list(maps:get(blocked_on, W, #{}))))}.

saturated(#{busy := B, blocked := Bl, readings := R, growing := Gr, runnable := Rn}, O, NodeBusy) ->
    R >= maps:get(min_readings, O)
        andalso (B >= maps:get(busy_min, O) orelse Gr)
        andalso Bl < maps:get(blocked_min, O)
        %% starved of CPU on a saturated node: the node is the root,
        %% unless its mailbox grew all window (its backlog is its own)
        andalso not (NodeBusy andalso Rn * 2 >= B andalso not Gr).

node_saturated(#{run_queue := Q, schedulers := S, readings := R}, O) ->
    R >= maps:get(min_readings, O) andalso Q >= maps:get(run_queue_min, O) * S;
node_saturated(_, _) ->
    false.

root(L = #{process := P, label := Lb}, Graph, Label, Size, O) ->
    Waiters = msgflow_wait_graph:waiters(P, Graph, Label),
    E = maps:with([busy, wait_ms, growing, in_per_s, out_per_s, service_ms, queue_len, readings, runnable], L),
    {Verdict, Ev} = case Size of
                        #{bytes_mean := B} when B >= map_get(head_of_line_bytes, O) -> {head_of_line, E#{size => Size}};
                        _ -> {saturated, E}
                    end,
    #{verdict => Verdict, subject => P, label => Lb, evidence => Ev,
      cost => msgflow_wait_graph:cost(Waiters), waiters => Waiters}.

%% The sampled sizes of the messages into each of Ps (msgflow_store_sizes):
%% `#{bytes_mean, sampled}', the bytes a message carried on average (its
%% heap words and the off-heap binaries it referenced), one pass over the
%% sizes table.
sizes_into([], _) ->
    #{};
sizes_into(Ps, #{sizes := T, labels := Tables}) ->
    Canon = msgflow_rows_groups:key_fun(process, Tables),
    Wsz = erlang:system_info(wordsize),
    %% the edges into them, by pid or by a name they hold, selected in
    %% the table (not every edge copied out)
    Names = [N || P <- Ps, {registered_name, N} <- [process_info(P, registered_name)]],
    Rows = ets:select(T, [{{{'_', '$1'}, '_', '_', '_', '_', '_'},
                           [msgflow_row_table:any_of('$1', Ps ++ Names ++ [{N, node()} || N <- Names])], ['$_']}]),
    Sums = lists:foldl(fun({{_, R0}, N, Words, _, Bin, _}, Acc) ->
                               R = Canon(R0),
                               {N0, B0} = maps:get(R, Acc, {0, 0}),
                               Acc#{R => {N0 + N, B0 + Words * Wsz + Bin}}
                       end, #{}, Rows),
    maps:map(fun(_, {N, B}) -> #{sampled => N, bytes_mean => B / max(1, N)} end, Sums).

%% A match spec guard: Var is one of Terms (false for none).


%% Takes in messages faster than it passes them on, this window and the
%% one before, while its memory grows: a buffer filling in its own state.
accumulating(#{growing := true}, _, _) ->
    %% a backlog in its mailbox, not in its state
    false;
accumulating(#{readings := R, in_per_s := In, sent_per_s := Out, live_growth := G}, Prev, O)
  when is_map(Prev), is_integer(G) ->
    Ratio = map_get(accumulate_ratio, O),
    R >= map_get(min_readings, O) andalso In >= ?MIN_ACCUMULATING andalso In >= Ratio * Out andalso live_grew(G)
        andalso case Prev of
                    #{in_per_s := PIn, sent_per_s := POut, live_growth := PG} when is_integer(PG) ->
                        PIn >= ?MIN_ACCUMULATING andalso PIn >= Ratio * POut andalso live_grew(PG);
                    _ -> false
                end;
accumulating(_, _, _) ->
    false.

%% Live data grew by more than a process's noise (a few words of a
%% collection's timing).
live_grew(Words) -> Words >= ?MIN_GROWTH_WORDS.

accumulating(L = #{process := P, label := Lb, sent_to := To}, Label) ->
    #{verdict => accumulating, subject => P, label => Lb,
      evidence => (maps:with([in_per_s, sent_per_s, memory, live_words, live_growth, busy,
                              readings], L))#{
                    downstream => To,
                    downstream_label => case To of
                                            Q when is_pid(Q) -> Label(Q);
                                            undefined -> <<>>;
                                            Q -> msgflow_fmt:endpoint(Q)
                                        end},
      cost => 0.0, waiters => []}.

node_root(false, _, _) -> [];
node_root(true, NodeLoad, Loads) ->
    Starved = [#{process => P, label => Lb, runnable => Rn} || #{process := P, label := Lb, runnable := Rn} <- Loads,
                                                             Rn >= 0.25],
    [#{verdict => node_saturated, subject => node(), label => atom_to_binary(node()),
       evidence => NodeLoad#{starved => lists:sublist(lists:reverse(lists:sort(
                                                                      fun(#{runnable := A}, #{runnable := B}) -> A =< B end,
                                                                      Starved)), 5)},
       cost => lists:sum([Rn || #{runnable := Rn} <- Loads]), waiters => []}].

ranked(Causes) ->
    %% a deadlock first, then the processes saturated, the node, cycles
    %% that still answer
    Order = fun(#{verdict := V}) ->
                    case V of
                        deadlock -> 0;
                        saturated -> 1;
                        head_of_line -> 1;
                        accumulating -> 2;
                        node_saturated -> 3;
                        call_cycle -> 4
                    end
            end,
    lists:sort(fun(A, B) -> {Order(A), -maps:get(cost, A)} =< {Order(B), -maps:get(cost, B)} end, Causes).

%% @doc The nodes' parts as one: causes ranked by cost over every node.
-spec merge([bottlenecks()], map(), msgflow_view:context()) -> bottlenecks().
merge([One], _Opts, _Ctx) ->
    One#{nodes => [maps:get(node, One)]};
merge(Parts = [First | _], _Opts, _Ctx) ->
    Remote = lists:append([maps:get(remote_waits, P, []) || P <- Parts]),
    Causes = [join_remote(C, Remote) || C <- lists:append([Cs || #{causes := Cs} <- Parts])],
    First#{causes => ranked(Causes),
           loads => lists:append([Ls || #{loads := Ls} <- Parts]),
           blocked => lists:append([Bs || #{blocked := Bs} <- Parts]),
           running => lists:any(fun(#{running := R}) -> R end, Parts),
           nodes => [N || #{node := N} <- Parts]}.

%% A root on one node with the callers other nodes counted: each waits
%% its calls per second times the time a call spends there (the root's
%% mailbox wait and its service time, its node measured: the network's
%% not in it), or its share of readings blocked on it where it was read;
%% grouped by label.
join_remote(C = #{verdict := V, subject := S, evidence := E, waiters := Ws}, Remote)
  when V =:= saturated; V =:= head_of_line ->
    Sojourn = (num(maps:get(wait_ms, E, undefined)) + num(maps:get(service_ms, E, undefined))) / 1000,
    Mine = [{W, F#{seconds_per_s => case F of
                                       #{blocked := B} when is_number(B), B > 0 -> B;
                                       #{calls_per_s := N} -> min(1.0, N * Sojourn)
                                   end,
                   rtt_ms => case Sojourn > 0 of true -> Sojourn * 1000; false -> undefined end}}
            || {Srv, W, F} <- Remote, Srv =:= S],
    case Mine of
        [] -> C;
        _ ->
            All = msgflow_wait_graph:sorted(Ws ++ msgflow_wait_graph:by_label(Mine)),
            C#{waiters => All, cost => msgflow_wait_graph:cost(All)}
    end;
join_remote(C, _) ->
    C.

num(undefined) -> 0.0;
num(X) -> X.

%%% Text

%% @doc The root causes, a paragraph each with its chain; with `process',
%% the chain through that process (msgflow:why/1).
-spec text(bottlenecks(), map(), msgflow_view:area()) -> unicode:chardata().
text(V = #{process := P}, _Opts, _Area) ->
    why_text(P, V);
text(V = #{causes := Cs, running := Run}, _Opts, _Area) ->
    [io_lib:format("msgflow ~s~s: bottlenecks of the last window (~s ms)~n",
                   [msgflow_fmt:run_state(Run, V), msgflow_fmt:on_nodes(maps:get(nodes, V, [])),
                    msgflow_fmt:int(maps:get(window_ms, V))]),
     msgflow_fmt:missing(maps:get(missing, V, [])),
     case Cs of
         [] -> ["  none: no process saturated, blocked in a cycle, or starved of CPU",
                case {maps:get(loads, V), maps:get(window, V, 0)} of
                    {[], 0} -> " (no window closed yet)\n";
                    {[], _} -> " (no process took enough messages in the last window to be watched)\n";
                    _ -> "\n"
                end];
         _ -> [cause_text(I, C) || {I, C} <- lists:enumerate(Cs)]
     end].

cause_text(I, #{verdict := V, label := Lb, subject := P, evidence := E, cost := Cost, waiters := Ws})
  when V =:= saturated; V =:= head_of_line ->
    [io_lib:format("~b ~ts ~s  ~s: busy ~s, mailbox wait ~s~s, ~s, service ~s~n",
                   [I, msgflow_fmt:visible(Lb), msgflow_fmt:endpoint(P), verdict_text(V), pct(maps:get(busy, E)),
                    ms(maps:get(wait_ms, E)), grew(E), rate_in(E), ms(maps:get(service_ms, E))]),
     size_text(E),
     case Ws of
         [] -> "    no caller waits on it\n";
         _ -> [io_lib:format("    costs ~.1f caller-s/s:~n", [Cost]), chain(Ws, "    ")]
     end];
cause_text(I, #{verdict := accumulating, label := Lb, subject := P, evidence := E}) ->
    [io_lib:format("~b ~ts ~s  accumulating: ~s msg/s in, ~s msg/s out, its data ~s and growing (~s in the window)~n",
                   [I, msgflow_fmt:visible(Lb), msgflow_fmt:endpoint(P), msgflow_fmt:rate(maps:get(in_per_s, E)),
                    msgflow_fmt:rate(maps:get(sent_per_s, E)), live_bytes(maps:get(live_words, E)),
                    live_bytes(maps:get(live_growth, E))]),
     "    ", downstream_text(E), "\n"];
cause_text(I, #{verdict := node_saturated, label := Lb, evidence := E}) ->
    [io_lib:format("~b node ~ts  saturated: run queues ~.1f on ~b schedulers (mean of ~b readings)~n",
                   [I, msgflow_fmt:visible(Lb), maps:get(run_queue, E), maps:get(schedulers, E),
                    maps:get(readings, E)]),
     [io_lib:format("    ~ts ~s runnable ~s~n", [msgflow_fmt:visible(L), msgflow_fmt:endpoint(P), pct(R)])
      || #{process := P, label := L, runnable := R} <- maps:get(starved, E)]];
cause_text(I, #{verdict := call_cycle, label := Lb, evidence := #{by := name, calls := Es}}) ->
    [io_lib:format("~b call cycle by name: ~ts~n", [I, msgflow_fmt:visible(Lb)]),
     [io_lib:format("    ~ts -> ~ts: ~ts calls, from ~b to ~b processes~n",
                    [msgflow_fmt:visible(A), msgflow_fmt:visible(B), msgflow_fmt:int(N), Ss, Rs])
      || {A, B, N, Ss, Rs} <- Es]];
cause_text(I, #{verdict := V, label := Lb, evidence := #{unanswered := Un}}) ->
    [io_lib:format("~b ~s: ~ts~n", [I, case V of deadlock -> "deadlock"; call_cycle -> "call cycle" end,
                                    msgflow_fmt:visible(Lb)]),
     [io_lib:format("    ~s -> ~s: ~b calls unanswered~n", [msgflow_fmt:endpoint(A), msgflow_fmt:endpoint(B), max(0, U)])
      || {A, B, U} <- Un]].

chain(Ws, Indent) ->
    [[Indent, "<- ", waiter_text(W), "\n", chain(Inner, [Indent, "   "])]
     || W = #{waiters := Inner} <- Ws].

waiter_text(W = #{label := Lb, members := N, seconds_per_s := S}) ->
    Who = case N of
              1 -> [msgflow_fmt:visible(Lb), " ", msgflow_fmt:endpoint(maps:get(waiter, W))];
              _ -> io_lib:format("~ts (x~b)", [msgflow_fmt:visible(Lb), N])
          end,
    Call = case W of
               #{calls_per_s := C, rtt_ms := R} when is_number(C), C > 0 ->
                   io_lib:format(" (call~s ~s/s x ~s)", [tag(maps:get(tag, W, undefined)),
                                                       msgflow_fmt:rate(C), ms(R)]);
               _ -> ""
           end,
    Blocked = case W of
                  #{blocked := B} when is_number(B), N =:= 1 -> [" blocked ", pct(B), " on it"];
                  _ -> ""
              end,
    [Who, io_lib:format(" wait ~.2f s/s", [S]), Blocked, Call].

tag(undefined) -> "";
tag(T) -> [" ", msgflow_fmt:visible(atom_to_binary(T))].

%% The chain through one process: its figures, what it waits on (to the
%% root), who waits on it.
why_text(P, V = #{loads := Loads, causes := Cs}) ->
    Load = [L || L = #{process := Q} <- Loads, Q =:= P],
    Head = case Load of
               [L] -> io_lib:format("~ts ~s: ~s msg/s in, mailbox wait ~s~s, busy ~s, blocked ~s, service ~s~n",
                                    [msgflow_fmt:visible(maps:get(label, L)), msgflow_fmt:endpoint(P),
                                     msgflow_fmt:rate(maps:get(in_per_s, L)), ms(maps:get(wait_ms, L)), grew(L),
                                     pct(maps:get(busy, L)), pct(maps:get(blocked, L)),
                                     ms(maps:get(service_ms, L))]);
               [] -> io_lib:format("~ts ~s: not watched in the last window (neither among the busiest receivers "
                                   "nor their callers)~n",
                                   [msgflow_fmt:visible(maps:get(process_label, V, <<>>)), msgflow_fmt:endpoint(P)])
           end,
    Up = case [L || L = #{process := Q} <- Loads, Q =:= P] of
             [_] -> waits_on(P, Loads, Cs, #{P => true});
             [] ->
                 Most = lists:sort(fun({_, A}, {_, B}) -> maps:get(seconds_per_s, A) >= maps:get(seconds_per_s, B) end,
                                   maps:get(process_waits, V, [])),
                 case Most of
                     [{S, Fig} | _] ->
                         [io_lib:format("~ts ~s (~s)~s", [msgflow_fmt:visible(label_of(S, Loads, V)),
                                                          msgflow_fmt:endpoint(S), edge_text(Fig), root_mark(S, Cs)])
                          | waits_on(S, Loads, Cs, #{P => true, S => true})];
                     [] -> []
                 end
         end,
    Now = case maps:get(process_now, V, undefined) of
              undefined -> "";
              #{status := St, current_function := {Mod, Fun, Ar}, queue := Q, class := C} ->
                  io_lib:format("  now: ~s in ~ts, ~b queued~s~n",
                                [St, msgflow_fmt:visible(iolist_to_binary(io_lib:format("~tp:~tp/~b", [Mod, Fun, Ar]))), Q,
                                 case C of
                                     {blocked, [On | _]} -> [" (in a call to ", msgflow_fmt:endpoint(On), ")"];
                                     idle -> " (idle)";
                                     _ -> ""
                                 end]);
              _ -> ""
          end,
    Own = [C || C = #{subject := S} <- Cs, S =:= P orelse (is_list(S) andalso lists:member(P, S))],
    Down = [W || #{waiters := Ws} <- Cs, W <- find_waiters(P, Ws)],
    [Head, Now,
     case Up of
         [] -> "";
         _ -> ["  waits on: ", lists:join(" -> ", Up), "\n"]
     end,
     case Own of
         [] -> case Up of
                   [] -> "  root: none here (not saturated, not blocked)\n";
                   _ -> ""
               end;
         _ -> [cause_text(I, C) || {I, C} <- lists:enumerate(Own)]
     end,
     case Down of
         [] -> "";
         _ -> ["  waited on by:\n", chain(lists:append(Down), "    ")]
     end, "" | [io_lib:format("  (window ~s ms)~n", [msgflow_fmt:int(maps:get(window_ms, V))])]].

label_of(S, Loads, _V) ->
    case [L || #{process := X, label := L} <- Loads, X =:= S] of
        [L | _] -> L;
        [] -> <<>>
    end.

edge_text(#{calls_per_s := C, rtt_ms := R} = F) when is_number(C) ->
    io_lib:format("waits ~.2f s/s: call~s ~s/s x ~s", [maps:get(seconds_per_s, F), tag(maps:get(tag, F, undefined)),
                                                      msgflow_fmt:rate(C), ms(R)]);
edge_text(#{seconds_per_s := S}) ->
    io_lib:format("blocked ~s", [pct(S)]).

%% What P waits on, to the root: each hop's label and share blocked.
waits_on(P, Loads, Cs, Seen) ->
    case [L || L = #{process := Q} <- Loads, Q =:= P] of
        [#{blocked_on := [{Q, Sh} | _], blocked := B}] when B > 0 ->
            Hop = io_lib:format("~ts ~s (blocked ~s)~s", [msgflow_fmt:visible(label_of(Q, Loads, none)),
                                                          msgflow_fmt:endpoint(Q), pct(Sh), root_mark(Q, Cs)]),
            case is_map_key(Q, Seen) of
                true -> [[Hop, " (cycle)"]];
                false -> [Hop | waits_on(Q, Loads, Cs, Seen#{Q => true})]
            end;
        _ -> []
    end.

%% ` root: saturated' after a hop that is a cause.
root_mark(Q, Cs) ->
    case [V || #{subject := S, verdict := V} <- Cs, S =:= Q] of
        [V | _] -> [" root: ", atom_to_list(V)];
        [] -> ""
    end.

%% The waiters of P in a chain, wherever it is in it.
find_waiters(_, []) -> [];
find_waiters(P, [#{waiter := P, waiters := Ws} | _]) -> [Ws];
find_waiters(P, [#{waiters := Ws} | Rest]) -> find_waiters(P, Ws) ++ find_waiters(P, Rest).

pct(X) -> io_lib:format("~b%", [round(X * 100)]).

%% Its arrivals, or what it served when they were counted on the
%% senders' nodes.
rate_in(#{in_per_s := In, out_per_s := Out}) when In == 0, Out > 0 ->
    [msgflow_fmt:rate(Out), " msg/s served (its senders' nodes count what came in)"];
rate_in(#{in_per_s := In}) ->
    [msgflow_fmt:rate(In), " msg/s in"].

verdict_text(head_of_line) -> "head-of-line";
verdict_text(V) -> atom_to_list(V).

%% Words of data as bytes (a growth may be negative).
live_bytes(Words) when Words < 0 -> ["-", live_bytes(-Words)];
live_bytes(Words) -> msgflow_fmt:bytes(Words * erlang:system_info(wordsize)).

%% What a head-of-line root's messages carry.
size_text(#{size := #{bytes_mean := B, sampled := N}}) ->
    io_lib:format("    its messages carry ~s each on average (~b sampled): their size is its work: send less, or a key to the data~n",
                  [msgflow_fmt:bytes(round(B)), N]);
size_text(_) ->
    "".

%% Where an accumulating process's messages go, too slowly.
downstream_text(#{downstream := undefined}) ->
    "it passes nothing on: it keeps what it takes in";
downstream_text(#{downstream := To, downstream_label := L}) ->
    io_lib:format("the slow side: ~ts ~s, which it sends to most", [msgflow_fmt:visible(L), msgflow_fmt:endpoint(To)]).
ms(undefined) -> "-";
ms(X) -> msgflow_fmt:micros(X * 1000).
grew(#{growing := true}) -> " growing";
grew(_) -> "".

%% @doc A cause in one line (a hotspot finding's explanation): the
%% verdict with its figures, what it costs, and its first waiters.
-spec summary(cause()) -> binary().
summary(#{verdict := accumulating, label := Lb, subject := P, evidence := E}) ->
    unicode:characters_to_binary(
      [io_lib:format("~ts ~s accumulating: ~s msg/s in, ~s msg/s out, its data ~s and growing (~s in the window)",
                     [msgflow_fmt:visible(Lb), msgflow_fmt:endpoint(P), msgflow_fmt:rate(maps:get(in_per_s, E)),
                      msgflow_fmt:rate(maps:get(sent_per_s, E)), live_bytes(maps:get(live_words, E)),
                      live_bytes(maps:get(live_growth, E))]),
       "; ", downstream_text(E)]);
summary(#{verdict := V, label := Lb, subject := P, evidence := E, cost := Cost, waiters := Ws})
  when V =:= saturated; V =:= head_of_line ->
    unicode:characters_to_binary(
      [io_lib:format("~ts ~s ~s: busy ~s, mailbox wait ~s~s, ~s, service ~s; ",
                     [msgflow_fmt:visible(Lb), msgflow_fmt:endpoint(P), verdict_text(V), pct(maps:get(busy, E)),
                      ms(maps:get(wait_ms, E)), grew(E), rate_in(E), ms(maps:get(service_ms, E))]),
       case Ws of
           [] -> "no caller waits on it";
           _ -> [io_lib:format("costs ~.1f caller-s/s (", [Cost]), lists:join(" <- ", first_chain(Ws)), ")"]
       end]);
summary(#{verdict := node_saturated, label := Lb, evidence := E}) ->
    unicode:characters_to_binary(
      io_lib:format("node ~ts saturated: run queues ~.1f on ~b schedulers: its processes wait for a CPU",
                    [msgflow_fmt:visible(Lb), maps:get(run_queue, E), maps:get(schedulers, E)]));
summary(#{verdict := call_cycle, label := Lb, evidence := #{by := name, calls := Es}}) ->
    unicode:characters_to_binary(
      io_lib:format("call cycle by name: ~ts, ~ts calls (no process in a cycle: a deadlock once each is "
                    "in such a call at once)",
                    [msgflow_fmt:visible(Lb), msgflow_fmt:int(lists:sum([N || {_, _, N, _, _} <- Es]))]));
summary(#{verdict := V, label := Lb, evidence := #{unanswered := Un}}) ->
    unicode:characters_to_binary(
      io_lib:format("~s: ~ts, ~b calls unanswered", [case V of deadlock -> "deadlock"; call_cycle -> "call cycle" end,
                                                     msgflow_fmt:visible(Lb),
                                                     lists:sum([max(0, U) || {_, _, U} <- Un])])).

%% The busiest waiter at each step of a chain, as text.
first_chain([W = #{waiters := Inner} | _]) ->
    [waiter_text(W) | first_chain(Inner)];
first_chain([]) ->
    [].

%%% JSON

%% @doc The causes and the watched processes' figures as JSON.
-spec json(bottlenecks(), map()) -> msgflow_view:json().
json(#{causes := Cs, loads := Ls, running := Run, window_ms := WinMs}, _Opts) ->
    #{<<"running">> => Run, <<"window_ms">> => WinMs,
      <<"causes">> => [cause_json(C) || C <- Cs],
      <<"loads">> => [#{<<"process">> => msgflow_fmt:endpoint(P), <<"label">> => msgflow_fmt:visible(Lb),
                        <<"in_per_s">> => In, <<"wait_ms">> => null_or(maps:get(wait_ms, L)),
                        <<"busy">> => B, <<"blocked">> => Bl, <<"runnable">> => maps:get(runnable, L),
                        <<"service_ms">> => null_or(maps:get(service_ms, L)),
                        <<"growing">> => maps:get(growing, L),
                        <<"blocked_on">> => [#{<<"process">> => msgflow_fmt:endpoint(Q), <<"share">> => S}
                                             || {Q, S} <- maps:get(blocked_on, L)]}
                      || L = #{process := P, label := Lb, in_per_s := In, busy := B, blocked := Bl} <- Ls]}.

%% @doc A cause as JSON terms (json/2's, and a bottleneck finding's).
-spec cause_json(cause()) -> msgflow_view:json().
cause_json(#{verdict := V, subject := S, label := Lb, cost := Cost, waiters := Ws, evidence := E}) ->
    #{<<"verdict">> => atom_to_binary(V), <<"label">> => msgflow_fmt:visible(Lb),
      <<"subject">> => case S of
                           L when is_list(L) -> [msgflow_fmt:endpoint(P) || P <- L];
                           _ -> msgflow_fmt:endpoint(S)
                       end,
      <<"cost">> => Cost, <<"waiters">> => [waiter_json(W) || W <- Ws],
      <<"evidence">> => maps:from_list([{atom_to_binary(K), null_or(X)} || {K, X} <- maps:to_list(E),
                                                                         is_number(X) orelse is_boolean(X)
                                                                             orelse X =:= undefined])}.

waiter_json(W = #{label := Lb, members := N, seconds_per_s := S, waiters := Ws}) ->
    #{<<"label">> => msgflow_fmt:visible(Lb), <<"members">> => N, <<"seconds_per_s">> => S,
      <<"waiter">> => case maps:get(waiter, W) of
                          P when is_pid(P) -> msgflow_fmt:endpoint(P);
                          B -> msgflow_fmt:visible(B)
                      end,
      <<"calls_per_s">> => null_or(maps:get(calls_per_s, W, undefined)),
      <<"rtt_ms">> => null_or(maps:get(rtt_ms, W, undefined)),
      <<"blocked">> => null_or(maps:get(blocked, W, undefined)),
      <<"waiters">> => [waiter_json(X) || X <- Ws]}.

null_or(undefined) -> null;
null_or(X) -> X.
