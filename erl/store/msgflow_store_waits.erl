%%% @doc How long messages wait in the busiest receivers' mailboxes, and
%%% how busy those receivers and their callers are: the readings a
%%% queueing picture is made of (msgflow_bottlenecks_view).  Each window
%%% the collector reads the processes that got or sent the most messages
%%% in the window before (?WATCH at most, each with ?MIN_MESSAGES or
%%% more; a server called from other nodes has its calls counted where
%%% they were sent, its replies here) and
%%% the local processes that sent them the most calls (?WATCH_CALLERS at
%%% most: a caller blocked on a server receives almost nothing, so it is
%%% never among the busiest) ?READINGS times: at random times between its
%%% ticks and once as the window closes (a mean of fewer readings of a
%%% queue that comes and goes is off by more than a third).  Each reading
%%% reads the queue (`message_queue_len', without a signal to the
%%% process); every second one also `status', `current_function' and
%%% `memory' (one process_info/2: a signal the process answers, about
%%% 3 µs), every eighth the heap words it uses, and for a process found in
%%% a call its `monitors' (the server it waits on: gen:do_call monitors
%%% it; read at its first four such readings a window); with them the run
%%% queues' length of the node (`total_run_queue_lengths').  At 50
%%% watched processes that is about 3 ms of the collector a window
%%% (BENCHMARKS.md, `make bench-readings').
%%%
%%% Per process and window: the wait, Little's law (the mean queue length
%%% over the window divided by its arrival rate, the messages counted to
%%% it in the window); `busy', the share of readings in which it was not
%%% idle in its loop's receive (running, runnable, collecting garbage, or
%%% waiting anywhere inside the handling of a message: a handler that
%%% sleeps, does I/O or waits on a call is serving); `blocked', the share
%%% in which it waited inside a call, and on whom (`blocked_on');
%%% `runnable', the share in which it waited for a scheduler.  A mailbox
%%% that grew at each reading `grew all window': its wait is then no
%%% steady figure (a lower bound).  The collector's process holds this (in
%%% msgflow_store's state); nothing here touches the send path.
-module(msgflow_store_waits).
-export([new/0, sample/1, close/6, readings/0, min_messages/0, classify/4]).
-export_type([waits/0, wait/0, node_load/0, class/0]).

%% receivers watched at most, and the fewest messages a window that makes
%% one watched in the next; callers watched at most; readings of each a
%% window: at 50 watched about 5 ms of the collector a window, at 100
%% about 12 (all waiting, the worst case: BENCHMARKS.md)
-define(WATCH, 50).
-define(WATCH_CALLERS, 50).
-define(MIN_MESSAGES, 10).
-define(READINGS, 40).
%% the busiest pairs of the window looked at for the watched receivers'
%% callers
-define(CALLER_PAIRS, 2000).
%% the readings that read a process's memory and heap too
%% (garbage_collection_info)
-define(HEAP_EVERY, 10).
%% the readings that read where a waiting process waits (a signal)
-define(FUNCTION_EVERY, 4).
%% readings of a process in a call a window that read its monitors
-define(MONITOR_READS, 4).

%% A reading's class: idle in its loop's receive, serving (busy),
%% waiting on a call (blocked; busy too), or waiting for a scheduler
%% (runnable; busy too).
-type class() :: idle | busy | {blocked, [pid()]} | runnable.

