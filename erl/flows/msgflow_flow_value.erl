%%% @doc The values of request flows (msgflow_flow), built here and
%%% nowhere else: a follow/2 flow (flow/3, merge_parts/2) and the summary
%%% of a follow_calls/2 entry across nodes (merge_summary/2,
%%% name_summary/1); depths/2 gives each event its causal depth.
%%% msgflow_flow_render prints and draws them.  Pure but for the labels,
%%% read from the VM (msgflow_labels:label/1); any process.
-module(msgflow_flow_value).

-export([flow/3, merge_parts/2, merge_summary/2, name_summary/1, name/2, group_name/2,
         depths/2]).
-export_type([flow/0, summary/0, event/0]).

%% A send in a flow, in causal order: `serial' as seq_trace gives it,
%% `depth' the length of the causal chain it ends (1 for the first
%% message), `at_us' microseconds since the flow's first event, `kind'
%% and `tag' the message's (`call', `get'; `reply', `ok').
-type event() :: #{serial := {non_neg_integer(), non_neg_integer()},
                   from := msgflow:endpoint(), to := msgflow:endpoint(),
                   depth := pos_integer(), at_us := non_neg_integer(),
                   kind := msgflow_tracer:kind(), tag := atom()}.
%% One followed request: `messages' the token went with (exact),
%% `pairs' by process, busiest first, `processes' (senders and receivers),
%% `depth' the longest causal chain (of the events kept), `duration_us'
%% from the first event to the last, `events' in causal order (at most
%% `max_events'; `dropped' the ones past it), `labels' each endpoint's
%% label, read while the flow ran; `quiet' false when the flow still went
%% on at follow/2's `timeout'; `nodes' the nodes whose counts are in it
%% (across a cluster, each counts the sends of its own processes; `at_us'
%% of another node's event is counted from that node's first event: clocks
%% are not compared).
-type flow() :: #{label := term(), messages := non_neg_integer(), quiet => boolean(),
                  nodes => [node()],
                  pairs := [{msgflow:endpoint(), msgflow:endpoint(), pos_integer()}],
                  processes := [msgflow:endpoint()], depth := non_neg_integer(),
                  duration_us := non_neg_integer(), events := [event()],
                  dropped := non_neg_integer(), labels := #{msgflow:endpoint() => binary()}}.
%% Every request at an entry point: `requests' followed (one call in
%% `sample'), `calls' counted, `messages' of all followed requests,
%% `per_request' their mean, `pairs' by endpoint label, busiest first,
%% `depth' the deepest chain seen on one node (a chain that goes on on
%% another node is counted there from 1; `depth_exact => false' when events past
%% `max_events' in an interval were not looked at), `running'.
-type summary() :: #{entry := mfa(), requests := non_neg_integer(),
                     calls := non_neg_integer(), messages := non_neg_integer(),
                     per_request := float(),
                     pairs := [{binary() | pid(), binary() | pid(), pos_integer()}],
                     depth := non_neg_integer(), depth_exact := boolean(),
                     sample := pos_integer(), running := boolean(),
                     overflow := non_neg_integer()}.

%% @doc The Flow of a follow/2 label from its counts (`pairs' by
%% `{Sender, Receiver}', `labels') and the events kept.
-spec flow(term(), map(), [msgflow_tracer:event()]) -> flow().
flow(Label, #{pairs := P, labels := Ls0}, Events) ->
    Pairs = msgflow_row:sorted_pairs(P),
    {Depths, _} = depths(Events, #{}),
    T0 = case Events of
             [] -> 0;
             _ -> lists:min([element(5, E) || E <- Events])
         end,
    Evs = [#{serial => {Prev, Cur}, from => From, to => To, depth => D, at_us => T - T0,
             kind => Kind, tag => Tag}
           || {{Prev, Cur, From, To, T, Kind, Tag}, D} <- Depths],
    Procs = lists:usort(lists:append([[S, R] || {S, R, _} <- Pairs])),
    Ls = lists:foldl(fun name/2, Ls0, Procs),
    Messages = lists:sum([N || {_, _, N} <- Pairs]),
    #{label => Label,
      messages => Messages,
      pairs => Pairs,
      processes => Procs,
      depth => lists:max([0 | [D || {_, D} <- Depths]]),
      duration_us => lists:max([0 | [element(5, E) - T0 || E <- Events]]),
      events => Evs,
      %% every message is counted; the events past the cap were not kept
      dropped => max(0, Messages - length(Events)),
      labels => maps:with(Procs, Ls)}.

