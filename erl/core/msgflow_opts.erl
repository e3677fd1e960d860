%%% @doc Checks and normalises the options of msgflow:start/1.  Pure: it
%%% resolves no names and touches no process (the collector does that).
-module(msgflow_opts).
-export([validate/1, defaults/0]).

-export_type([opts/0, procs/0, nodes/0]).

%% A run asks for at most a year (send_after/3 takes no more than about
%% 292,000 years, but nobody means more) and 10,000 kept windows (each
%% window close walks the kept ones: 10,000 every 10 ms keeps up, 100,000
%% did not).
-define(MAX_DURATION, 365 * 24 * 3600 * 1000).
-define(MAX_WINDOWS, 10000).

-type procs() :: all | new | existing | [pid() | atom()].
%% Where to count: this node, this node and every connected visible node
%% (and those that join), or a list.
-type nodes() :: local | all | [node()].
-type opts() :: #{procs := procs(),
                  interval := pos_integer(),
                  max_pairs := pos_integer(),
                  duration := pos_integer() | infinity,
                  windows := pos_integer(),
                  sample := {pos_integer(), pos_integer()} | off,
                  trace_mode := auto | session | legacy,
                  nodes := nodes(),
                  on_node_error := abort | skip,
                  grace := pos_integer(),
                  owner => pid(),
                  resume => boolean(),
                  coordinator => pid()}.

%% @doc The options used where start/1 is given none:
%% all processes, a snapshot every 1000 ms, at most 1,000,000 pairs,
%% no time limit, the last 60 windows kept, no sampling, a trace session
%% of its own where the VM has them (OTP 27+; `trace_mode'), this node
%% only (`nodes'), a node that cannot be started fails the start
%% (`on_node_error'), a node that lost its coordinator stops counting
%% after 10 s (`grace').  `owner' (no default) is a process whose end
%% ends the run `grace' ms later: it exits, or its node disconnects (a
%% remote process, or msgflow-top's C node).  `coordinator' (the pid of
%% the cluster process that started this node's msgflow) is set by
%% msgflow_cluster only, and works the same way; so is `resume' (a node
%% it restarts after a disconnect goes on with the run, keeping its
%% counts).
-spec defaults() -> opts().
defaults() ->
    #{procs => all, interval => 1000, max_pairs => 1000000,
      duration => infinity, windows => 60, sample => off, trace_mode => auto,
      nodes => local, on_node_error => abort, grace => 10000}.

%% @doc `{ok, Opts}' with every default filled in, or
%% `{error, {badopt, {Key, Value}}}' for the first bad or unknown option
%% (in key order), or `{error, {badopt, Opts}}' when Opts is not a map.
-spec validate(term()) -> {ok, opts()} | {error, {badopt, term()}}.
%% Sampling re-applies `procs' at every traced slice, which means nothing
%% for `new': that combination is refused as `{badopt, {sample, Sample}}'.
validate(Opts) when is_map(Opts) ->
    case check(lists:sort(maps:to_list(Opts)), defaults()) of
        {ok, #{procs := new, sample := {_, _} = S}} -> {error, {badopt, {sample, S}}};
        Result -> Result
    end;
validate(Other) ->
    {error, {badopt, Other}}.

check([], Acc) ->
    {ok, Acc};
check([{Key, Value} | Rest], Acc) ->
    case valid(Key, Value) of
        true -> check(Rest, Acc#{Key => Value});
        false -> {error, {badopt, {Key, Value}}}
    end.

valid(procs, P) when P =:= all; P =:= new; P =:= existing -> true;
valid(procs, L) when is_list(L), L =/= [] ->
    proper(L) andalso
        lists:all(fun(X) -> (is_pid(X) andalso node(X) =:= node()) orelse is_atom(X) end, L)
        andalso length(L) =:= length(lists:usort(L));
valid(interval, N) -> is_integer(N) andalso N >= 10 andalso N =< 3600000;
valid(max_pairs, N) -> is_integer(N) andalso N >= 1 andalso N =< 1 bsl 32;
valid(duration, infinity) -> true;
valid(duration, N) -> is_integer(N) andalso N >= 1 andalso N =< ?MAX_DURATION;
valid(windows, N) -> is_integer(N) andalso N >= 1 andalso N =< ?MAX_WINDOWS;
valid(sample, off) -> true;
valid(sample, {T, P}) ->
    is_integer(T) andalso is_integer(P) andalso T >= 1 andalso T < P andalso P =< 3600000;
valid(trace_mode, M) -> M =:= auto orelse M =:= session orelse M =:= legacy;
valid(nodes, N) when N =:= local; N =:= all -> true;
valid(nodes, L) when is_list(L) ->
    proper(L) andalso lists:all(fun is_atom/1, L) andalso length(L) =:= length(lists:usort(L));
valid(on_node_error, E) -> E =:= abort orelse E =:= skip;
valid(grace, N) -> is_integer(N) andalso N >= 1 andalso N =< 3600000;
valid(coordinator, P) -> is_pid(P);
valid(owner, P) -> is_pid(P);
valid(resume, B) -> is_boolean(B);
valid(_, _) -> false.

proper(L) ->
    try length(L) of
        _ -> true
    catch
        error:badarg -> false
    end.
