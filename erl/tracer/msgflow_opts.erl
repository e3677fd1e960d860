%%% @doc The one checker of what users pass, with one error shape:
%%% <pre>
%%%   {error, {badopt, {Key, Value}, Allowed}}    a bad or unknown option
%%%   {error, {badarg, {Name, Value}, Allowed}}   a bad argument
%%% </pre>
%%% Allowed is a list: the atoms allowed, the known keys (for an unknown
%%% key), or texts such as `<<"an integer from 10 to 3600000 (ms)">>'.
%%% Options are a map or a keyword list (Elixir's `by: :name'; the first
%%% of a repeated key counts).  Each call that takes options owns their
%%% schema (`Key => {Default | none, Rule}'): start/1's is here
%%% (validate/1), a view's is its module's options/0 (msgflow_view), the
%%% others' are beside their code (follow/2, web/1, export/3, the live
%%% top); check/2 checks any of them.  Pure (it resolves no names and
%%% touches no process), but for warn_deprecated/2, which logs.
-module(msgflow_opts).
-export([system_ms/1, validate/1, deprecated/1, warn_deprecated/2, defaults/0, check/2, defaults/1, arg/3, allowed/1, to_map/1, schema/1]).

-export_type([opts/0, run_opts/0, procs/0, nodes/0, schema/0, rule/0, error/0]).

%% the pairs an option (`pairs') may list: a page's shown edges, say
-define(MAX_PAIRS_LISTED, 10000).

%% A run asks for at most a year (send_after/3 takes no more than about
%% 292,000 years, but nobody means more) and 10,000 kept windows (each
%% window close walks the kept ones: 10,000 every 10 ms keeps up, 100,000
%% did not).
-define(MAX_MS, 365 * 24 * 3600 * 1000).
-define(MAX_WINDOWS, 10000).
%% max_memory's default, 256 MiB: 1,000,000 pairs of one kind (240 bytes
%% a pair, tracer and store together: BENCHMARKS.md), far
%% more than the busiest node measured here holds (200,000 pairs for
%% 100,000 processes), and 3 % of a node of 8 GB
-define(MAX_MEMORY, 256 * 1024 * 1024).
%% history_bytes' default, 64 MiB: at a few hundred pairs with messages
%% a window, days of history; at 200,000 (1.5 MB a window), the last 40
%% windows or so (guides/history.md)
-define(HISTORY_BYTES, 64 * 1024 * 1024).

-type procs() :: all | new | existing | [pid() | atom()].
%% Where to count: this node, this node and every connected visible node
%% (and those that join), or a list.
-type nodes() :: local | all | [node()].
-type opts() :: #{procs := procs(),
                  interval := pos_integer(),
                  max_pairs := pos_integer(),
                  max_memory := pos_integer() | infinity,
                  kinds := boolean(),
                  max_kinds := pos_integer(),
                  call_sample := off | pos_integer(),
                  size_sample := off | pos_integer(),
                  call_timeout := pos_integer(),
                  duration := pos_integer() | infinity,
                  windows := pos_integer(),
                  sample := {pos_integer(), pos_integer()} | off,
                  trace_mode := auto | session | legacy,
                  nodes := nodes(),
                  on_node_error := abort | skip,
                  grace := pos_integer(),
                  detach := boolean(),
                  owner => pid()}.
%% What the collector runs with: start/1's options and, on a node a
%% cluster's coordinator started, `coordinator' (its pid: the run stops
%% `grace' ms after it goes, as after `owner') and `resume' (true when the
%% coordinator restarts a node that came back: it goes on with the run,
%% keeping its counts).  msgflow_cluster adds them; no user can.
-type run_opts() :: #{procs := procs(), interval := pos_integer(), atom() => term(),
                      coordinator => pid(), resume => boolean()}.
%% A call's options: Key => {Default, Rule}, `none' for no default.
-type schema() :: #{atom() => {term(), rule()}}.
%% What a value may be: one of some atoms, an integer in a range (with
%% its unit), a positive number, a boolean, a pid, an atom, or one of
%% several rules.
-type rule() :: {one_of, [atom()]} | {int, integer(), integer(), string()} | pos_number
              | boolean | map | pid | pair | pairs | pid_text | atom | text | procs | nodes | sample | kind | ip | time
              | {either, [rule()]} | {subset, [atom()]} | {list_of, rule(), pos_integer()}
              | {tagged, atom(), rule()} | {group, schema()}.
-type error() :: {error, {badopt | badarg, term(), list()}}.