%% @doc A follow/2 flow's counts (`pairs', `labels') with the other
%% nodes' parts added (`node', `pairs', `labels'): pairs summed (a send is
%% counted on its sender's node only), labels added, a process named as
%% its own node names it.
-spec merge_parts(map(), [map()]) -> map().
merge_parts(F0, Parts) ->
    lists:foldl(fun(#{node := PN, pairs := P, labels := Ls}, Acc = #{pairs := AP, labels := AL}) ->
                        Own = maps:filter(fun(K, _) -> msgflow_labels:node_of(K) =:= PN end, Ls),
                        Acc#{pairs := maps:fold(fun(K, V, M) ->
                                                        maps:update_with(K, fun(X) -> X + V end,
                                                                         V, M)
                                                end, AP, P),
                             labels := maps:merge(maps:merge(Ls, AL), Own)}
                end, F0, Parts).

%% @doc A summary with the other nodes' parts of the same entry: their pairs by
%% label summed in, their messages added, the deepest chain of all; the
%% calls and requests are where the pattern is.
-spec merge_summary(summary(), [summary()]) -> summary().
merge_summary(S, []) ->
    S;
merge_summary(S = #{pairs := P0, messages := M0, depth := D0, depth_exact := X0,
                    overflow := O0, requests := Rq}, Parts) ->
    Sum = lists:foldl(fun({A, B, N}, Acc) -> maps:update_with({A, B}, fun(X) -> X + N end,
                                                               N, Acc) end,
                      #{}, P0 ++ lists:append([P || #{pairs := P} <- Parts])),
    M = M0 + lists:sum([X || #{messages := X} <- Parts]),
    S#{pairs := msgflow_row:sorted_pairs(Sum),
       messages := M,
       per_request := case Rq of 0 -> 0.0; _ -> M / Rq end,
       depth := lists:max([D0 | [D || #{depth := D} <- Parts]]),
       depth_exact := X0 andalso lists:all(fun(#{depth_exact := X}) -> X end, Parts),
       overflow := O0 + lists:sum([O || #{overflow := O} <- Parts])}.


%% @doc An endpoint's label in Ls, read the first time the flow shows it (while it
%% is most likely alive).
-spec name(term(), #{term() => term()}) -> #{term() => term()}.
name(E, Ls) when is_map_key(E, Ls) -> Ls;
name(E, Ls) -> Ls#{E => msgflow_describe:label(E)}.

%% @doc The same for an entry's summary, where a local process that exited is
%% `(exited)': a pid would make one label per request.
-spec group_name(term(), #{term() => term()}) -> #{term() => term()}.
group_name(E, Ls) when is_map_key(E, Ls) -> Ls;
group_name(E, Ls) when is_pid(E), node(E) =:= node() ->
    Ls#{E => case is_process_alive(E) of
                 true -> msgflow_describe:label(E);
                 false -> <<"(exited)">>
             end};
group_name(E, Ls) when is_pid(E) ->
    %% another node's process: named where the summaries meet (flows/0),
    %% by the node it runs on when that is the one asking
    Ls#{E => E};
group_name(E, Ls) -> name(E, Ls).

%% @doc A summary's remaining pids (processes of other nodes) by their labels,
%% named here: this node's by group_name/2, others' as they print.
-spec name_summary(summary()) -> summary().
name_summary(S = #{pairs := P}) ->
    Name = fun(K) when is_pid(K), node(K) =:= node() ->
                   maps:get(K, group_name(K, #{}));
              (K) when is_pid(K) -> msgflow_describe:label(K);
              (K) -> K
           end,
    Sum = lists:foldl(fun({A, B, N}, Acc) ->
                              maps:update_with({Name(A), Name(B)}, fun(X) -> X + N end, N, Acc)
                      end, #{}, P),
    S#{pairs := msgflow_row:sorted_pairs(Sum)}.

%% @doc The depth of each event: 1 + that of the message its sender last
%% received in the flow (seq_trace sets a send's Prev to the serial of
%% that message; one sent to a name is found by its serial alone), else 1.  Events are taken in serial order, in which a
%% message always comes after the one that caused it (a process's serial
%% counter never falls behind a serial it received).  Known maps
%% `{Receiver, Serial}' to the depth of messages seen before; the result
%% has the events' own entries in place of the older ones.
-spec depths([msgflow_tracer:event()], #{{term(), non_neg_integer()} => pos_integer()}) ->
          {[{msgflow_tracer:event(), pos_integer()}],
           #{{term(), non_neg_integer()} => pos_integer()}}.
depths(Events, Known0) ->
    Sorted = lists:sort(fun(E1, E2) ->
                                {element(2, E1), element(5, E1)} =< {element(2, E2), element(5, E2)}
                        end, Events),
    {Out, _} = lists:mapfoldl(fun(Ev = {Prev, Cur, From, To, _, _, _}, K) ->
                                      D = parent_depth(From, Prev, K) + 1,
                                      {{Ev, D}, known(To, Cur, D, K)}
                              end, Known0, Sorted),
    New = lists:foldl(fun({{_, Cur, _, To, _, _, _}, D}, M) -> known(To, Cur, D, M) end, #{},
                      Out),
    {Out, case Events of [] -> Known0; _ -> New end}.

%% A message sent to a name ({Name, Node} on another node, an atom) is
%% known by its serial alone: its receiver's pid is not in the event.
known(To, Cur, D, K) when is_pid(To) -> K#{{To, Cur} => D};
known(To, Cur, D, K) when is_port(To) -> K#{{To, Cur} => D};
known(_Name, Cur, D, K) -> K#{{name, Cur} => D}.

parent_depth(From, Prev, K) ->
    case K of
        #{{From, Prev} := D} -> D;
        #{{name, Prev} := D} -> D;
        _ -> 0
    end.
