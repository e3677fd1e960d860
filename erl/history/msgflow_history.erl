%%% @doc The history's writer: with `history => Dir' (start/1's option)
%%% every closed window's messages, by pair, kind and tag, are written to
%%% segment files in Dir (msgflow_history_file), where they outlive the
%%% run, reset/0 and the node.  One process per run, started by the
%%% collector, which hands it each window's log (msgflow_store:take_log/1,
%%% an ETS table given away) and goes on: the writing, the labels' lookup,
%%% the downsampling and a slow or full disk are this process's, never the
%%% collector's.  A writer that falls behind by ?MAX_BEHIND windows has
%%% the next ones dropped by the collector (counted in info()).
%%%
%%% The schedule (options of start/1, defaults at the default 1 s
%%% window): a segment holds `history_segment' windows (60: a minute);
%%% the newest `history_whole' segments (10: ten minutes) are kept as the
%%% windows closed; the next `history_tenths' segments (60: an hour) have
%%% each ten windows merged into one; older ones are each merged into one
%%% window.  Whatever the schedule, the files take at most
%%% `history_bytes' (64 MiB): past it the oldest segments are deleted,
%%% and a segment is closed early once it holds an eighth of it.
%%% Segments of this node already in Dir (an earlier run, before a
%%% restart) count in the budget and are downsampled alike; those of other
%%% nodes (a cluster's, on one host) are theirs.  The temporary files a
%%% writer killed in the middle of a write left are deleted at the start
%%% of a run once 10 minutes old (a younger one may be a live writer's, in
%%% another PID namespace), and count in the budget until then.
%%%
%%% A write that fails (a full disk, a file size limit, a directory
%%% removed) stops the history: counting goes on, and info()'s `history'
%%% says why.
-module(msgflow_history).
-include_lib("kernel/include/file.hrl").

-export([start/1, window/3, mark/2, close/1, behind/1]).
-export([init/2]).
-export_type([meta/0]).

%% windows a writer may be behind before the next are dropped
-define(MAX_BEHIND, 16).
%% ms a new writer has to read its directory and say it is ready
-define(READY_MS, 10000).

%% What the collector says of a window: msgflow_store:take_log/1's.
-type meta() :: #{n := pos_integer(), at := integer(), ms := non_neg_integer(),
                  node := node(), run := integer(), scale := number(),
                  label_ids := ets:tid()}.

%% the marks (bottlenecks appeared or cleared) the writer's report lists,
%% newest
-define(MAX_MARKS, 100).

