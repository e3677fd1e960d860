%%% @doc The `info' view: msgflow's own figures on this node, as they
%%% stand (no snapshot is taken for it): what it counted (`events',
%%% `overflow', `dead_letters', `rolled_up', `proc_events_dropped', in
%%% messages), what it holds (`pairs', `table_entries', `memory' of the
%%% NIF's tables and `store_memory' of the Erlang side's, in bytes), how it
%%% traces (`trace_mode', `skipped', `new_tracer', `sample', `allocator')
%%% and the run's options (`opts'), the map msgflow:info/0 documents.  It
%%% is what the web page's figures and `/metrics' read of msgflow itself,
%%% asked for through the query path like any view.  No options; there
%%% before the first start (`#{running => false}').
-module(msgflow_info_view).
-behaviour(msgflow_view).

-export([options/0, scope/0, store/0, build/2, merge/3, text/3, json/2]).

%% @doc No options.
-spec options() -> msgflow_opts:schema().
options() -> #{}.

%% @doc Built on the asking node: its own figures.
-spec scope() -> here.
scope() -> here.

%% @doc Reads no store.
-spec store() -> false.
store() -> false.

%% @doc The collector's figures as they stand, or `{error, {timeout,
%% msgflow_collector}}'.
-spec build(none, map()) -> map() | {error, term()}.
build(none, _Opts) ->
    msgflow_collector:info_as_is().

%% @doc The one part.
-spec merge([map() | {error, term()}], map(), msgflow_view:context()) -> map() | {error, term()}.
merge([Info], _Opts, _Ctx) ->
    Info.

%% @doc A line per figure, in key order: times (`started_at',
%% `stopped_at') in RFC 3339, numbers with thousands separators, text as
%% it is, anything else as Erlang writes it, cut to the width.
-spec text(map(), map(), msgflow_view:area()) -> unicode:chardata().
text(Info, _Opts, Area = #{width := Width}) ->
    E = msgflow_fmt:ellipsis(Area),
    KeyW = lists:max([0 | [string:length(atom_to_list(K)) || K <- maps:keys(Info)]]),
    ["msgflow's own figures on ", atom_to_list(node()), "\n",
     [["  ", msgflow_fmt:cell(atom_to_list(K), KeyW, E), "  ",
       msgflow_fmt:cell(shown(K, V), max(10, Width - KeyW - 4), E), "\n"]
      || {K, V} <- lists:sort(maps:to_list(Info))]].

shown(K, Ms) when (K =:= started_at orelse K =:= stopped_at), is_integer(Ms) ->
    calendar:system_time_to_rfc3339(Ms, [{unit, millisecond}]);
shown(_, N) when is_integer(N) -> msgflow_fmt:int(N);
shown(_, B) when is_binary(B) -> B;
shown(_, V) -> io_lib:format("~0tp", [V]).

%% @doc The figures as JSON: numbers and booleans as they are, atoms as
%% strings, `undefined' as null, maps (the options) as objects, anything
%% else as Erlang writes it.
-spec json(map(), map()) -> msgflow_view:json().
json(Info, _Opts) ->
    value(Info).

value(M) when is_map(M) -> maps:from_list([{key(K), value(V)} || {K, V} <- maps:to_list(M)]);
value(V) when is_number(V); is_boolean(V) -> V;
value(undefined) -> null;
value(A) when is_atom(A) -> atom_to_binary(A);
value(B) when is_binary(B) -> B;
value(V) -> iolist_to_binary(io_lib:format("~0tp", [V])).

key(K) when is_atom(K) -> atom_to_binary(K);
key(K) -> iolist_to_binary(io_lib:format("~0tp", [K])).