-record(waits, {watch = [] :: [pid()],
                callers = [] :: [pid()],
                %% readings of the open window, newest first
                samples = #{} :: #{pid() => [{integer(), non_neg_integer(), non_neg_integer() | none, atom(), class() | none}]},
                run_queue = [] :: [non_neg_integer()],
                %% readings taken in the open window; the least heap
                %% words each read process used at the readings that read
                %% them (every ?HEAP_EVERY-th: its live data, what a
                %% collection leaves); `live' those of the window before
                n = 0 :: non_neg_integer(),
                used = #{} :: #{pid() => non_neg_integer()},
                %% the monitors read of each process found in a call this
                %% window: how many times, and the processes last found
                on = #{} :: #{pid() => {non_neg_integer(), [pid()]}},
                live = #{} :: #{pid() => non_neg_integer()}}).
-opaque waits() :: #waits{}.

%% A watched process in one window: the mean queue length (messages)
%% over its readings, its messages in per second (`in_per_s', counted;
%% 0.0 for a caller that got fewer than ?MIN_MESSAGES), the wait (ms;
%% undefined with no messages counted to it), whether the queue grew at
%% each reading and how fast (`growth_per_s', messages/s), how many
%% readings, its memory (bytes, at the last reading that read it), what
%% it sent per second (of the window's
%% busiest pairs) and to whom most (`sent_to'), its live data in the
%% window (`live_words': the least heap words it used at the readings
%% that read them, one in ?HEAP_EVERY) and how much that grew since the
%% window before (`live_growth', words; undefined when it was not read
%% then), and the shares (0.0 to 1.0) of its readings busy, blocked and
%% runnable; `blocked_on' the share of readings blocked on each process;
%% `watched' why it was read.
-type wait() :: #{queue_len := float(), wait_ms := float() | undefined, growing := boolean(),
                  readings := pos_integer(), in_per_s := float(), growth_per_s := float(),
                  memory := non_neg_integer(),
                  sent_per_s := float(), sent_to := term(),
                  live_words := non_neg_integer() | undefined, live_growth := integer() | undefined,
                  busy := float(), blocked := float(), runnable := float(),
                  blocked_on := #{pid() => float()}, watched := receiver | caller}.
%% The node in one window: the mean length of its run queues (processes
%% and ports ready to run, all schedulers) over the readings, and its
%% schedulers online.
-type node_load() :: #{run_queue := float(), schedulers := pos_integer(), readings := non_neg_integer()}.

%% @doc How many times a window the watched queues are read.
-spec readings() -> pos_integer().
readings() -> ?READINGS.

%% @doc Nothing watched yet.
-spec new() -> waits().
new() -> #waits{}.

%% @doc The watched processes read now, and the node's run queues.  Each
%% reading reads a process's queue and status (read without a signal to
%% the process: a few tenths of a microsecond); at every ?FUNCTION_EVERY-th
%% reading, of a process that waits, also where it waits
%% (`current_function': a signal the process answers, a few µs), and at
%% every ?HEAP_EVERY-th its memory and heap words too (one signal); for
%% one found in a call the processes it monitors at its first
%% ?MONITOR_READS such readings of the window (the server a caller waits
%% on seldom changes within a window: later ones reuse what those found).
-spec sample(waits()) -> waits().
sample(W = #waits{watch = Watch, callers = Callers, samples = Ss, run_queue = RQ, n = N0, used = U0,
                  on = On0}) ->
    T = erlang:monotonic_time(millisecond),
    Function = N0 rem ?FUNCTION_EVERY =:= 0,
    Heap = N0 rem ?HEAP_EVERY =:= 0,
    Add = fun(P, R, Acc) -> Acc#{P => [R | maps:get(P, Acc, [])]} end,
    Read = fun(P, {Acc, U, On}) when Heap ->
                   case process_info(P, [message_queue_len, status, current_function, memory,
                                         garbage_collection_info]) of
                       [{message_queue_len, N}, {status, St}, {current_function, F}, {memory, M},
                        {garbage_collection_info, I}] ->
                           {Class, On1} = class(St, F, N, P, On),
                           {_, H} = lists:keyfind(heap_size, 1, I),
                           {_, OH} = lists:keyfind(old_heap_size, 1, I),
                           {Add(P, {T, N, M, St, Class}, Acc), U#{P => min(H + OH, maps:get(P, U, H + OH))}, On1};
                       undefined -> {Acc, U, On}
                   end;
              (P, {Acc, U, On}) ->
                   case {process_info(P, message_queue_len), process_info(P, status)} of
                       {{message_queue_len, N}, {status, St}} when Function, St =:= waiting ->
                           case process_info(P, current_function) of
                               {current_function, F} ->
                                   {Class, On1} = class(St, F, N, P, On),
                                   {Add(P, {T, N, none, St, Class}, Acc), U, On1};
                               undefined -> {Acc, U, On}
                           end;
                       {{message_queue_len, N}, {status, St}} ->
                           {Add(P, {T, N, none, St, none}, Acc), U, On};
                       _ -> {Acc, U, On}
                   end
           end,
    {Ss1, U, On} = lists:foldl(Read, {Ss, U0, On0}, Watch ++ Callers),
    W#waits{samples = Ss1, run_queue = [erlang:statistics(total_run_queue_lengths) | RQ], n = N0 + 1,
            used = U, on = On}.

%% A reading's class, the monitors of one in a call read as blocked_on/2
%% says.
class(St, F, N, P, On) ->
    case classify(St, F, N, none) of
        {blocked, []} -> blocked_on(P, On);
        C -> {C, On}
    end.

%% A reading of P in a call: blocked on the processes it monitors, read
%% at its first ?MONITOR_READS such readings of the window and reused
%% after.
blocked_on(P, On) ->
    case maps:get(P, On, {0, []}) of
        {K, Ps} when K >= ?MONITOR_READS -> {{blocked, Ps}, On};
        {K, Old} ->
            Ps = case monitored(P) of
                     [] -> Old;
                     New -> New
                 end,
            {{blocked, Ps}, On#{P => {K + 1, Ps}}}
    end.

%% @doc A reading's class from a process's status, current function and
%% queue length: idle when it waits in an OTP behaviour's loop receive
%% (or hibernates), or waits with an empty mailbox anywhere but in a
%% known wait of a handler (a sleep, socket or file I/O); blocked when it
%% is in a call's receive, waiting, ready to run or running (on the
%% processes it monitors: P read for them); runnable when ready to run elsewhere;
%% busy otherwise (running, collecting
%% garbage, or waiting inside a handler: a selective receive over a
%% non-empty mailbox included).
-spec classify(atom(), term(), non_neg_integer(), pid() | none) -> class().
classify(St, F = {M, Fn, _}, N, P) when St =:= runnable; St =:= running ->
    %% running or ready to run inside a call's receive: its reply came
    %% (or the call is being made), the call is what it waits for
    case call_wait(M, Fn) of
        true -> waiting(F, N, P);
        false when St =:= runnable -> runnable;
        false -> busy
    end;
classify(runnable, _, _, _) -> runnable;
classify(waiting, F, N, P) -> waiting(F, N, P);
classify(suspended, F, N, P) -> waiting(F, N, P);
classify(_, _, _, _) -> busy.

waiting({M, F, _}, N, P) ->
    case {call_wait(M, F), loop_wait(M, F), handler_wait(M, F)} of
        {true, _, _} -> {blocked, monitored(P)};
        {_, true, _} -> idle;
        {_, _, true} -> busy;
        _ when N =:= 0 -> idle;
        _ -> busy
    end;
waiting(_, _, _) -> idle.

%% the receive of a call's reply (gen_server, gen_statem, gen_event and
%% erpc calls; rpc goes through erpc)
call_wait(gen, do_call) -> true;
call_wait(gen, wait_resp_mon) -> true;
call_wait(gen, receive_response) -> true;
call_wait(gen, wait_response) -> true;
call_wait(erpc, call) -> true;
call_wait(erpc, receive_response) -> true;
call_wait(erpc, wait_response) -> true;
call_wait(_, _) -> false.

%% an OTP process idle in its loop
loop_wait(gen_server, loop) -> true;
loop_wait(gen_statem, loop_receive) -> true;
loop_wait(gen_event, fetch_msg) -> true;
loop_wait(erlang, hibernate) -> true;
loop_wait(_, _) -> false.

%% a handler that waits and serves meanwhile: a sleep, socket or file I/O
handler_wait(timer, sleep) -> true;
handler_wait(M, _) -> lists:member(M, [prim_inet, gen_tcp, gen_udp, gen_sctp, ssl, prim_file, file,
                                        file_io_server, socket, prim_socket, inet_tcp, io]).

%% the processes P monitors (the server a call waits on), [] when gone
monitored(none) -> [];
monitored(P) ->
    case process_info(P, monitors) of
        {monitors, Ms} -> [Q || {process, Q} <- Ms, is_pid(Q)];
        undefined -> []
    end.

%% @doc The window closes: a last reading, each watched process's wait
%% and shares, the node's run queues over the window, and the processes
%% to watch in the next window: the window's busiest local receivers, and
%% the local processes that sent them the most calls (Callers: the pairs
%% of the window's busiest, `{{Sender, Receiver}, Messages}', from which
%% the calls' senders are taken).  In: what a match spec selects of the
%% window's receivers `{Receiver, Senders, Messages}'
%% (msgflow_store_kept); Canon: a receiver's process, a registered name's
%% too; WinMs the window's length; Scale the messages sent for each one
%% counted, over 1 when tracing is sampled.  Messages from senders that
%% are not traced are not counted: with `procs' naming a few, a
%% receiver's wait is too long by their share.
-spec close(waits(), fun((ets:match_spec()) -> [term()]), fun((term()) -> term()),
            non_neg_integer(), number(), fun((pos_integer()) -> [{{term(), term()}, non_neg_integer()}])) ->
          {#{pid() => wait()}, node_load(), waits()}.
close(W0, In, Canon, WinMs, Scale, Pairs) ->
    %% (the last reading reads the heap too)
    #waits{samples = Ss, run_queue = RQ, watch = Watched, live = Live0, used = Live} = sample(W0#waits{n = 0}),
    %% the window's messages to each local process (its names' added), of
    %% the receivers with ?MIN_MESSAGES or more: a watched one with fewer
    %% has no wait
    Busy = lists:foldl(fun({R, M}, Acc) ->
                               case local(Canon(R)) of
                                   none -> Acc;
                                   P -> Acc#{P => M + maps:get(P, Acc, 0)}
                               end
                       end, #{}, In([{{'$1', '_', '$2'}, [{'>=', '$2', ?MIN_MESSAGES}],
                                      [{{'$1', '$2'}}]}])),
    Busiest = Pairs(?CALLER_PAIRS),
    Sent = sent(Busiest, Canon, Ss),
    Waits = maps:from_list([{P, maps:merge(wait(lists:reverse(Rs), maps:get(P, Busy, 0) * Scale, WinMs,
                                                 case lists:member(P, Watched) of
                                                     true -> receiver;
                                                     false -> caller
                                                 end),
                                            (sent_figures(maps:get(P, Sent, none), Scale, WinMs))#{
                                              live_words => maps:get(P, Live, undefined),
                                              live_growth => case {Live0, Live} of
                                                                 {#{P := A}, #{P := B}} -> B - A;
                                                                 _ -> undefined
                                                             end})}
                            || {P, Rs} <- maps:to_list(Ss)]),
    %% the busiest by messages in, or out (a server called from other
    %% nodes: its calls are counted where they were sent, its replies
    %% here)
    Out = lists:foldl(fun({{S, _}, M}, Acc) ->
                              case local(Canon(S)) of
                                  none -> Acc;
                                  P -> Acc#{P => M + maps:get(P, Acc, 0)}
                              end
                      end, #{}, Busiest),
    Rank = maps:fold(fun(P, M, Acc) when M >= ?MIN_MESSAGES -> Acc#{P => max(M, maps:get(P, Acc, 0))};
                        (_, _, Acc) -> Acc
                     end, Busy, Out),
    Watch = [P || {_, P} <- lists:sublist(lists:reverse(lists:sort([{M, P} || {P, M} <- maps:to_list(Rank)])),
                                          ?WATCH)],
    Node = #{run_queue => mean(RQ), schedulers => erlang:system_info(schedulers_online),
             readings => length(RQ)},
    {Waits, Node, #waits{watch = Watch, callers = callers(Watch, Busiest, Canon), live = Live}}.

%% What each read process sent in the window, by receiver, from the
%% window's busiest pairs.
sent(Pairs, Canon, Read) ->
    lists:foldl(fun({{S, R}, M}, Acc) ->
                        case local(Canon(S)) of
                            P when is_pid(P) ->
                                case is_map_key(P, Read) of
                                    true -> Acc#{P => maps:update_with(Canon(R), fun(X) -> X + M end, M,
                                                                       maps:get(P, Acc, #{}))};
                                    false -> Acc
                                end;
                            none -> Acc
                        end
                end, #{}, Pairs).

%% A process's sends in the window: per second, and the receiver it sent
%% the most.
sent_figures(none, _, _) ->
    #{sent_per_s => 0.0, sent_to => undefined};
sent_figures(To, Scale, WinMs) ->
    {M, R} = lists:max([{N, Rc} || {Rc, N} <- maps:to_list(To)]),
    _ = M,
    #{sent_per_s => case WinMs of
                        0 -> 0.0;
                        _ -> lists:sum(maps:values(To)) * Scale * 1000 / WinMs
                    end,
      sent_to => R}.

%% The local senders to the watched receivers with the most messages,
%% ?WATCH_CALLERS at most, the watched themselves left out.
callers(Watch, Pairs, Canon) ->
    W = maps:from_list([{P, true} || P <- Watch]),
    Sent = lists:foldl(fun({{S, R}, M}, Acc) ->
                               case {local(Canon(S)), local(Canon(R))} of
                                   {none, _} -> Acc;
                                   {_, none} -> Acc;
                                   {SP, RP} ->
                                       case maps:is_key(RP, W) andalso not maps:is_key(SP, W) of
                                           true -> Acc#{SP => M + maps:get(SP, Acc, 0)};
                                           false -> Acc
                                       end
                               end
                       end, #{}, Pairs),
    [P || {_, P} <- lists:sublist(lists:reverse(lists:sort([{M, P} || {P, M} <- maps:to_list(Sent)])),
                                  ?WATCH_CALLERS)].

local(P) when is_pid(P), node(P) =:= node(), P =/= self() -> P;
local(_) -> none.

mean(Xs) -> lists:sum(Xs) / max(1, length(Xs)).

wait(Rs, Msgs, WinMs, Why) ->
    Qs = [N || {_, N, _, _, _} <- Rs],
    Len = length(Rs),
    Mean = lists:sum(Qs) / Len,
    Ms = [{At, M} || {At, _, M, _, _} <- Rs, M =/= none],
    %% the status of every reading; where it waited, of those that read
    %% it: the shares of the waiting readings idle, serving and blocked
    %% (and on whom) stand for every waiting reading
    Waiting = length([St || {_, _, _, St, _} <- Rs, St =:= waiting orelse St =:= suspended]),
    Runnable = length([R || R = {_, _, _, runnable, _} <- Rs]),
    Placed = [C || {_, _, _, St, C} <- Rs, C =/= none, St =:= waiting orelse St =:= suspended],
    NP = length(Placed),
    Frac = fun(Pred) when NP > 0 -> length([C || C <- Placed, Pred(C)]) / NP;
              (_) -> 0.0
           end,
    WaitShare = Waiting / Len,
    BlockedFrac = Frac(fun({blocked, _}) -> true; (_) -> false end),
    %% a process seen waiting but never where: taken as idle
    IdleFrac = case NP of 0 -> 1.0; _ -> Frac(fun(C) -> C =:= idle end) end,
    Blocked = WaitShare * BlockedFrac,
    On = lists:foldl(fun({blocked, Ps = [_ | _]}, Acc) ->
                             lists:foldl(fun(Q, A) -> A#{Q => maps:get(Q, A, 0) + 1 / (length(Ps) * NP)} end,
                                         Acc, Ps);
                        (_, Acc) -> Acc
                     end, #{}, Placed),
    %% blocked readings that named no server (read between the call's
    %% send and its monitor) go to the servers the others named
    Named = lists:sum(maps:values(On)),
    OnAll = case Named > 0 of
                true -> maps:map(fun(_, X) -> X * Blocked / Named end, On);
                false -> On
            end,
    #{queue_len => Mean,
      wait_ms => case Msgs of
                     _ when Msgs == 0 -> undefined;
                     _ when WinMs =:= 0 -> undefined;
                     _ -> Mean / (Msgs / WinMs)
                 end,
      in_per_s => case WinMs of
                      0 -> 0.0;
                      _ -> Msgs * 1000 / WinMs
                  end,
      growing => grew(Qs), readings => Len, growth_per_s => per_s([{At, N} || {At, N, _, _, _} <- Rs], WinMs),
      memory => case Ms of [] -> 0; _ -> element(2, lists:last(Ms)) end,
      busy => 1 - WaitShare * IdleFrac,
      blocked => Blocked,
      runnable => Runnable / Len,
      blocked_on => OnAll, watched => Why}.

%% How fast a figure read at times `[{At, Value}]' grew over the window
%% (per second, negative when it shrank): from the first reading to the
%% last (the one as the window closed), when they are a quarter of the
%% window apart or more.
per_s([], _) ->
    0.0;
per_s(Rs = [{T0, V0} | _], WinMs) ->
    {T1, V1} = lists:last(Rs),
    case T1 - T0 of
        Dt when Dt > 0, Dt * 4 >= WinMs -> (V1 - V0) * 1000 / Dt;
        _ -> 0.0
    end.

%% The queue grew all window: over four readings at least, the mean of
%% each quarter of the readings at least one message above the quarter's
%% before, and the last quarter's above the first's by more than the
%% readings' wobble makes likely (three standard errors of that
%% difference, from the spread within the quarters).  A queue read at
%% random times wobbles: one that comes and goes (a server 80 % busy fed
%% in bursts, 19 messages to 0 every 50 ms, read 40 times) rose quarter
%% by quarter by chance in about one window of 250 (one of 2,500 with
%% the second condition); one that holds still or comes and goes is no
%% growth.
grew(Rs) when length(Rs) >= 4 ->
    Q = length(Rs) div 4,
    Quarters = [lists:sublist(Rs, 1 + I * Q, Q) || I <- [0, 1, 2]] ++ [lists:nthtail(3 * Q, Rs)],
    Means = [lists:sum(Qs) / length(Qs) || Qs <- Quarters],
    Within = lists:sum([(X - M) * (X - M) || {Qs, M} <- lists:zip(Quarters, Means), X <- Qs])
        / max(1, length(Rs) - 4),
    Se = math:sqrt(2 * Within / Q),
    rising(Means) andalso lists:last(Means) - hd(Means) > 3 * Se;
grew(_) ->
    false.

rising([A, B | T]) -> A + 1 =< B andalso rising([B | T]);
rising(_) -> true.

%% @doc The fewest messages a receiver has in a window for its wait to be
%% read (the aggregate gives the store only those).
-spec min_messages() -> pos_integer().
min_messages() -> ?MIN_MESSAGES.