%% @doc The options used where start/1 is given none:
%% all processes, a snapshot every 1000 ms, at most 2,000,000 pairs,
%% kinds of message told apart (at most 8 kinds and tags a pair), the
%% round trip of 1 in 64 gen:calls per scheduler thread measured
%% (unanswered after 5000 ms), no time limit, the last 60 windows kept,
%% no sampling, a trace session of its own where the VM has them (OTP
%% 27+; `trace_mode'), this node only (`nodes'), a node that cannot be
%% started fails the start (`on_node_error'), a node that lost its
%% coordinator, or a run its owner, stops counting after 10 s (`grace').
%% `owner' (no default) is a process whose end ends the run `grace' ms
%% later: it exits, or its node disconnects (a remote process, or
%% msgflow-top's C node).
-spec defaults() -> opts().
defaults() ->
    defaults(schema(start)).

%% @doc The defaults of a schema (keys without one, such as `owner', are
%% left out).
-spec defaults(schema()) -> map().
defaults(Schema) ->
    maps:from_list([{K, D} || {K, {D, _}} <- maps:to_list(Schema), D =/= none]).

%% @doc start/1's options checked, every default filled in: check(start's
%% schema, Opts).  Sampling re-applies `procs' at every traced slice,
%% which means nothing for `new': that combination is refused.
-spec validate(term()) -> {ok, opts()} | error().
validate(Opts0) ->
    case grouped(Opts0) of
        {ok, Opts} -> validate_flat(Opts);
        {error, _} = E -> E
    end.

validate_flat(Opts) ->
    case check(schema(start), Opts) of
        {ok, #{procs := new, sample := {_, _} = S}} ->
            {error, {badopt, {sample, S}, [off, <<"{Traced, Period} with procs all, existing "
                                                  "or a list (not new)">>]}};
        Result ->
            Result
    end.

%% The grouped form of the history's options, `history => #{dir => Dir,
%% max_bytes => Bytes, tiers => #{segment => Windows, tier0 => Segments,
%% tier1 => Segments}}', as the keys the run reads (`history',
%% `history_bytes', `history_segment', `history_whole', `history_tenths':
%% the form before 0.2, still taken, deprecated/1 names it).
grouped(Opts0) ->
    case to_map(Opts0) of
        {ok, Opts = #{history := [{_, _} | _] = H}} ->
            %% (Elixir's `history: [dir: ...]')
            case to_map(H) of
                {ok, M} -> grouped(Opts#{history => M});
                error -> {ok, Opts}
            end;
        {ok, #{history := H}} when is_map(H), not is_map_key(dir, H) ->
            {error, {badopt, {history, H}, [off, <<"a directory">>,
                                            <<"#{dir => Dir, max_bytes => Bytes, tiers => #{...}}">>]}};
        {ok, Opts = #{history := H}} when is_map(H) ->
            case [KV || KV = {K, _} <- lists:sort(maps:to_list(Opts)),
                        lists:member(K, [history_bytes, history_segment, history_whole, history_tenths])] of
                [] -> grouped_history(Opts, H);
                [KV | _] -> {error, {badopt, KV, [<<"not with history => #{...}, which holds it">>]}}
            end;
        {ok, Opts} ->
            {ok, Opts};
        error ->
            {error, {badopt, Opts0, [<<"a map">>, <<"a keyword list">>]}}
    end.

grouped_history(Opts, H) ->
    case check(schema(history), H) of
        {ok, #{dir := Dir, max_bytes := B, tiers := T}} ->
            {ok, #{segment := Seg, tier0 := T0, tier1 := T1}} = check(schema(tiers), T),
            {ok, Opts#{history => Dir, history_bytes => B, history_segment => Seg,
                       history_whole => T0, history_tenths => T1}};
        {error, _} = E ->
            E
    end.

%% @doc The options of Opts (start/1's) given in a form that goes in a
%% later release, each with the form to use instead (as text): the
%% history's flat keys (`history_bytes', `history_segment',
%% `history_whole', `history_tenths'), which `history => #{max_bytes,
%% tiers}' replaces.  What the caller logs; [] for none or for options
%% that are no map or keyword list.
-spec deprecated(term()) -> [{atom(), binary()}].
deprecated(Opts0) ->
    New = #{history_bytes => <<"history => #{dir => Dir, max_bytes => Bytes}">>,
            history_segment => <<"history => #{dir => Dir, tiers => #{segment => Windows}}">>,
            history_whole => <<"history => #{dir => Dir, tiers => #{tier0 => Segments}}">>,
            history_tenths => <<"history => #{dir => Dir, tiers => #{tier1 => Segments}}">>},
    case to_map(Opts0) of
        {ok, Opts} -> [{K, maps:get(K, New)} || K <- lists:sort(maps:keys(maps:with(maps:keys(New), Opts)))];
        error -> []
    end.

%% @doc Each of Deprecated (`{Key, FormToUseInstead}', deprecated/1's or
%% a view's) said once in the log, once a VM and (Where, Key), so that a
%% script that asks in a loop says it once.  The one thing this module
%% does besides checking: a `logger:notice/2'.
-spec warn_deprecated(atom(), [{atom(), binary()}]) -> ok.
warn_deprecated(Where, Deprecated) ->
    _ = [begin
             persistent_term:put({?MODULE, deprecated, Where, Key}, true),
             logger:notice("msgflow: the ~p option ~p is deprecated and goes in 0.3; "
                           "give ~ts instead", [Where, Key, New])
         end || {Key, New} <- Deprecated,
                not persistent_term:get({?MODULE, deprecated, Where, Key}, false)],
    ok.

%% @doc Options checked against a schema: `{ok, Map}' with the defaults
%% filled in, or the error for the first bad or unknown key (in key
%% order).
-spec check(schema(), term()) -> {ok, map()} | error().
check(Schema, Opts0) ->
    case to_map(Opts0) of
        {ok, Opts} ->
            case first_bad(lists:sort(maps:to_list(Opts)), Schema) of
                ok -> {ok, maps:merge(defaults(Schema), Opts)};
                {error, _} = E -> E
            end;
        error ->
            {error, {badopt, Opts0, [<<"a map">>, <<"a keyword list">>]}}
    end.

first_bad([], _) ->
    ok;
first_bad([{K, V} | Rest], Schema) ->
    case Schema of
        #{K := {_, {group, Inner}}} ->
            %% a map of options of its own: its first bad key, named
            case check(Inner, V) of
                {ok, _} -> first_bad(Rest, Schema);
                %% (an inner key or value named as check/2 names them)
                {error, {badopt, {IK, _}, _}} = E when (is_map(V) orelse is_list(V)), is_atom(IK) -> E;
                {error, _} -> {error, {badopt, {K, V}, allowed({group, Inner})}}
            end;
        #{K := {_, Rule}} ->
            case valid(Rule, V) of
                true -> first_bad(Rest, Schema);
                false -> {error, {badopt, {K, V}, allowed(Rule)}}
            end;
        _ ->
            {error, {badopt, {K, V}, lists:sort(maps:keys(Schema))}}
    end.

%% @doc `ok' when Value is allowed by Rule, else the badarg error naming
%% the argument.
-spec arg(atom(), term(), rule()) -> ok | error().
arg(Name, Value, Rule) ->
    case valid(Rule, Value) of
        true -> ok;
        false -> {error, {badarg, {Name, Value}, allowed(Rule)}}
    end.

%% @doc Options as a map: a map as it is, a keyword list (a proper list
%% of `{Atom, Value}') as a map with the first value of each key.
-spec to_map(term()) -> {ok, map()} | error.
to_map(M) when is_map(M) ->
    {ok, M};
to_map(L) when is_list(L) ->
    case proper(L) andalso lists:all(fun({K, _}) -> is_atom(K); (_) -> false end, L) of
        true -> {ok, maps:from_list(lists:reverse(L))};
        false -> error
    end;
to_map(_) ->
    error.

%% @doc start/1's schema: Key => {Default | none, Rule}.  A table, one line
%% per option; read, not run.
-spec schema(start | history | tiers) -> schema().
schema(history) ->
    %% `history => #{...}': the directory, the most its files take, and
    %% the downsampling tiers
    #{dir => {none, text},
      max_bytes => {?HISTORY_BYTES, {int, 65536, 1 bsl 50, "bytes"}},
      tiers => {#{}, {group, schema(tiers)}}};
schema(tiers) ->
    %% windows a segment holds; segments kept at tier 0 (the windows as
    %% they closed) and at tier 1 (ten windows merged into one); older
    %% ones are at tier 2 (a segment merged into one window)
    #{segment => {60, {int, 1, 100000, "windows"}},
      tier0 => {10, {int, 1, 100000, "segments"}},
      tier1 => {60, {int, 1, 100000, "segments"}}};
schema(start) ->
    #{procs => {all, procs},
      interval => {1000, {int, 10, 3600000, "ms"}},
      max_pairs => {2000000, {int, 1, 1 bsl 32, "pairs"}},
      %% bytes the store's tables and the tracer's take together, at most
      %% (msgflow_run:max_memory/0)
      max_memory => {?MAX_MEMORY, {either, [{one_of, [infinity]}, {int, 1, 1 bsl 50, "bytes"}]}},
      kinds => {true, boolean},
      max_kinds => {8, {int, 1, 1000, "kinds per pair"}},
      %% the round trip of 1 in call_sample gen:calls per scheduler thread
      call_sample => {64, {either, [{one_of, [off]}, {int, 1, 1 bsl 30, "calls"}]}},
      call_timeout => {5000, {int, 1, ?MAX_MS, "ms"}},
      %% the size of 1 in size_sample sends per scheduler thread
      size_sample => {64, {either, [{one_of, [off]}, {int, 1, 1 bsl 30, "sends"}]}},
      duration => {infinity, {either, [{one_of, [infinity]}, {int, 1, ?MAX_MS, "ms"}]}},
      windows => {60, {int, 1, ?MAX_WINDOWS, "windows"}},
      sample => {off, sample},
      trace_mode => {auto, {one_of, [auto, session, legacy]}},
      nodes => {local, nodes},
      on_node_error => {abort, {one_of, [abort, skip]}},
      grace => {10000, {int, 1, 3600000, "ms"}},
      owner => {none, pid},
      %% a run started from a remote shell outlives it (else it ends
      %% `grace' after the shell's node goes: msgflow_cluster)
      detach => {false, boolean},
      %% every window's messages kept on disk in this directory
      %% (msgflow_history), in at most history_bytes; segments of
      %% history_segment windows, the newest history_whole of them kept
      %% whole, the next history_tenths merged ten windows into one, older
      %% ones each into one
      %% (`history => #{dir, max_bytes, tiers}' is read into these keys:
      %% grouped/1)
      history => {off, {either, [{one_of, [off]}, text]}},
      history_bytes => {?HISTORY_BYTES, {int, 65536, 1 bsl 50, "bytes"}},
      history_segment => {60, {int, 1, 100000, "windows"}},
      history_whole => {10, {int, 1, 100000, "segments"}},
      history_tenths => {60, {int, 1, 100000, "segments"}}}.

valid({one_of, As}, V) -> lists:member(V, As);
valid({int, Min, Max, _}, V) -> is_integer(V) andalso V >= Min andalso V =< Max;
valid(pos_number, V) -> is_number(V) andalso V > 0;
valid(boolean, V) -> is_boolean(V);
valid(map, V) -> to_map(V) =/= error;
valid({group, Schema}, V) -> element(1, check(Schema, V)) =:= ok;
valid(pid, V) -> is_pid(V);
valid(pair, V) -> is_tuple(V) andalso tuple_size(V) =:= 2;
valid(pairs, L) -> is_list(L) andalso length(L) =< ?MAX_PAIRS_LISTED andalso lists:all(fun(V) -> valid(pair, V) end, L);
valid(pid_text, V) -> is_pid(V) orelse is_binary(V) orelse (is_list(V) andalso io_lib:printable_list(V));
valid(atom, V) -> is_atom(V);
valid(text, V) -> (is_binary(V) orelse (is_list(V) andalso io_lib:printable_unicode_list(V)))
                      andalso case unicode:characters_to_binary(V) of
                                  B when is_binary(B) -> B =/= <<>>;
                                  _ -> false
                              end;
valid(ip, V) -> (tuple_size_is(V, 4) orelse tuple_size_is(V, 8)) andalso inet:is_ip_address(V);
valid({either, Rules}, V) -> lists:any(fun(R) -> valid(R, V) end, Rules);
valid({list_of, Rule, Max}, V) ->
    is_list(V) andalso proper(V) andalso length(V) =< Max andalso lists:all(fun(X) -> valid(Rule, X) end, V);
valid({tagged, Tag, Rule}, V) -> is_tuple(V) andalso tuple_size(V) =:= 2 andalso element(1, V) =:= Tag
                                     andalso valid(Rule, element(2, V));
valid({subset, As}, V) ->
    is_list(V) andalso proper(V) andalso lists:all(fun(X) -> lists:member(X, As) end, V);
valid(procs, P) when P =:= all; P =:= new; P =:= existing -> true;
valid(procs, L) when is_list(L), L =/= [] ->
    proper(L) andalso
        lists:all(fun(X) -> (is_pid(X) andalso node(X) =:= node()) orelse is_atom(X) end, L)
        andalso length(L) =:= length(lists:usort(L));
valid(procs, _) -> false;
valid(sample, off) -> true;
valid(sample, {T, P}) ->
    is_integer(T) andalso is_integer(P) andalso T >= 1 andalso T < P andalso P =< 3600000;
valid(sample, _) -> false;
valid(nodes, N) when N =:= local; N =:= all -> true;
valid(nodes, L) when is_list(L) ->
    proper(L) andalso lists:all(fun is_atom/1, L) andalso length(L) =:= length(lists:usort(L));
valid(nodes, _) -> false;
valid(kind, {K, T}) -> lists:member(K, msgflow_tracer:kinds()) andalso is_atom(T);
valid(kind, K) -> lists:member(K, msgflow_tracer:kinds());
valid(time, V) -> system_ms(V) =/= error.

allowed_text(A) when is_binary(A) -> A;
allowed_text(A) -> io_lib:format("~0tp", [A]).

%% @doc What Rule allows, as the error names it.
-spec allowed(rule()) -> list().
allowed({one_of, As}) -> As;
allowed({int, Min, Max, Unit}) ->
    [iolist_to_binary(io_lib:format("an integer from ~b to ~b (~s)", [Min, Max, Unit]))];
allowed(pos_number) -> [<<"a number above 0">>];
allowed(boolean) -> [true, false];
allowed(map) -> [<<"a map">>, <<"a keyword list">>];
allowed({group, Schema}) -> [<<"a map or keyword list of">> | lists:sort(maps:keys(Schema))];
allowed(pid) -> [<<"a pid">>];
allowed(pid_text) -> [<<"a local pid, or its text: \"<0.80.0>\"">>];
allowed(pair) -> [<<"{Sender, Receiver}: pids, ports or names as top/1 shows them, or labels">>];
allowed(pairs) -> [iolist_to_binary(io_lib:format("a list of at most ~b {Sender, Receiver} pairs", [?MAX_PAIRS_LISTED]))];
allowed(atom) -> [<<"an atom">>];
allowed(text) -> [<<"a text: a binary or a string, not empty">>];
allowed(ip) -> [<<"an IP address tuple: {127,0,0,1} (loopback), {0,0,0,0} (every interface)">>];
allowed({either, Rules}) -> lists:append([allowed(R) || R <- Rules]);
allowed({list_of, Rule, Max}) ->
    [iolist_to_binary(io_lib:format("a list of at most ~b of: ~ts", [Max, lists:join(", ", [allowed_text(A) || A <- allowed(Rule)])]))];
allowed({tagged, Tag, Rule}) ->
    [iolist_to_binary(io_lib:format("{~ts, X}, X ~ts", [Tag, lists:join(" or ", [allowed_text(A) || A <- allowed(Rule)])]))];
allowed({subset, As}) -> [iolist_to_binary(["a list of: ", lists:join(", ", [atom_to_list(A) || A <- As])])];
allowed(procs) -> [all, new, existing, <<"a list of local pids and registered names, "
                                         "without repeats">>];
allowed(sample) -> [off, <<"{Traced, Period}: integers, 1 =< Traced < Period =< 3600000 (ms)">>];
allowed(nodes) -> [local, all, <<"a list of node names, without repeats">>];
allowed(kind) -> msgflow_tracer:kinds() ++ [<<"{Kind, Tag}: one of those and an atom">>];
allowed(time) -> [now, <<"system time in ms (erlang:system_time(millisecond))">>,
                  <<"an RFC 3339 text: \"2026-11-26T04:00:00Z\"">>,
                  <<"a local time: {{2026,11,26},{4,0,0}}">>,
                  <<"{ago, Seconds}">>].

%% @doc A wall-clock time as system time in ms (a view's `from' and
%% `to'): `now', ms, an RFC 3339 text, a local datetime, or `{ago,
%% Seconds}'; `error' for anything else.
-spec system_ms(term()) -> integer() | error.
system_ms(now) -> erlang:system_time(millisecond);
system_ms(Ms) when is_integer(Ms), Ms >= 0 -> Ms;
system_ms({ago, S}) when is_number(S), S >= 0 -> max(0, erlang:system_time(millisecond) - round(S * 1000));
system_ms({{_, _, _}, {_, _, _}} = DT) ->
    try calendar:local_time_to_universal_time_dst(DT) of
        [U | _] -> (calendar:datetime_to_gregorian_seconds(U) - 62167219200) * 1000;
        [] -> error
    catch error:_ -> error
    end;
system_ms(T) when is_binary(T); is_list(T) ->
    try calendar:rfc3339_to_system_time(unicode:characters_to_list(T), [{unit, millisecond}])
    catch error:_ -> error
    end;
system_ms(_) -> error.

tuple_size_is(V, N) -> is_tuple(V) andalso tuple_size(V) =:= N.

proper(L) ->
    try length(L) of
        _ -> true
    catch
        error:badarg -> false
    end.
