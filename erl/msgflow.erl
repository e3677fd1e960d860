%%% @doc msgflow: who sends messages to whom, how often.
%%%
%%% Counting happens inside an erl_tracer NIF (msgflow_tracer) on the
%%% tracees' own scheduler threads, so no trace message is ever sent and
%%% memory grows with the number of distinct (sender, receiver) pairs, not
%%% with the number of messages.  A collector process (msgflow_collector)
%%% pulls a snapshot of the counts every `interval' ms and keeps totals and
%%% per-window counts for rates.
%%%
%%% ```
%%% 1> msgflow:start().
%%% ok
%%% 2> msgflow:top().
%%% 3> msgflow:stop().
%%% '''
-module(msgflow).

-export([start/0, start/1, stop/0, reset/0, wait/1,
         pairs/0, top/0, top/1, matrix/1, info/0, export/2]).

-export_type([endpoint/0, pair_count/0]).

%% A sender or receiver as the VM reported it: a pid or port for senders;
%% for receivers also a registered name, `{Name, Node}', a remote pid or an
%% alias reference.
-type endpoint() :: msgflow_tracer:endpoint().
%% {Sender, Receiver, Messages}
-type pair_count() :: {endpoint(), endpoint(), pos_integer()}.

-define(COLLECTOR, msgflow_collector).

%% @doc Same as `start(#{})': trace sends of all processes.
-spec start() -> ok | {error, term()}.
start() ->
    start(#{}).

%% @doc Starts counting.  Options (all optional):
%% <ul>
%% <li>`procs => all | new | existing | [pid() | atom()]' whose sends are
%%     counted (default `all'; names are resolved now);</li>
%% <li>`interval => Ms', 10..3600000, between snapshots, which is also the
%%     window for rates (default 1000);</li>
%% <li>`max_pairs => N', cap on table entries; past it messages go to the
%%     `overflow' tally, so totals stay exact (default 1000000);</li>
%% <li>`duration => Ms | infinity', stop by itself after Ms (default infinity);</li>
%% <li>`windows => N', windows kept for rates (default 60);</li>
%% <li>`sample => {TracedMs, PeriodMs} | off': trace only TracedMs of every
%%     PeriodMs (1 =< TracedMs < PeriodMs); between slices the trace flags
%%     are off, so traced processes pay nothing.  Counts are what was
%%     measured; top/1's rates are extrapolated to the whole period and
%%     marked as estimates.  Not with `procs => new' (default off).</li>
%% </ul>
%% Errors: `{error, {badopt, {Key, Value}}}' for a bad value or an unknown
%% key, `{error, {noproc, PidOrName}}' for a procs entry that is not alive,
%% `{error, already_started}' while running, `{error, {nif_not_loaded, _}}'
%% when priv/msgflow_tracer.so could not be loaded.
%% Starting clears the data of the previous run.
-spec start(map()) -> ok | {error, term()}.
start(Opts) ->
    case msgflow_opts:validate(Opts) of
        {ok, Valid} ->
            case application:ensure_all_started(msgflow) of
                {ok, _} -> gen_server:call(?COLLECTOR, {start, Valid}, infinity);
                {error, _} = E -> E
            end;
        {error, _} = E ->
            E
    end.

%% @doc Stops counting.  When it returns, msgflow's trace flags are off and
%% every send traced before the call is in pairs/0.  The data stays until
%% reset/0 or the next start.  `ok' also when not running.
-spec stop() -> ok.
stop() ->
    call(stop, ok).

%% @doc Forgets the counts (tracing, if on, goes on).
-spec reset() -> ok.
reset() ->
    call(reset, ok).

%% @doc Waits until counting stops (by `duration' or stop/0), at most
%% Timeout ms.  `ok', or `timeout'.
-spec wait(timeout()) -> ok | timeout.
wait(Timeout) ->
    try gen_server:call(?COLLECTOR, wait, Timeout)
    catch
        exit:{timeout, _} -> timeout;
        exit:{noproc, _} -> ok
    end.

%% @doc Every pair counted since start, `[{Sender, Receiver, Messages}]',
%% busiest first.  Exact: from the NIF's tables, taken now when running.
-spec pairs() -> [pair_count()].
pairs() ->
    call(pairs, []).

%% @doc Prints the 10 busiest pairs.
-spec top() -> ok.
top() ->
    top(10).

%% @doc Prints the N busiest pairs by total messages, with labels (name,
%% else initial call) and the rate (messages/s) over the last window.  A
%% send to a registered name and one to the pid holding it are one row.
-spec top(pos_integer()) -> ok | {error, {badarg, term()}}.
top(N) when is_integer(N), N > 0 ->
    case call({top, N}, undefined) of
        undefined -> io:format("msgflow is not started~n");
        Top -> io:put_chars(format_top(Top))
    end;
top(N) ->
    {error, {badarg, N}}.

%% @doc The communication matrix: every pair's total, grouped by
%% <ul>
%% <li>`process': sender and receiver themselves (a registered name that
%%     resolved counts as the pid holding it);</li>
%% <li>`name': their labels (registered name, else initial call, ...);</li>
%% <li>`module': the module of the initial call (proc_lib's first);</li>
%% <li>`application': `application:get_application/1' of the process;</li>
%% <li>`node': the node of the endpoint.</li>
%% </ul>
%% Module and application are read while a process is alive; otherwise,
%% and for ports and remote endpoints, they are `undefined'.  Returns
%% `#{by, rows => [SenderKey], cols => [ReceiverKey], cells => #{{SenderKey,
%% ReceiverKey} => #{count => Messages, rate => MessagesPerSecond}},
%% window_ms, estimated}', where rate is over the last window (extrapolated
%% when sampling: `estimated => true').  `{error, {badarg, By}}' for any
%% other By.
-spec matrix(process | name | module | application | node) -> map() | {error, {badarg, term()}}.
matrix(By) when By =:= process; By =:= name; By =:= module; By =:= application; By =:= node ->
    call({matrix, By}, #{by => By, rows => [], cols => [], cells => #{}, window_ms => 0,
                        estimated => false});
matrix(By) ->
    {error, {badarg, By}}.

%% @doc What msgflow is doing and holding:
%% `running', `pairs' (distinct pairs counted), `events' (messages
%% counted, overflow included), `dead_letters' (sends to non-existing
%% processes), `overflow' (messages past `max_pairs'), `allocator'
%% (`jemalloc' | `enif'), `memory' (bytes held by the NIF's tables),
%% `shards' (scheduler threads that counted), `table_entries', `windows',
%% `started_at' / `stopped_at' (system time, ms), `opts'.
-spec info() -> map().
info() ->
    call(info, #{running => false}).

%% @doc Writes every pair to Path.  Format `csv': a header line, then
%% `sender,receiver,sender_label,receiver_label,messages' per pair,
%% busiest first.  `{error, {Reason, Path}}' when the file cannot be
%% written; nothing partial is left behind.
-spec export(file:filename_all(), csv) -> ok | {error, term()}.
export(Path, csv) ->
    Rows = call(labelled_pairs, []),
    Lines = [<<"sender,receiver,sender_label,receiver_label,messages\n">>
             | [csv_line([msgflow_fmt:endpoint(S), msgflow_fmt:endpoint(R), SL, RL,
                          integer_to_binary(C)]) || {S, R, SL, RL, C} <- Rows]],
    write_whole(Path, Lines);
export(_Path, Format) ->
    {error, {unknown_format, Format}}.

%%% Internals

call(Request, IfDown) ->
    case whereis(?COLLECTOR) of
        undefined -> IfDown;
        _ -> gen_server:call(?COLLECTOR, Request, infinity)
    end.

csv_line(Fields) ->
    [lists:join(",", [csv_field(F) || F <- Fields]), "\n"].

csv_field(F) ->
    case binary:match(F, [<<",">>, <<"\"">>, <<"\n">>]) of
        nomatch -> F;
        _ -> [$", binary:replace(F, <<"\"">>, <<"\"\"">>, [global]), $"]
    end.

%% Write to a temporary file beside Path, then rename: no partial file.
write_whole(Path, Data) ->
    Tmp = iolist_to_binary([Path, ".tmp"]),
    case file:write_file(Tmp, Data) of
        ok ->
            case file:rename(Tmp, Path) of
                ok -> ok;
                {error, R} -> _ = file:delete(Tmp), {error, {R, Path}}
            end;
        {error, R} ->
            {error, {R, Path}}
    end.

format_top(#{rows := Rows, window_ms := WinMs, events := Events, pairs := Pairs,
             running := Running, sample := Sample}) ->
    Head = [io_lib:format("msgflow ~s: ~s messages, ~s pairs; rate over the last ~s ms~n",
                          [case Running of true -> "running"; false -> "stopped" end,
                           msgflow_fmt:int(Events), msgflow_fmt:int(Pairs),
                           msgflow_fmt:int(WinMs)]),
            case Sample of
                off -> [];
                {T, P} -> io_lib:format("sampled: traced ~b ms of every ~b; messages are "
                                        "those measured, MSG/S are estimates (x~.1f)~n",
                                        [T, P, P / T])
            end],
    E = msgflow_fmt:ellipsis(),
    Cols = [msgflow_fmt:rcell("#", 3), "  ", msgflow_fmt:cell("SENDER", 25, E), " ",
            msgflow_fmt:cell("RECEIVER", 25, E), " ", msgflow_fmt:rcell("MESSAGES", 11), " ",
            msgflow_fmt:rcell("MSG/S", 10), "\n"],
    Lines = [[msgflow_fmt:rcell(integer_to_list(I), 3), "  ",
              msgflow_fmt:cell(SL, 25, E), " ", msgflow_fmt:cell(RL, 25, E), " ",
              msgflow_fmt:rcell(msgflow_fmt:int(C), 11), " ",
              msgflow_fmt:rcell(msgflow_fmt:rate(Rate), 10), "\n"]
             || {I, #{sender_label := SL, receiver_label := RL, count := C, rate := Rate}}
                    <- lists:zip(lists:seq(1, length(Rows)), Rows)],
    [Head, Cols | Lines].
