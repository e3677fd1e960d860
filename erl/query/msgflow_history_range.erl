%%% @doc A time range of the history (msgflow_history) read back as a
%%% store, so that every view reads a range the way it reads the running
%%% counts (msgflow_query, options `from' and `to').
%%%
%%% The windows in the range are those whose middle falls in it (a
%%% window merged by downsampling counts whole, at its middle).  They are
%%% merged into a new store as one window: its pairs are the pairs of the
%%% windows, each endpoint with the label it had when it was written (not
%%% read from the VM: after a restart its pid stands for a process of the
%%% node before, and its label is what matches it to today's), its kinds
%%% and tags those of the windows (a tag this VM has no atom for, of a
%%% name it never saw, is counted as `other').  Its run is the traced
%%% time of the windows (their lengths summed, the gaps of a restart left out), ending
%%% at the last window's end: rates over a range are its means.  Not in a
%%% range: peaks by window, sizes, waits and round trips (the history
%%% keeps messages by kind only), and a send to a name is not merged into
%%% the pid that held it.
%%%
%%% The store's tables belong to the calling process and go with it
%%% (msgflow_query builds a range in a process of its own).
-module(msgflow_history_range).

-export([windows/4, store/4]).

%% how long before its name's time (the end of its first window as it
%% closed) a segment's windows may start: one window, at most an hour
%% (the `interval' option); a window merged by downsampling starts where its
%% first did
-define(MAX_SEGMENT_MS, 3600 * 1000).

%% @doc The windows of the nodes Nodes (`all' or a list) in Dir in
%% [From, To] (system ms), oldest first.
-spec windows(file:filename(), all | [node()], integer(), integer()) -> [msgflow_history_file:window()].
windows(Dir, Nodes, From, To) ->
    %% (one node's segments by writer: two VMs of one node name may
    %% write one directory at once)
    ByNode = maps:groups_from_list(fun(#{node := N, writer := W}) -> {N, W} end,
                                   msgflow_history_file:list(Dir, Nodes)),
    lists:sort(fun(#{at := A}, #{at := B}) -> A =< B end,
               lists:append([node_windows(Segs, From, To) || Segs <- maps:values(ByNode)])).

%% One writer's segments (oldest first): one can hold windows in the range
%% when it starts before To and the next starts after From.
node_windows(Segs, From, To) ->
    Nexts = [At || #{first_at := At} <- tl(Segs ++ [#{first_at => infinity}])],
    lists:append([[W || W = #{at := At, ms := Ms} <- Ws, Mid <- [At - Ms div 2],
                        Mid >= From, Mid =< To]
                  || {#{file := F, first_at := First}, Next} <- lists:zip(Segs, Nexts),
                     First - ?MAX_SEGMENT_MS =< To, Next >= From,
                     {ok, Ws, _} <- [msgflow_history_file:read(F)]]).


%% @doc The windows of Nodes in Dir in [From, To] merged into a store
%% (the handle views read, msgflow_store:store()), with `range => #{from,
%% to, windows, traced_ms}'; `{error, {no_history, Dir, {From, To}}}'
%% when no window of Dir is in the range.
-spec store(file:filename(), all | [node()], integer(), integer()) ->
          {ok, msgflow_store:store()} | {error, term()}.
store(Dir, Nodes, From, To) ->
    case windows(Dir, Nodes, From, To) of
        [] ->
            {error, {no_history, Dir, {From, To}}};
        Ws = [#{node := Node} | _] ->
            Traced = lists:sum([Ms || #{ms := Ms} <- Ws]),
            #{at := Last} = lists:last(Ws),
            %% at most a million pairs within the default max_memory,
            %% what a run holds: a range of more has the rest in
            %% overflow, as a run would
            S0 = msgflow_store:start_run(msgflow_store:new(),
                                         (msgflow_opts:defaults())#{windows => 1, max_pairs => 1000000}),
            Ends = lists:usort([E || #{rows := Rows} <- Ws, {S, R, _, _, _} <- Rows, E <- [S, R]]),
            S1 = msgflow_store:seed(S0, Ends),
            S2 = lists:foldl(fun(#{rows := Rows}, S) ->
                                     msgflow_store:merge_deltas([delta(Row) || Row <- Rows], S)
                             end, S1, Ws),
            S3 = msgflow_store:open_for(S2, Traced),
            %% (its tables and aggregate count in own_memory while the
            %% caller, a view worker, lives)
            ok = msgflow_workers:hold(S3),
            Handle = msgflow_store:handle(S3, #{node => case Nodes of
                                                             [One] -> One;
                                                             _ -> Node
                                                         end,
                                                 running => false,
                                                 started_at => Last - Traced, stopped_at => Last,
                                                 interval => max(1, Traced div length(Ws)),
                                                 sample => sample(Ws), call_sample => off,
                                                 skipped => 0,
                                                 new_tracer => msgflow}),
            {ok, Handle#{taken_at => Last,
                         range => #{from => From, to => To, windows => length(Ws),
                                    traced_ms => Traced}}}
    end.

%% A sampled run's windows (`sample => {T, P}': scale P / T) read as
%% sampled: rates are estimates, scaled.
sample(Ws) ->
    case lists:max([Sc || #{scale := Sc} <- Ws]) of
        Sc when Sc > 1 -> {1000, round(1000 * Sc)};
        _ -> off
    end.

%% A row as the store merges it.  Its kind is one of the tracer's (a
%% file's other kind is left out, the messages counted by pair); a tag
%% this VM has no atom for (read as its binary) is counted as `other', the
%% tag of a kind's tags past max_kinds.
delta({{S, _, _, _}, {R, _, _, _}, K, T, N}) ->
    case lists:member(K, msgflow_tracer:kinds()) of
        true when is_atom(T) -> {S, R, N, K, T};
        true -> {S, R, N, K, other};
        false -> {S, R, N}
    end.
