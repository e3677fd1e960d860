%%% @doc Writing a file whole, safely and privately: what every export,
%%% dump and history segment uses.
%%%
%%% A file is written inside a private directory (mode 0700) made for it
%%% in the target's directory, synced to disk, given its mode there (0600
%%% for a new file unless `mode' says otherwise; the mode of the file it
%%% replaces), then renamed over the target and the directory synced: a
%%% reader sees the old file or the new one, never half of one; no other
%%% user can open it at any moment; two writers of one path each write a
%%% whole one (the last rename wins).  Only a regular file or a name that
%%% does not exist yet is written: a device (`/dev/null', `/dev/full'), a
%%% directory, a FIFO or a socket is refused, never renamed over.  A
%%% symbolic link is refused unless `follow_symlinks' is true, and even
%%% then one in a sticky directory (/tmp) that is neither the caller's nor
%%% the directory owner's is refused, as the kernel's protected_symlinks
%%% would (renaming over its target would sidestep that protection).
-module(msgflow_file).

-include_lib("kernel/include/file.hrl").

-export([write/2, write/3, temp_prefix/0]).

%% links followed at most before the path is refused (as the kernel's
%% ELOOP)
-define(MAX_LINKS, 8).
%% what every temporary name of msgflow's starts with
-define(TEMP, ".msgflow-").

-type opts() :: #{follow_symlinks => boolean(), mode => 0..8#777,
                  before_rename => fun((file:filename()) -> term())}.
-export_type([opts/0]).

%% @doc write/3 with no options: a link is refused, a new file is 0600.
-spec write(file:name_all(), iodata()) -> ok | {error, {atom(), term()}}.
write(Path, Data) ->
    write(Path, Data, #{}).

%% @doc Writes Data (iodata) to Path as one whole file.  Opts:
%% `follow_symlinks' (false: a link is refused), `mode' (of a new file,
%% 8#600), `before_rename' (a fun given the temporary file's path once it
%% is written, synced and given its mode, before it is renamed: the
%% tests hold a write there, and kill its VM).  Errors, each naming the path: `{error, {not_a_regular_file,
%% Path}}' (what is there is a device, directory, FIFO or socket; nothing
%% was written), `{error, {symlink, Path}}' (a link, and
%% `follow_symlinks' is not true), `{error, {symlink_in_sticky_dir,
%% Path}}', `{error, {eloop, Path}}' (links that lead round), `{error,
%% {Posix, Path}}' from the file system (`enoent' for a directory that
%% does not exist, `eacces', `enospc', ...), `{error, {badarg, {path,
%% Path}, Allowed}}' for something that is no file name.  What a failed
%% write made is deleted.
-spec write(file:name_all(), iodata(), opts()) -> ok | {error, {atom(), term()}}.
write(Path, Data, Opts) ->
    try filename:flatten(Path) of
        Flat when Flat =:= ""; Flat =:= <<>> -> {error, {badarg, {path, Path}, [<<"a non-empty file name">>]}};
        Flat -> write(Flat, Path, Data, Opts, ?MAX_LINKS)
    catch
        error:_ -> {error, {badarg, {path, Path}, [<<"a non-empty file name">>]}}
    end.

%% @doc What the names of msgflow's temporary files and directories start
%% with (a history directory's start-up deletes those a writer that died
%% left: msgflow_history).
-spec temp_prefix() -> string().
temp_prefix() -> ?TEMP.

write(_Target, Path, _Data, _Opts, 0) ->
    {error, {eloop, Path}};
write(Target, Path, Data, Opts, Links) ->
    case file:read_link_info(Target) of
        {ok, #file_info{type = regular, mode = Mode}} ->
            replace(Target, Path, Data, Mode band 8#7777, Opts);
        {ok, Link = #file_info{type = symlink}} ->
            case {maps:get(follow_symlinks, Opts, false), protected(Target, Link)} of
                {false, _} -> {error, {symlink, Path}};
                {true, true} -> {error, {symlink_in_sticky_dir, Path}};
                {true, false} ->
                    case file:read_link_all(Target) of
                        {ok, To} -> write(filename:join(filename:dirname(Target), To), Path, Data, Opts,
                                          Links - 1);
                        {error, R} -> {error, {R, Path}}
                    end
            end;
        {ok, #file_info{}} ->
            {error, {not_a_regular_file, Path}};
        {error, enoent} ->
            replace(Target, Path, Data, maps:get(mode, Opts, 8#600), Opts);
        {error, R} ->
            {error, {R, Path}}
    end.

%% A link the kernel's protected_symlinks would not let this user follow:
%% in a sticky, world-writable directory, owned neither by this user nor
%% by the directory's owner.
protected(Link, #file_info{uid = LinkUid}) ->
    case file:read_file_info(filename:dirname(Link)) of
        {ok, #file_info{mode = M, uid = DirUid}} when M band 8#1002 =:= 8#1002 ->
            LinkUid =/= DirUid andalso LinkUid =/= my_uid();
        _ ->
            false
    end.

%% this OS process's user (the owner of /proc/self; none known elsewhere)
my_uid() ->
    case file:read_file_info("/proc/self") of
        {ok, #file_info{uid = U}} -> U;
        _ -> none
    end.

%% Data into a file in a private directory beside Target, synced, with
%% Mode, renamed over Target; the directory synced.
replace(Target, Path, Data, Mode, Opts) ->
    Dir = filename:dirname(Target),
    Private = filename:join(Dir, ?TEMP ++ os:getpid() ++ "-"
                                 ++ integer_to_list(erlang:unique_integer([positive])) ++ ".d"),
    Tmp = filename:join(Private, "file"),
    Result = case file:make_dir(Private) of
                 ok ->
                     case file:change_mode(Private, 8#700) == ok andalso synced(Tmp, Data) of
                         ok ->
                             Changed = file:change_mode(Tmp, Mode) == ok,
                             _ = Changed andalso (maps:get(before_rename, Opts, fun(_) -> ok end))(Tmp),
                             case Changed andalso file:rename(Tmp, Target) of
                                 ok -> sync_dir(Dir), ok;
                                 false -> {error, {eperm, Path}};
                                 {error, R} -> {error, {R, Path}}
                             end;
                         false -> {error, {eperm, Path}};
                         {error, R} -> {error, {R, Path}}
                     end;
                 {error, R} ->
                     {error, {R, Path}}
             end,
    _ = file:delete(Tmp),
    _ = file:del_dir(Private),
    Result.

synced(File, Data) ->
    case file:open(File, [write, exclusive, raw, binary]) of
        {ok, F} ->
            R = case file:write(F, Data) of
                    ok -> file:sync(F);
                    E -> E
                end,
            _ = file:close(F),
            R;
        E ->
            E
    end.

%% A directory's entries made durable (fsync of the directory: sync(1),
%% as Erlang's file module opens no directory); nothing where there is
%% no sync.
sync_dir(Dir) ->
    case os:find_executable("sync") of
        false -> ok;
        Sync ->
            Port = open_port({spawn_executable, Sync}, [{args, ["--", Dir]}, exit_status, stderr_to_stdout]),
            sync_done(Port)
    end.

sync_done(Port) ->
    receive
        {Port, {data, _}} -> sync_done(Port);
        {Port, {exit_status, _}} ->
            %% (a caller that traps exits hears of the port's end too)
            receive {'EXIT', Port, _} -> ok after 0 -> ok end
    after 10000 ->
        try port_close(Port) catch error:_ -> ok end,
        ok
    end.