-record(w, {
    dir :: file:filename(),
    collector :: pid(),
    budget :: pos_integer(),            %% history_bytes
    per_segment :: pos_integer(),       %% history_segment
    whole :: pos_integer(),             %% history_whole
    tenths :: pos_integer(),            %% history_tenths
    done = [] :: [msgflow_history_file:segment()],     %% closed, oldest first
    %% the segment being written: its file, open for appending
    open = none :: none | #{file := file:filename(), fd := file:io_device(),
                            first_at := integer(), windows := non_neg_integer(),
                            bytes := non_neg_integer(), dict := msgflow_history_file:dict()},
    written = 0 :: non_neg_integer(),   %% windows written by this run
    work_us = 0 :: non_neg_integer(),   %% µs spent labelling, writing, downsampling
    too_large = 0 :: non_neg_integer(), %% windows left out: alone over half the budget
    %% segments with damaged frames found while downsampling: kept beside
    %% as `<name>.damaged' (what read went on), never deleted
    damaged = 0 :: non_neg_integer(),
    %% bytes of the temporaries a writer that died a moment ago left
    %% (clean_temps/1 deletes them at a later start): in the budget
    left = 0 :: non_neg_integer(),
    %% marks given since the last window written (it holds them), and
    %% those of this run written, newest first, at most ?MAX_MARKS
    pending = [] :: [msgflow_history_file:mark()],
    marks = [] :: [msgflow_history_file:mark()]
}).

%% @doc A writer for a run with these options (msgflow_opts:run_opts(),
%% `history' a directory), linked to no one, monitored by the caller (the
%% collector), to which it reports `{msgflow_history, Pid, Status}'.
%% `{error, {history, Dir, Reason}}' when Dir cannot be made or written.
-spec start(msgflow_opts:run_opts()) -> {ok, pid(), reference()} | {error, term()}.
start(Opts = #{history := Dir0}) ->
    Dir = unicode:characters_to_list(Dir0),
    Probe = filename:join(Dir, msgflow_file:temp_prefix() ++ os:getpid() ++ "-probe"),
    case private_dir(Dir) of
        ok ->
            case msgflow_file:write(Probe, <<>>) of
                ok ->
                    _ = file:delete(Probe),
                    ok = clean_temps(Dir),
                    {Pid, Ref} = proc_lib:spawn_opt(?MODULE, init,
                                                    [Dir, Opts#{collector => self()}], [monitor]),
                    %% registered before tracing starts, so that the run
                    %% knows it for its own (msgflow_flags:own_pids/0)
                    receive
                        {msgflow_history, Pid, ready} -> {ok, Pid, Ref};
                        {'DOWN', Ref, process, Pid, Why} -> {error, {history, Dir0, Why}}
                    after ?READY_MS ->
                        exit(Pid, kill),
                        erlang:demonitor(Ref, [flush]),
                        {error, {history, Dir0, timeout}}
                    end;
                {error, Why} ->
                    {error, {history, Dir0, Why}}
            end;
        {error, Why} ->
            {error, {history, Dir0, Why}}
    end.

%% @doc The window log Log (its owner's, the caller's) given to Writer
%% with what the collector knows of the window; `gone' when Writer is
%% no more (Log is still the caller's).
-spec window(pid(), ets:tid(), meta()) -> ok | gone.
window(Writer, Log, Meta) ->
    try ets:give_away(Log, Writer, {window, Meta}) of
        true -> ok
    catch
        error:badarg -> gone
    end.

%% @doc Whether Writer is ?MAX_BEHIND windows behind (the next is
%% dropped).
-spec behind(pid()) -> boolean().
behind(Writer) ->
    case process_info(Writer, message_queue_len) of
        {message_queue_len, L} -> L >= ?MAX_BEHIND;
        undefined -> true
    end.

%% @doc A bottleneck appeared or cleared (msgflow_alerts, through the
%% collector): kept in the next window written (msgflow_history_file's
%% `marks') and listed in the writer's report (`marks', newest first, at
%% most ?MAX_MARKS, those in the segments kept), which info()'s `history'
%% gives and the web page's time slider marks.  Event, verdict and label
%% are the report's (an atom or text); Subject the root's pid, node, or
%% the processes or labels of a cycle.
-spec mark(pid(), #{at := integer(), event := atom(), verdict := atom(), label := binary(),
                    subject := term()}) -> ok.
mark(Writer, #{at := At, event := E, verdict := V, label := L, subject := S}) ->
    Writer ! {mark, {At, atom_to_binary(E), atom_to_binary(V), iolist_to_binary(L),
                     subject_text(S)}},
    ok.

subject_text(S) when is_pid(S) -> list_to_binary(pid_to_list(S));
subject_text(S) when is_atom(S) -> atom_to_binary(S);
subject_text(S) when is_binary(S) -> S;
subject_text(Ps) when is_list(Ps) -> iolist_to_binary(lists:join(<<" ">>, [subject_text(P) || P <- Ps]));
subject_text(S) -> iolist_to_binary(io_lib:format("~0p", [S])).

%% @doc The writer ends once it wrote the windows it was given.
-spec close(pid()) -> ok.
close(Writer) ->
    Writer ! close,
    ok.

%%% The writer

%% @private
-spec init(file:filename(), map()) -> no_return().
init(Dir, Opts = #{collector := C}) ->
    ok = msgflow_flags:untrace_self(),
    %% a collector that dies takes its writer with it (the windows given
    %% so far are written first)
    _ = erlang:monitor(process, C),
    Mine = "-" ++ atom_to_list(node()) ++ ".mfh.tmp",
    _ = [file:delete(filename:join(Dir, F)) || {ok, Fs} <- [file:list_dir(Dir)], F <- Fs,
                                               lists:suffix(Mine, F)],
    %% a downsampling cut short leaves a segment at two levels: the lower goes
    ok = msgflow_history_file:drop_superseded(Dir, node()),
    W = #w{dir = Dir, collector = C, budget = maps:get(history_bytes, Opts),
           per_segment = maps:get(history_segment, Opts), whole = maps:get(history_whole, Opts),
           tenths = maps:get(history_tenths, Opts), left = temp_bytes(Dir),
           %% this node's segments this VM may delete and downsample: not those
           %% of another VM of the same node name writing here now
           done = [S || S <- msgflow_history_file:list(Dir, [node()]), msgflow_history_file:mine(S)]},
    %% one writer a node: msgflow's own by its name (a writer killed a
    %% moment ago may hold it still: then by its pid, msgflow_run:own/2)
    try register(?MODULE, self()) catch error:badarg -> ok end,
    C ! {msgflow_history, self(), ready},
    loop(report(W)).

loop(W) ->
    receive
        {'ETS-TRANSFER', Log, _, {window, Meta}} ->
            T0 = erlang:monotonic_time(microsecond),
            Rows = rows(Log, maps:get(label_ids, Meta)),
            ets:delete(Log),
            Win = (maps:with([node, run, n, at, ms, scale], Meta))#{rows => Rows},
            W1 = write(with_marks(Win, W#w.pending), W#w{pending = []}),
            loop(report(W1#w{work_us = W1#w.work_us + erlang:monotonic_time(microsecond) - T0}));
        {mark, M} ->
            loop(report(W#w{pending = [M | W#w.pending],
                            marks = lists:sublist([M | W#w.marks], ?MAX_MARKS)}));
        close ->
            _ = close_open(W),
            exit(normal);
        {'DOWN', _, process, C, _} when C =:= W#w.collector ->
            _ = close_open(W),
            exit(normal)
    end.

with_marks(Win, []) -> Win;
with_marks(Win, Pending) -> Win#{marks => lists:reverse(Pending)}.

%% The log's rows with their ends' identities: the label of each label
%% id as it stands now (a window later at most than it was counted).
rows(Log, LabelIds) ->
    {Rows, _} = ets:foldl(
                  fun({{Sn, R, {LS, _}, {LR, _}, K, T}, N}, {Acc, Ids0}) ->
                          {SE, Ids1} = end_id(Sn, LS, LabelIds, Ids0),
                          {RE, Ids2} = end_id(R, LR, LabelIds, Ids1),
                          {[{SE, RE, K, T, N} | Acc], Ids2}
                  end, {[], #{}}, Log),
    Rows.

end_id(E, Id, LabelIds, Ids) ->
    {L, M, A} = Triple = case Ids of
                             #{Id := T} -> T;
                             _ -> case ets:lookup(LabelIds, Id) of
                                      [{_, L0, M0, A0}] -> {L0, M0, A0};
                                      [] -> {msgflow_fmt:endpoint(E), undefined, undefined}
                                  end
                         end,
    {{endpoint(E), L, M, A}, Ids#{Id => Triple}}.

%% an alias is used for one call: the aliases of a label are one end
endpoint(E) when is_reference(E) -> alias;
endpoint(E) -> E.

%% Win appended to the open segment (opened when none is); the segment
%% closed when full, then downsampling and the budget.  A write that fails
%% stops the writer.
write(Win = #{at := At}, W0) ->
    W1 = #w{open = #{dict := D0}} = open_segment(At, W0),
    {Frame, D1} = msgflow_history_file:encode(Win, D0),
    case byte_size(Frame) > W1#w.budget div 2 of
        true ->
            %% a window alone near the budget: left out, and said so
            W1#w{too_large = W1#w.too_large + 1};
        false ->
            case make_room(byte_size(Frame), W1) of
                W2 = #w{open = #{}} ->
                    append(Frame, D1, W2);
                W2 ->
                    %% the open segment went to make room: the window is
                    %% the first of a new one, its ends named anew (a
                    %% longer frame: room is made for it again, so that the
                    %% files never pass the budget; once every other
                    %% segment has gone, it fits)
                    write(Win, W2)
            end
    end.

append(Frame, D1, W = #w{open = Seg = #{fd := Fd}}) ->
    case file:write(Fd, Frame) of
        ok ->
            Seg1 = Seg#{dict := D1, windows := maps:get(windows, Seg) + 1,
                        bytes := maps:get(bytes, Seg) + byte_size(Frame)},
            W1 = W#w{open = Seg1, written = W#w.written + 1},
            case maps:get(windows, Seg1) >= W#w.per_segment
                orelse maps:get(bytes, Seg1) >= W#w.budget div 8 of
                true -> downsample(close_open(W1));
                false -> W1
            end;
        {error, Why} ->
            stop(Why, maps:get(file, Seg), W)
    end.

%% Dir made (its parents as needed) with mode 0700 when it does not
%% exist; one that exists is left as it is.
private_dir(Dir) ->
    case filelib:ensure_dir(Dir) of
        ok ->
            case file:make_dir(Dir) of
                ok -> file:change_mode(Dir, 8#700);
                {error, eexist} -> ok;
                {error, _} = E -> E
            end;
        {error, _} = E -> E
    end.

%% The temporary files and directories a writer that died left in Dir
%% (msgflow_file's, named by its OS process: those of a process that is
%% no more), deleted; none where this system cannot tell (no /proc).
clean_temps(Dir) ->
    _ = [del_temp(Path) || Path <- dead_temps(Dir)],
    ok.

%% The bytes of what clean_temps/1 left of dead writers (a temporary left
%% a moment ago): they count in the budget while they stay.
temp_bytes(Dir) ->
    lists:sum([B || Path <- dead_temps(Dir), B <- [bytes(Path), bytes(filename:join(Path, "file"))]]).

bytes(Path) ->
    case file:read_link_info(Path) of
        {ok, #file_info{type = regular, size = B}} -> B;
        _ -> 0
    end.

dead_temps(Dir) ->
    Prefix = msgflow_file:temp_prefix(),
    case {filelib:is_dir("/proc/self"), file:list_dir(Dir)} of
        {true, {ok, Names}} ->
            [filename:join(Dir, N)
             || N <- Names, lists:prefix(Prefix, N),
                [Pid | _] <- [string:split(lists:nthtail(length(Prefix), N), "-")],
                Pid =/= "", lists:all(fun(C) -> C >= $0 andalso C =< $9 end, Pid),
                Pid =/= os:getpid(), msgflow_history_file:gone(Pid)];
        _ ->
            []
    end.

%% (never through a link: a link itself is deleted, a directory only of
%% its one `file', msgflow_file's; only one left 10 minutes ago or more,
%% where a writer's temporary lives for a moment)
del_temp(Path) ->
    Old = erlang:system_time(second) - 600,
    case file:read_link_info(Path, [{time, posix}]) of
        {ok, #file_info{mtime = T}} when T > Old ->
            ok;
        {ok, #file_info{type = directory}} ->
            _ = file:delete(filename:join(Path, "file")),
            file:del_dir(Path);
        {ok, #file_info{}} ->
            file:delete(Path);
        {error, _} ->
            ok
    end.

open_segment(_, W = #w{open = #{}}) ->
    W;
open_segment(At, W = #w{dir = Dir}) ->
    File = msgflow_history_file:path(Dir, At, 0, node()),
    %% made empty and private first (0600, msgflow_file), then appended to
    %% (never through a link)
    Regular = case file:read_link_info(File) of
                  {ok, #file_info{type = regular}} -> true;
                  _ -> false
              end,
    case Regular orelse msgflow_file:write(File, <<>>) =:= ok of
        true -> open_append(File, At, W);
        false -> stop(eacces, File, W)
    end.

open_append(File, At, W = #w{}) ->
    case file:open(File, [append, raw, binary]) of
        {ok, Fd} ->
            W#w{open = #{file => File, fd => Fd, first_at => At, windows => 0, bytes => 0,
                         dict => msgflow_history_file:new_dict()}};
        {error, Why} ->
            stop(Why, File, W)
    end.

close_open(W = #w{open = none}) ->
    W;
close_open(W = #w{open = #{file := F, fd := Fd, first_at := At, bytes := B}, done = Done}) ->
    _ = file:close(Fd),
    W#w{open = none, done = Done ++ [#{file => F, first_at => At, level => 0, node => node(),
                                       writer => msgflow_history_file:writer(), bytes => B}]}.

%% Segments past the schedule merged: the level-0 ones older than the
%% newest `whole' ten windows into one, the level-1 ones older than the
%% newest `tenths' each into one window.
downsample(W = #w{done = Done}) ->
    W1 = downsample_tier(0, W#w.whole, 10, W#w{done = Done}),
    downsample_tier(1, W1#w.tenths, infinity, W1).

downsample_tier(Level, Keep, Factor, W = #w{done = Done, dir = Dir}) ->
    Of = [S || S = #{level := L} <- Done, L =:= Level],
    Old = lists:sublist(Of, max(0, length(Of) - Keep)),
    lists:foldl(
      fun(S = #{file := F, first_at := At, writer := Writer}, Acc = #w{done = D}) ->
              case msgflow_history_file:read(F) of
                  {ok, Ws, Status} ->
                      Merged = msgflow_history_file:merge(Ws, case Factor of
                                                                  infinity -> max(1, length(Ws));
                                                                  _ -> Factor
                                                              end),
                      New = msgflow_history_file:path(Dir, At, Level + 1, node(), Writer),
                      Bin = msgflow_history_file:encode_all(Merged),
                      %% room for the merged file beside the old one
                      Acc1 = #w{done = D1} = make_room(byte_size(Bin), Acc),
                      case lists:member(S, D1) andalso
                          msgflow_history_file:write(New, Bin, #{before_rename => hook()}) of
                          false ->
                              %% deleted to make room
                              Acc1;
                          ok ->
                              Acc2 = case Status of
                                         {damaged, _} ->
                                             %% what did not read is kept, aside
                                             _ = file:rename(F, F ++ ".damaged"),
                                             Acc1#w{damaged = Acc1#w.damaged + 1};
                                         _ ->
                                             _ = file:delete(F),
                                             Acc1
                                     end,
                              Acc2#w{done = replace(S, #{file => New, first_at => At,
                                                         level => Level + 1, node => node(),
                                                         writer => Writer,
                                                         bytes => byte_size(Bin)}, D1)};
                          {error, Why} ->
                              stop(Why, New, Acc1)
                      end;
                  {error, enoent} ->
                      %% gone (deleted by hand): forgotten
                      Acc#w{done = D -- [S]};
                  {error, _} ->
                      %% unreadable: left as it is, in the budget
                      Acc
              end
      end, W, Old).

%% What a downsampling calls with the merged file's temporary path before it
%% is renamed into place: nothing, unless a test set
%% `{msgflow_history, downsampling_hook}' (persistent_term) to hold it there.
hook() ->
    persistent_term:get({msgflow_history, downsampling_hook}, fun(_) -> ok end).

replace(Old, New, [Old | T]) -> [New | T];
replace(Old, New, [H | T]) -> [H | replace(Old, New, T)];
replace(_, _, []) -> [].

%% The oldest segments deleted until Bytes more fit in the budget (the
%% files never take more than it); when the closed ones are not enough,
%% the open one is closed and deleted too (the caller opens a new one).
make_room(Bytes, W = #w{done = [#{file := F} | Rest], budget = B}) ->
    case total(W) + Bytes > B of
        true -> _ = file:delete(F), make_room(Bytes, W#w{done = Rest});
        false -> W
    end;
make_room(Bytes, W = #w{done = [], open = #{}, budget = B}) ->
    case total(W) + Bytes > B of
        true -> make_room(Bytes, close_open(W));
        false -> W
    end;
make_room(_, W) ->
    W.

total(#w{done = Done, open = Open, left = Left}) ->
    Left + lists:sum([B || #{bytes := B} <- Done]) + case Open of
                                                  #{bytes := B} -> B;
                                                  none -> 0
                                              end.

report(W = #w{collector = C, done = Done, open = Open}) ->
    Segs = Done ++ [#{first_at => At} || #{first_at := At} <- [Open]],
    Oldest = case Segs of [#{first_at := O} | _] -> O; [] -> undefined end,
    C ! {msgflow_history, self(),
         #{bytes => total(W), segments => length(Segs), windows_written => W#w.written,
           writer_ms => W#w.work_us div 1000, windows_too_large => W#w.too_large,
           segments_damaged => W#w.damaged,
           oldest => Oldest,
           %% those of the segments kept (and those not yet written)
           marks => [M || M = {At, _, _, _, _} <- W#w.marks, Oldest =:= undefined orelse At >= Oldest]}},
    W.

%% The history stopped by a failed write: the collector told why, the
%% writer gone (counting goes on).
stop(Why, File, W = #w{collector = C}) ->
    C ! {msgflow_history, self(), {stopped, Why, File}},
    _ = case W#w.open of
            #{fd := Fd} -> file:close(Fd);
            none -> ok
        end,
    exit(normal).
