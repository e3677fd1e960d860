%%% @doc The `process' view: one process of this node, what it says of
%%% itself now and its busiest partners since start.  msgflow-top opens a
%%% row with it.
%%%
%%% Option `pid' (needed): a local pid, or its text `"<0.80.0>"'.  The
%%% value: `pid', `label', `alive', `message_queue_len' (messages),
%%% `memory' (bytes), `reductions', `current_function', `status' (each
%%% `undefined' once it exited), and its busiest partners both ways since
%%% start, `sends_to' and `receives_from', `[{Endpoint, Label, Messages}]'
%%% (at most 5 each), read from this node's counts; `wait' its mailbox's
%%% in the last window when it was one of the busiest receivers
%%% (msgflow_store_waits: `#{wait_ms, queue_len, growing}'), else
%%% `undefined'; `bytes_in' and `bytes_out', the bytes its messages copied
%%% since start in each way, from the pairs with sampled sizes.
-module(msgflow_process_view).
-behaviour(msgflow_view).

-export([options/0, check/1, scope/0, build/2, merge/3, text/3, json/2]).
-export_type([process/0]).

-type partner() :: {msgflow_rows:key(), binary(), pos_integer()}.
-type process() :: #{pid := pid(), label := binary(), alive := boolean(),
                     message_queue_len := non_neg_integer() | undefined,
                     memory := non_neg_integer() | undefined,
                     reductions := non_neg_integer() | undefined,
                     current_function := mfa() | undefined, status := atom(),
                     sends_to := [partner()], receives_from := [partner()],
                     wait := msgflow_store_waits:wait() | undefined,
                     bytes_in := float(), bytes_out := float()}.

%% @doc The options, their defaults and rules.
-spec options() -> msgflow_opts:schema().
options() ->
    #{pid => {none, pid_text}}.

%% @doc The pid is needed, and must be this node's.
-spec check(map()) -> {ok, map()} | msgflow_opts:error().
check(#{pid := P0} = Opts) ->
    P = if is_pid(P0) -> P0;
           true -> try list_to_pid(unicode:characters_to_list(P0)) catch error:badarg -> P0 end
        end,
    case is_pid(P) andalso node(P) =:= node() of
        true -> {ok, Opts#{pid := P}};
        false -> {error, {badopt, {pid, P0}, msgflow_opts:allowed(pid_text)}}
    end;
check(_) ->
    {error, {badopt, {pid, none}, msgflow_opts:allowed(pid_text)}}.

%% @doc Built here: a process of this node.
-spec scope() -> here.
scope() -> here.

%% @doc What the process says of itself now, and its busiest partners
%% (only its rows are read and labelled).
-spec build(msgflow_store:store(), map()) -> process().
build(Store, #{pid := P}) ->
    Info = case erlang:process_info(P, [message_queue_len, memory, reductions,
                                        current_function, status]) of
               undefined -> #{alive => false, message_queue_len => undefined,
                              memory => undefined, reductions => undefined,
                              current_function => undefined, status => undefined};
               L -> maps:put(alive, true, maps:from_list(L))
           end,
    V = #{rows := Rows} = msgflow_rows:build(Store, #{by => process, with_kinds => false, endpoint => P}),
    Lab = fun(K) -> msgflow_rows:display(V, K) end,
    Out = [{R, Lab(R), C} || #{sender := S, receiver := R, count := C} <- Rows, S =:= P],
    In = [{S, Lab(S), C} || #{sender := S, receiver := R, count := C} <- Rows, R =:= P],
    Bytes = fun(Which) -> lists:sum([B || Row = #{bytes := B} <- Rows, maps:get(Which, Row) =:= P]) end,
    Wait = case maps:get(windows, Store) of
               [] -> undefined;
               Ws -> maps:get(P, maps:get(waits, lists:last(Ws), #{}), undefined)
           end,
    Info#{pid => P, label => msgflow_describe:label(P),
          sends_to => lists:sublist(Out, 5), receives_from => lists:sublist(In, 5),
          wait => Wait, bytes_in => float(Bytes(receiver)), bytes_out => float(Bytes(sender))}.

%% @doc The one part.
-spec merge([process()], map(), msgflow_view:context()) -> process().
merge([P], _Opts, _Ctx) ->
    P.

%% @doc The process's label and pid, what it says of itself (queue in
%% messages, memory in bytes, reductions, current function, status), and
%% its busiest partners since start, to and from, with their messages.
-spec text(process(), map(), msgflow_view:area()) -> unicode:chardata().
text(P = #{pid := Pid, label := Label, alive := Alive}, _Opts, Area = #{width := Width}) ->
    E = msgflow_fmt:ellipsis(Area),
    Num = fun(undefined) -> "-"; (N) -> msgflow_fmt:int(N) end,
    Partners = fun(Title, Ps) ->
                       [Title, "\n",
                        case Ps of
                            [] -> "  (none)\n";
                            _ -> [["  ", msgflow_fmt:label_cell(L, max(20, min(40, Width - 14)), E), " ",
                                   msgflow_fmt:rcell(msgflow_fmt:int(C), 10), "\n"] || {_, L, C} <- Ps]
                        end]
               end,
    [io_lib:format("~ts ~s~s~n", [Label, msgflow_fmt:endpoint(Pid),
                                  case Alive of true -> ""; false -> " (exited)" end]),
     case Alive of
         true ->
             #{current_function := {M, F, A}} = P,
             io_lib:format("  queue ~s messages, memory ~s bytes, reductions ~s, ~s~n"
                           "  in ~ts~n",
                           [Num(maps:get(message_queue_len, P)), Num(maps:get(memory, P)),
                            Num(maps:get(reductions, P)), maps:get(status, P),
                            msgflow_fmt:mfa(M, F, A)]);
         false ->
             []
     end,
     io_lib:format("  mailbox wait ~s, bytes in ~s, out ~s (since start, sampled sizes)~n",
                   [case maps:get(wait, P, undefined) of
                        undefined -> "- (not one of the busiest receivers)";
                        #{growing := true} -> "growing all window";
                        #{wait_ms := W} when is_number(W) -> io_lib:format("~.1f ms", [float(W)]);
                        _ -> "-"
                    end,
                    msgflow_fmt:bytes(round(maps:get(bytes_in, P, 0.0))),
                    msgflow_fmt:bytes(round(maps:get(bytes_out, P, 0.0)))]),
     Partners("sends to (messages since start):", maps:get(sends_to, P)),
     Partners("receives from:", maps:get(receives_from, P))].

%% @doc The process as JSON.
-spec json(process(), map()) -> msgflow_view:json().
json(P = #{pid := Pid, label := Label, alive := Alive}, _Opts) ->
    Num = fun(undefined) -> null; (N) -> N end,
    Partners = fun(Ps) -> [#{<<"endpoint">> => msgflow_rows:key_text(K), <<"label">> => L,
                             <<"messages">> => C} || {K, L, C} <- Ps] end,
    #{<<"pid">> => msgflow_fmt:endpoint(Pid), <<"label">> => Label, <<"alive">> => Alive,
      <<"message_queue_len">> => Num(maps:get(message_queue_len, P)),
      <<"memory">> => Num(maps:get(memory, P)), <<"reductions">> => Num(maps:get(reductions, P)),
      <<"current_function">> => case maps:get(current_function, P) of
                                     {M, F, A} -> msgflow_fmt:mfa(M, F, A);
                                     _ -> null
                                 end,
      <<"status">> => case maps:get(status, P) of undefined -> null; S -> atom_to_binary(S) end,
      <<"sends_to">> => Partners(maps:get(sends_to, P)),
      <<"receives_from">> => Partners(maps:get(receives_from, P)),
      <<"wait_ms">> => case maps:get(wait, P, undefined) of
                           #{wait_ms := W} when is_number(W) -> W;
                           _ -> null
                       end,
      <<"growing">> => case maps:get(wait, P, undefined) of
                           #{growing := G} -> G;
                           _ -> false
                       end,
      <<"bytes_in">> => maps:get(bytes_in, P, 0.0), <<"bytes_out">> => maps:get(bytes_out, P, 0.0)}.
