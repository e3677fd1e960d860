%%% @doc Writing a file whole, safely: what every export and dump uses.
%%%
%%% A file is written to a temporary file of a unique, short name in the
%%% target's directory, then renamed over the target, so a reader never
%%% sees half a file and two writers of one path each write a whole one
%%% (the last rename wins).  Only a regular file or a name that does not
%%% exist yet is written: a device (`/dev/null', `/dev/full'), a
%%% directory, a FIFO or a socket is refused, never renamed over; a
%%% symbolic link is followed and its target written (under the same
%%% rule).
-module(msgflow_file).

-include_lib("kernel/include/file.hrl").

-export([write/2]).

%% links followed at most before the path is refused (as the kernel's
%% ELOOP)
-define(MAX_LINKS, 8).

%% @doc Writes Data (iodata) to Path as one whole file.  Errors, each
%% naming the path: `{error, {not_a_regular_file, Path}}' (what is there
%% is a device, directory, FIFO or socket; nothing was written),
%% `{error, {eloop, Path}}' (links that lead round), `{error, {Posix,
%% Path}}' from the file system (`enoent' for a directory that does not
%% exist, `eacces', `enospc', ...), `{error, {badarg, {path, Path}, Allowed}}' for
%% something that is no file name.  A temporary file left by a failed
%% write is deleted.
-spec write(file:name_all(), iodata()) -> ok | {error, {atom(), term()}}.
write(Path, Data) ->
    try filename:flatten(Path) of
        Flat when Flat =:= ""; Flat =:= <<>> -> {error, {badarg, {path, Path}, [<<"a non-empty file name">>]}};
        Flat -> write(Flat, Path, Data, ?MAX_LINKS)
    catch
        error:_ -> {error, {badarg, {path, Path}, [<<"a non-empty file name">>]}}
    end.

write(_Target, Path, _Data, 0) ->
    {error, {eloop, Path}};
write(Target, Path, Data, Links) ->
    case file:read_link_info(Target) of
        {ok, #file_info{type = regular, mode = Mode}} ->
            replace(Target, Path, Data, Mode);
        {ok, #file_info{type = symlink}} ->
            case file:read_link_all(Target) of
                {ok, To} -> write(filename:join(filename:dirname(Target), To), Path, Data,
                                  Links - 1);
                {error, R} -> {error, {R, Path}}
            end;
        {ok, #file_info{}} ->
            {error, {not_a_regular_file, Path}};
        {error, enoent} ->
            replace(Target, Path, Data, undefined);
        {error, R} ->
            {error, {R, Path}}
    end.

%% Data into a new file beside Target, with the mode the file it replaces
%% had, renamed over it.
replace(Target, Path, Data, Mode) ->
    Tmp = filename:join(filename:dirname(Target),
                        ".msgflow-" ++ os:getpid() ++ "-"
                        ++ integer_to_list(erlang:unique_integer([positive])) ++ ".tmp"),
    case file:write_file(Tmp, Data, [exclusive]) of
        ok ->
            _ = is_integer(Mode) andalso file:change_mode(Tmp, Mode band 8#7777),
            case file:rename(Tmp, Target) of
                ok -> ok;
                {error, R} -> _ = file:delete(Tmp), {error, {R, Path}}
            end;
        {error, R} ->
            _ = file:delete(Tmp),
            {error, {R, Path}}
    end.
