%%% @doc The history's files (msgflow_history writes them, its readers
%%% read them): a directory of segments, each a file of windows, in the
%%% one format this module reads and writes.  Pure functions on files;
%%% any process.
%%%
%%% A segment is `<FirstAt>-<Level>-<Node>+<OsPid>@<Host>.mfh': FirstAt the end
%%% of its first window (system time, ms, 13 digits, so that names sort by
%%% time), Level 0 for windows as they closed, 1 for ten windows merged
%%% into one, 2 for a whole segment merged into one, Node the node whose
%%% windows it holds (the nodes of a cluster on one host may share a
%%% directory), OsPid and Host the OS process that wrote it and its host
%%% (two VMs of one node name, `nonode@nohost' say, may share a directory
%%% too: each deletes and downsamples only its own segments and those of this
%%% host's writers that are gone, mine/1).  A name without `+<OsPid>' (an
%%% older msgflow's) counts as a writer that is gone.  It is a run of frames
%%% `<<Size:32, Crc32:32, Payload:Size/binary>>', each payload the
%%% term_to_binary (compressed) of one window:
%%% ```
%%% #{v => 2, node => Node, run => StartedAt, n => FirstWindow,
%%%   at => EndMs, ms => TracedMs, scale => Scale,
%%%   ends => [{Index, Endpoint, Label, Module, Application}],
%%%   rows => [{SenderIndex, ReceiverIndex, Kind, Tag, Messages}],
%%%   marks => [{AtMs, Event, Verdict, Label, Subject}]}
%%% '''
%%% `marks' (only in a window that has some) are the bottlenecks that
%%% appeared or cleared since the window before (msgflow_alerts, through
%%% the writer): when (system ms), `appeared' or `cleared', the verdict,
%%% the root's label and its process or node as text, each a binary; a
%%% merged window holds the marks of those it merged.  A reader that
%%% does not know the key passes it over.
%%% `ends' are those the segment had not named before (a segment reads
%%% alone, from its first frame); Endpoint as the VM reported it (a pid,
%%% port, registered name or `{Name, Node}'; `alias' for the aliases of
%%% calls), Label, Module and Application as the views showed them then
%%% (msgflow_labels): its identity across restarts.  Kind and Tag are
%%% `none' with kinds off.  In version 2 every name (Node, a registered
%%% name and its node, Module, Application, Kind, Tag) is held as its
%%% UTF-8 binary, so that a VM that lacks those atoms reads the file with
%%% `safe'; version 1 (msgflow 0.1) held them as atoms.  Neither is
%%% read with new atoms (msgflow_etf): a name this VM has no atom for is
%%% read as its binary, which the views print as they print the atom.  A frame cut short (the node died while
%%% writing it) ends the segment: what came before it is read.  A frame
%%% whose bytes are damaged (its checksum fails, or it does not decode,
%%% or it would decompress to more than ?MAX_WINDOW_BYTES) is passed
%%% over: the frames after it read, less the rows that name an end only
%%% it named.
-module(msgflow_history_file).

-export([new_dict/0, encode/2, encode_all/1, read/1, list/2, drop_superseded/2, path/4, path/5, merge/2,
         write/2, write/3, mine/1, gone/1, writer/0]).
-export_type([window/0, end_id/0, segment/0, dict/0, mark/0]).

%% a window's term, decompressed, at most (bytes): past it, the frame is
%% damaged
-define(MAX_WINDOW_BYTES, 256 * 1024 * 1024).

%% An endpoint and its identity: {Endpoint, Label, Module, Application};
%% a name read from a file that this VM has no atom for is its binary.
-type end_id() :: {term(), binary(), atom() | binary(), atom() | binary()}.
%% A bottleneck's appearing or clearing, as the history keeps it: when
%% (system ms), `appeared' or `cleared', its verdict, its root's label
%% and its process (or node) as text.
-type mark() :: {integer(), binary(), binary(), binary(), binary()}.
%% One window (or several merged), its ends resolved.
-type window() :: #{node := node() | binary(), run := integer(), n := pos_integer(), at := integer(),
                    ms := non_neg_integer(), scale := number(),
                    rows := [{end_id(), end_id(), atom() | binary(), atom() | binary(), pos_integer()}],
                    marks => [mark()]}.
%% A segment file as list/1 finds it.
-type segment() :: #{file := file:filename(), first_at := integer(), level := 0..2,
                     node := node() | binary(), writer := {string(), string()} | none,
                     bytes := non_neg_integer()}.
%% The ends a segment named so far (the writer's, per segment).
-opaque dict() :: #{end_id() => non_neg_integer()}.

%% @doc A new segment's (empty) dictionary.
-spec new_dict() -> dict().
new_dict() -> #{}.

%% @doc One window as a frame of the segment whose ends so far are Dict,
%% and Dict with its new ends.
-spec encode(window(), dict()) -> {binary(), dict()}.
encode(W = #{rows := Rows}, Dict0) ->
    {Rows1, {Dict, New}} =
        lists:mapfoldl(fun({S, R, K, T, N}, Acc0) ->
                               {SI, Acc1} = index(S, Acc0),
                               {RI, Acc2} = index(R, Acc1),
                               {{SI, RI, K, T, N}, Acc2}
                       end, {Dict0, []}, Rows),
    Payload = term_to_binary((maps:with([run, n, at, ms, scale, marks], W))#{
                               v => 2, node => text(maps:get(node, W)),
                               rows => [{SI, RI, text(K), text(T), N} || {SI, RI, K, T, N} <- Rows1],
                               ends => [{I, text(E), L, text(M), text(A)}
                                        || {I, {E, L, M, A}} <- lists:reverse(New)]},
                             [{compressed, 6}]),
    {<<(byte_size(Payload)):32, (erlang:crc32(Payload)):32, Payload/binary>>, Dict}.

index(End, {D, New}) ->
    case D of
        #{End := I} -> {I, {D, New}};
        _ -> I = map_size(D), {I, {D#{End => I}, [{I, End} | New]}}
    end.

%% @doc The windows of a segment file that read, oldest first, and `ok'
%% (the whole file read), `{cut, Offset}' (a frame at Offset is cut
%% short: those before it are returned), or `{damaged, Offsets}' (the
%% frames at Offsets were passed over, and the last one too when the
%% file ends cut short); `{error, Reason}' when it cannot be read.
-spec read(file:filename()) ->
          {ok, [window()], ok | {cut, non_neg_integer()} | {damaged, [non_neg_integer()]}} | {error, term()}.
read(File) ->
    case file:read_file(File) of
        {ok, Bin} -> frames(Bin, 0, #{}, [], []);
        {error, _} = E -> E
    end.

frames(<<>>, _, _, Acc, Bad) ->
    {ok, lists:reverse(Acc), case Bad of [] -> ok; _ -> {damaged, lists:reverse(Bad)} end};
frames(<<Size:32, Crc:32, Payload:Size/binary, Rest/binary>>, Off, Ends0, Acc, Bad) ->
    case erlang:crc32(Payload) =:= Crc andalso
        (try window(Payload, Ends0) catch error:_ -> error end) of
        {ok, W, Ends} -> frames(Rest, Off + 8 + Size, Ends, [W | Acc], Bad);
        _ -> frames(Rest, Off + 8 + Size, Ends0, Acc, [Off | Bad])
    end;
frames(_, Off, _, Acc, []) ->
    {ok, lists:reverse(Acc), {cut, Off}};
frames(_, Off, _, Acc, Bad) ->
    {ok, lists:reverse(Acc), {damaged, lists:reverse([Off | Bad])}}.

window(Payload, Ends0) ->
    case msgflow_etf:decode(Payload, ?MAX_WINDOW_BYTES) of
        {ok, W = #{v := V, ends := New, rows := Rows}} when (V =:= 1 orelse V =:= 2),
                                                              is_list(New), is_list(Rows) ->
            Ends = lists:foldl(fun({I, E, L, M, A}, D) when is_binary(L) ->
                                       D#{I => {name(E), L, name(M), name(A)}}
                               end, Ends0, New),
            {ok, (maps:merge(marks(maps:get(marks, W, [])), maps:with([run, n, at, ms, scale], W)))#{
                   node => name(maps:get(node, W)),
                   rows => [{S, R, name(K), name(T), N} || {SI, RI, K, T, N} <- Rows,
                                                           is_integer(N) orelse error(badarg), N > 0,
                                                           N < 1 bsl 62 orelse error(badarg),
                                                           #{SI := S, RI := R} <- [Ends]]}, Ends};
        _ -> error
    end.

%% The marks a frame holds, those of the shape mark() (a damaged or
%% foreign term is passed over): `#{}' when none.
marks(Ms) when is_list(Ms) ->
    case [M || M = {At, E, V, L, S} <- Ms, is_integer(At), is_binary(E), is_binary(V), is_binary(L),
               is_binary(S)] of
        [] -> #{};
        Kept -> #{marks => Kept}
    end;
marks(_) ->
    #{}.

%% A name as a file holds it (version 2): its binary.
text(A) when is_atom(A) -> atom_to_binary(A);
text({N, Node}) when is_atom(N), is_atom(Node) -> {atom_to_binary(N), atom_to_binary(Node)};
text(T) -> T.

%% A name read from a file: the atom this VM has for it, else its binary
%% (no atom is made).
name(B) when is_binary(B) ->
    try binary_to_existing_atom(B) catch error:badarg -> B end;
name({N, Node}) when is_binary(N); is_binary(Node) -> {name(N), name(Node)};
name(T) -> T.

%% @doc The segments in Dir of the nodes Nodes (`all', or a list),
%% oldest first (files of other names are left alone); `[]' when Dir
%% does not exist.  With `all' a node is named by the atom of its name
%% when there is one, else by its name as a binary: no atom is made from
%% a file's name.  A segment found at two
%% levels (a downsampling cut short between writing the merged one and
%% deleting the other) is listed at the higher only: the merged file is
%% whole, since it is renamed into place once written.
-spec list(file:filename(), all | [node()]) -> [segment()].
list(Dir, Nodes) ->
    All = listed(Dir, Nodes),
    Top = lists:foldl(fun(#{first_at := A, node := N, writer := W, level := L}, M) ->
                              maps:update_with({A, N, W}, fun(X) -> max(X, L) end, L, M)
                      end, #{}, All),
    [S || S = #{first_at := A, node := N, writer := W, level := L} <- All,
          maps:get({A, N, W}, Top) =:= L].

%% @doc Node's segments list/2 leaves out (superseded by a merged one)
%% deleted.
-spec drop_superseded(file:filename(), node()) -> ok.
drop_superseded(Dir, Node) ->
    Listed = [F || #{file := F} <- list(Dir, [Node])],
    _ = [file:delete(F) || S = #{file := F} <- listed(Dir, [Node]), mine(S), not lists:member(F, Listed)],
    ok.

%% @doc Whether this VM may delete or downsample segment S: its own (written by
%% this OS process), or one whose writer is gone (no Erlang VM of that
%% process number runs on this host: none, an exited one not yet reaped,
%% or a number since reused by another program; or a name without a
%% writer).  Where this cannot be told (no /proc), only its own.
-spec mine(segment()) -> boolean().
mine(#{writer := none}) -> true;
mine(#{writer := {Pid, Host}}) ->
    Host =:= host() andalso (Pid =:= os:getpid() orelse gone(Pid)).

%% @doc Whether the OS process Pid (a decimal string) of this host is no
%% Erlang VM that runs (none, an exited one not yet reaped, or another
%% program); false where this cannot be told (no /proc).
-spec gone(string()) -> boolean().
gone(Pid) ->
    not running_vm(Pid).

%% @doc This VM's writer tag: its OS process and host.
-spec writer() -> {string(), string()}.
writer() -> {os:getpid(), host()}.

%% this host's name as segment names give it (letters, digits, `-', `.')
host() ->
    {ok, H} = inet:gethostname(),
    [C || C <- H, (C >= $a andalso C =< $z) orelse (C >= $A andalso C =< $Z)
                  orelse (C >= $0 andalso C =< $9) orelse C =:= $- orelse C =:= $.].

%% (the program /proc/PID/exe names: beam.smp, beam.emu...)
running_vm(Pid) ->
    case file:read_link_all("/proc/" ++ Pid ++ "/exe") of
        {ok, Exe} -> lists:prefix("beam", filename:basename(Exe));
        {error, enoent} -> not filelib:is_dir("/proc/self");
        {error, _} -> filelib:is_dir("/proc/" ++ Pid)
    end.

listed(Dir, Nodes) ->
    Names = case file:list_dir(Dir) of
                {ok, Ns} -> Ns;
                {error, _} -> []
            end,
    lists:sort(fun(#{first_at := A, level := LA}, #{first_at := B, level := LB}) ->
                       {A, LA} =< {B, LB}
               end,
               [#{file => F, first_at => At, level => L, node => N, writer => Writer, bytes => Bytes}
                || Name <- Names,
                   {match, [AtS, LS, NS, WS, HS]} <- [re:run(Name, "^([0-9]{13})-([0-2])-([^+]+)(?:\\+([0-9]+)@([A-Za-z0-9.-]*))?\\.mfh$",
                                                             [{capture, all_but_first, list}, unicode])],
                   Writer <- [case WS of "" -> none; _ -> {WS, HS} end],
                   N <- node_named(NS, Nodes),
                   At <- [list_to_integer(AtS)], L <- [list_to_integer(LS)],
                   F <- [filename:join(Dir, Name)],
                   {ok, #{size := Bytes}} <- [file_size(F)]]).

node_named(Name, all) ->
    try [list_to_existing_atom(Name)] catch error:_ -> [unicode:characters_to_binary(Name)] end;
node_named(Name, Nodes) ->
    [N || N <- Nodes, atom_to_list(N) =:= Name].

file_size(F) ->
    case file:read_file_info(F) of
        {ok, I} -> {ok, #{size => element(2, I)}};
        E -> E
    end.

%% @doc The path of Node's segment of level Level whose first window
%% ended at FirstAt, written by this OS process.
-spec path(file:filename(), integer(), 0..2, node()) -> file:filename().
path(Dir, FirstAt, Level, Node) ->
    path(Dir, FirstAt, Level, Node, writer()).

%% @doc path/4 of the segment a writer Writer (writer/0's, or `none' for
%% an older msgflow's name) wrote: a segment downsampled keeps its writer's
%% name, so that the merged file supersedes it even when the downsampling is
%% cut short.
-spec path(file:filename(), integer(), 0..2, node(), {string(), string()} | none) -> file:filename().
path(Dir, FirstAt, Level, Node, none) ->
    filename:join(Dir, lists:flatten(io_lib:format("~13..0b-~b-~s.mfh", [FirstAt, Level, Node])));
path(Dir, FirstAt, Level, Node, {Pid, Host}) ->
    filename:join(Dir, lists:flatten(io_lib:format("~13..0b-~b-~s+~s@~s.mfh",
                                                   [FirstAt, Level, Node, Pid, Host]))).

%% @doc Windows merged Factor into one, in order: each merged window has
%% the messages of its pair, kind and tag summed, the end (`at') of its
%% last, the first's number and the traced ms of all.  Windows of two
%% runs are never merged together.
-spec merge([window()], pos_integer()) -> [window()].
merge(Ws, Factor) ->
    [merge_one(Chunk) || Run <- by_run(Ws), Chunk <- chunks(Run, Factor)].

by_run([]) -> [];
by_run([#{run := R} | _] = Ws) ->
    {Same, Rest} = lists:splitwith(fun(#{run := R1}) -> R1 =:= R end, Ws),
    [Same | by_run(Rest)].

chunks([], _) -> [];
chunks(L, F) when length(L) =< F -> [L];
chunks(L, F) -> {A, B} = lists:split(F, L), [A | chunks(B, F)].

merge_one([W]) ->
    W;
merge_one(Ws = [First | _]) ->
    Sums = lists:foldl(fun(#{rows := Rows}, Acc) ->
                               lists:foldl(fun({S, R, K, T, N}, A) ->
                                                   maps:update_with({S, R, K, T}, fun(X) -> X + N end,
                                                                    N, A)
                                           end, Acc, Rows)
                       end, #{}, Ws),
    Merged = (maps:remove(marks, lists:last(Ws)))#{
               n => maps:get(n, First), ms => lists:sum([Ms || #{ms := Ms} <- Ws]),
               rows => [{S, R, K, T, N} || {{S, R, K, T}, N} <- maps:to_list(Sums)]},
    maps:merge(Merged, marks(lists:append([Ms || #{marks := Ms} <- Ws]))).

%% @doc Windows as a whole segment's frames.
-spec encode_all([window()]) -> binary().
encode_all(Ws) ->
    {Frames, _} = lists:mapfoldl(fun encode/2, new_dict(), Ws),
    iolist_to_binary(Frames).

%% @doc A segment's frames (encode_all/1) written as a new segment File,
%% whole or not at all (msgflow_file: through a file beside it renamed
%% over, so that a reader sees the old file or the new one).
-spec write(file:filename(), binary()) -> ok | {error, term()}.
write(File, Bin) ->
    write(File, Bin, #{}).

%% @doc write/2 with msgflow_file's options.
-spec write(file:filename(), binary(), msgflow_file:opts()) -> ok | {error, term()}.
write(File, Bin, Opts) ->
    case msgflow_file:write(File, Bin, Opts) of
        ok -> ok;
        {error, {Why, _}} -> {error, Why}
    end.
