%%% @doc How long messages wait in the busiest receivers' mailboxes.  Each
%%% window the collector reads `message_queue_len' of the receivers that
%%% got the most messages in the window before (?WATCH at most, each with
%%% ?MIN_MESSAGES or more) ?READINGS times: at random times between its
%%% ticks and once as the window closes (a mean of fewer readings of a
%%% queue that comes and goes is off by more than a third); the window's
%%% wait for each is Little's law: the mean
%%% queue length over the window divided by its arrival rate (the messages
%%% counted to it in the window).  A mailbox that grew at each reading
%%% `grew all window': its wait is then no steady figure (a lower bound).
%%% The collector's process holds this (in msgflow_store's state); nothing
%%% here touches the send path.
-module(msgflow_store_waits).
-export([new/0, sample/1, close/5, readings/0, min_messages/0]).
-export_type([waits/0, wait/0]).

%% receivers watched at most, and the fewest messages a window that makes
%% one watched in the next; readings of each a window: 50 x 40 reads of a
%% queue take about 2 ms a window
-define(WATCH, 50).
-define(MIN_MESSAGES, 10).
-define(READINGS, 40).

-record(waits, {watch = [] :: [pid()],
                %% readings of the open window, newest first
                samples = #{} :: #{pid() => [non_neg_integer()]}}).
-opaque waits() :: #waits{}.

%% A receiver's wait in one window: the mean queue length (messages) over
%% its readings, the wait (ms; undefined with no messages counted to it),
%% whether the queue grew at each reading, and how many readings.
-type wait() :: #{queue_len := float(), wait_ms := float() | undefined, growing := boolean(),
                  readings := pos_integer()}.

%% @doc How many times a window the watched queues are read.
-spec readings() -> pos_integer().
readings() -> ?READINGS.

%% @doc Nothing watched yet.
-spec new() -> waits().
new() -> #waits{}.

%% @doc The watched receivers' queue lengths read now.
-spec sample(waits()) -> waits().
sample(W = #waits{watch = Watch, samples = Ss}) ->
    W#waits{samples = lists:foldl(fun(P, Acc) ->
                                          case process_info(P, message_queue_len) of
                                              {message_queue_len, N} -> Acc#{P => [N | maps:get(P, Acc, [])]};
                                              undefined -> Acc
                                          end
                                  end, Ss, Watch)}.

%% @doc The window closes: a last reading, each watched receiver's wait
%% (In: what a match spec selects of the window's receivers
%% `{Receiver, Senders, Messages}' (msgflow_store_kept), Canon: a
%% receiver's process, a registered name's too; WinMs the window's
%% length; Scale the messages sent for each one counted, over 1 when
%% tracing is sampled), and the receivers to watch in the next window (the
%% window's busiest local processes).  Messages from senders that are not
%% traced are not counted: with `procs' naming a few, a receiver's wait is
%% too long by their share.
-spec close(waits(), fun((ets:match_spec()) -> [term()]), fun((term()) -> term()),
            non_neg_integer(), number()) -> {#{pid() => wait()}, waits()}.
close(W0, In, Canon, WinMs, Scale) ->
    #waits{samples = Ss} = sample(W0),
    %% the window's messages to each local process (its names' added), of
    %% the receivers with ?MIN_MESSAGES or more: a watched one with fewer
    %% has no wait
    Busy = lists:foldl(fun({R, M}, Acc) ->
                               case Canon(R) of
                                   P when is_pid(P), node(P) =:= node() -> Acc#{P => M + maps:get(P, Acc, 0)};
                                   _ -> Acc
                               end
                       end, #{}, In([{{'$1', '_', '$2'}, [{'>=', '$2', ?MIN_MESSAGES}],
                                      [{{'$1', '$2'}}]}])),
    Waits = maps:from_list([{P, wait(lists:reverse(Rs), maps:get(P, Busy, 0) * Scale, WinMs)}
                            || {P, Rs} <- maps:to_list(Ss)]),
    Watch = [P || {_, P} <- lists:sublist(lists:reverse(lists:sort([{M, P} || {P, M} <- maps:to_list(Busy)])),
                                          ?WATCH)],
    {Waits, #waits{watch = Watch}}.

wait(Rs, Msgs, WinMs) ->
    Mean = lists:sum(Rs) / length(Rs),
    #{queue_len => Mean,
      wait_ms => case Msgs of
                     _ when Msgs == 0 -> undefined;
                     _ when WinMs =:= 0 -> undefined;
                     _ -> Mean / (Msgs / WinMs)
                 end,
      growing => grew(Rs), readings => length(Rs)}.

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
