%%% @doc Reading the live system to name an endpoint: a process's
%%% registered name, proc_lib initial call or label, its module; a port's
%%% driver.  msgflow_labels calls it the first time an endpoint shows up
%%% (while it may still be alive); views of flows call label/1.  Reads
%%% process_info and port_info only; any process.
-module(msgflow_describe).
-export([label/1, module_of/1, describe/1, describe/2, facts/2, facts/3, label_of/2, describe_port/1,
         proc_event_call/1]).

%% process_info(P, {dictionary, Key}) is OTP 26.2+; OTP 25's contract
%% does not know it (it is only called where the VM supports it).
-dialyzer({no_fail_call, [proc_lib_initial_call/1, dictionary_key_form/0]}).

%% @doc A readable label for an endpoint, read from the live system now:
%% for a local process, its `proc_lib:set_label/1' label (OTP 27+; Elixir's
%% `Process.set_label/1'), else its registered name, else its proc_lib
%% initial call (`'$initial_call''), else, spawned from a fun, where the
%% fun was written (`ux_load:start/0 fun', from the bottom of its stack),
%% else its initial call `M:F/A', else the pid; a port's driver and the
%% label of the process that owns it (`tcp_inet <- httpc_handler'); a registered name as msgflow_fmt:name/1 writes
%% it (an Elixir alias without `Elixir.'); a remote endpoint with its node;
%% an alias as `alias #Ref<..>'.  A dead local pid gets
%% msgflow_fmt:endpoint/1.  Module names in labels read as their language
%% writes them (`My.Worker.init/1').
-spec label(msgflow_tracer:endpoint() | term()) -> binary().
label(Pid) when is_pid(Pid), node(Pid) =:= node() ->
    case describe(Pid) of
        undefined -> msgflow_fmt:endpoint(Pid);
        #{label := Label} -> Label
    end;
label(Port) when is_port(Port), node(Port) =:= node() ->
    case describe_port(Port) of
        undefined -> msgflow_fmt:endpoint(Port);
        #{label := Label} -> Label
    end;
label(Name) when is_atom(Name) ->
    msgflow_fmt:name(Name);
label(Other) ->
    msgflow_fmt:endpoint(Other).

%% @doc The module a live local process runs: that of its proc_lib initial
%% call, else of its initial call; `undefined' for anything else.
-spec module_of(term()) -> module() | undefined.
module_of(Pid) when is_pid(Pid), node(Pid) =:= node() ->
    case describe(Pid) of
        undefined -> undefined;
        #{module := M} -> M
    end;
module_of(_) ->
    undefined.

%% @doc What a live local process says of itself, read with one
%% process_info/2 call (and, for a process that is not registered, its
%% proc_lib initial call): `label' as label/1 gives it; `module' as
%% module_of/1; `name', its registered name or `undefined'; `group_leader'.
%% `undefined' for a dead process.
-spec describe(pid()) -> #{label := binary(), module := module() | undefined,
                           name := atom(), group_leader := pid()} | undefined.
describe(Pid) ->
    describe(Pid, undefined).

%% @doc describe/1 for a process whose spawn event (or the census of a
%% run's start, msgflow_labels) gave ProcEvent (a call of
%% proc_event_call/1, or `undefined'): a process spawned from a fun or
%% by proc_lib is named by ProcEvent rather than by its stack or its
%% dictionary.
-spec describe(pid(), {module(), atom(), arity()} | undefined) ->
          #{label := binary(), module := module() | undefined,
            name := atom(), group_leader := pid()} | undefined.
describe(Pid, ProcEvent) ->
    case facts(Pid, ProcEvent) of
        undefined -> undefined;
        F = #{call := Call, name := Name, group_leader := GL} ->
            #{label => label_of(F, Pid), module => module(Call), name => Name,
              group_leader => GL}
    end.

%% @doc What a live local process says of itself, without formatting it:
%% `name' (registered, or `undefined'), `call' (what its label names when
%% it has no other: its proc_lib initial call, the fun it was spawned
%% from, else its initial call; ProcEvent stands in for the first two, as
%% in describe/2), `proc_label' (OTP 27+'s proc_lib label, `undefined'
%% when none), `group_leader'.  label_of/2 makes its label.  `undefined'
%% for a dead process.  One process_info/2 call; a second for a proc_lib
%% process's dictionary or a fun's stack when ProcEvent does not say.
-spec facts(pid(), {module(), atom(), arity()} | undefined) ->
          #{name := atom(), call := {module(), atom(), arity()} | term(),
            proc_label := binary() | undefined, group_leader := pid()} | undefined.
facts(Pid, ProcEvent) ->
    element(1, facts(Pid, ProcEvent, #{})).

%% @doc facts/2 with a memo of deep stacks' bottoms (`#{}' to begin
%% with; the caller keeps what comes back, and may drop it any time): a
%% process spawned from a fun whose stack is deeper than the
%% current_stacktrace shows (8 frames) has its bottom read from its
%% backtrace's text, which costs tens of µs; processes whose shown frames
%% and stack size are the same as one read before are taken to come from
%% the same fun, and get its bottom without that read.
-spec facts(pid(), {module(), atom(), arity()} | undefined, map()) ->
          {#{name := atom(), call := {module(), atom(), arity()} | term(),
             proc_label := binary() | undefined, group_leader := pid()} | undefined, map()}.
facts(Pid, ProcEvent, Memo) ->
    case process_info(Pid, [registered_name, initial_call, group_leader]) of
        undefined ->
            {undefined, Memo};
        [{registered_name, Reg}, {initial_call, Init}, {group_leader, GL}] ->
            Name = case Reg of [] -> undefined; _ -> Reg end,
            {Call, Memo1} =
                case Init of
                    _ when ProcEvent =/= undefined, (Init =:= {erlang, apply, 2} orelse
                                                     element(1, Init) =:= proc_lib orelse
                                                     Init =:= {erts_internal, dist_spawn_init, 1}) ->
                        {ProcEvent, Memo};
                    {proc_lib, init_p, _} ->
                        %% only a process proc_lib started has its
                        %% initial call in its dictionary
                        case proc_lib_initial_call(Pid) of
                            false -> {Init, Memo};
                            PlCall -> {PlCall, Memo}
                        end;
                    {erlang, apply, 2} -> fun_call(Pid, Init, Memo);
                    _ -> {Init, Memo}
                end,
            {#{name => Name, call => Call, proc_label => proc_lib_label(Pid), group_leader => GL},
             Memo1}
    end.

%% @doc The label facts/2 gives a process: its proc_lib label, else its
%% registered name, else its call `M:F/A', else the pid.
-spec label_of(#{name := atom(), call := term(), proc_label := binary() | undefined, _ => _},
               pid()) -> binary().
label_of(#{proc_label := L}, _Pid) when is_binary(L) -> L;
label_of(#{name := Name}, _Pid) when Name =/= undefined -> msgflow_fmt:name(Name);
label_of(#{call := Call}, Pid) -> initial_call(Call, Pid).

module({M, _, _}) when is_atom(M) -> M;
module(_) -> undefined.

%% A process spawned from a fun (initial call erlang:apply/2): the bottom
%% frame of its stack, the fun itself (`{ux_load, '-start/0-fun-0-', 0}')
%% or what the fun tail-called; Init when it cannot be read.  The bottom
%% is the last frame of current_stacktrace when that is shorter than the
%% VM's backtrace_depth (8 by default); a deeper stack is read whole from
%% process_info(Pid, backtrace) (what current_stacktrace shows last would
%% change as the process runs): the last function a frame returns into,
%% else the one running.
fun_call(Pid, Init, Memo) ->
    %% most stacks are shallow: their whole stack is a short list, read
    %% cheaply; only a stack as deep as the list goes is read as text, once
    %% for each (frames shown, stack size)
    case process_info(Pid, [current_stacktrace, stack_size]) of
        [{current_stacktrace, Stack}, _] when length(Stack) < 8 ->
            {case lists:last([Init | [{M, F, A} || {M, F, A, _} <- Stack]]) of
                 {M, F, A} when is_list(A) -> {M, F, length(A)};
                 MFA -> MFA
             end, Memo};
        [{current_stacktrace, Stack}, {stack_size, Size}] ->
            Key = {[{M, F, A} || {M, F, A, _} <- Stack], Size},
            case Memo of
                #{Key := Call} ->
                    {Call, Memo};
                _ ->
                    %% kept only when read: a process gone or a text not
                    %% understood gives Init, which says nothing of the fun
                    case backtrace_bottom(Pid, Init) of
                        Init -> {Init, Memo};
                        Call -> {Call, Memo#{Key => Call}}
                    end
            end;
        undefined ->
            {Init, Memo}
    end.

backtrace_bottom(Pid, Init) ->
    case process_info(Pid, backtrace) of
        {backtrace, Bin0} ->
            %% the bottom frames are at its end: a deep stack's text is
            %% long, the last 4 KB hold them
            Bin = binary:part(Bin0, max(0, byte_size(Bin0) - 4096), min(4096, byte_size(Bin0))),
            case re:run(Bin, "^(?:Program counter|0x[0-9a-f]+ Return addr)[^(]*"
                             "\\(([^:()]+):(.+)/([0-9]+) \\+ [0-9]+\\)",
                        [multiline, global, {capture, all_but_first, binary}]) of
                {match, Frames} ->
                    [M, F, A] = lists:last(Frames),
                    try {atom(M), atom(F), binary_to_integer(A)}
                    catch error:badarg -> Init
                    end;
                nomatch ->
                    Init
            end;
        undefined ->
            Init
    end.

%% An existing atom from its text in a backtrace (quoted when it needs
%% to be: `'-start/0-fun-0-'').
atom(<<$', Rest/binary>>) ->
    binary_to_existing_atom(binary:part(Rest, 0, byte_size(Rest) - 1));
atom(B) ->
    binary_to_existing_atom(B).

%% @doc What a live local port says of itself: `label', its driver (or
%% command) and the label of the process that owns it, `tcp_inet <-
%% httpc_handler' (`port tcp_inet' when the owner is gone); `module', the
%% owner's module (so that matrix(module) puts a socket with the code
%% that reads it).  `undefined' for a closed port.
-spec describe_port(port()) -> #{label := binary(), module := module() | undefined}
                                   | undefined.
describe_port(Port) ->
    case erlang:port_info(Port, name) of
        undefined ->
            undefined;
        {name, Name} ->
            Owner = case erlang:port_info(Port, connected) of
                        {connected, P} when is_pid(P), node(P) =:= node() -> describe(P);
                        _ -> undefined
                    end,
            case Owner of
                undefined ->
                    #{label => iolist_to_binary(["port ", Name]), module => undefined};
                #{label := OwnerLabel, module := Mod} ->
                    #{label => unicode:characters_to_binary([Name, " <- ", OwnerLabel]),
                      module => Mod}
            end
    end.

%% proc_lib:get_label/1 exists from OTP 27 on.
proc_lib_label(Pid) ->
    case erlang:function_exported(proc_lib, get_label, 1) of
        true ->
            try apply(proc_lib, get_label, [Pid]) of
                undefined -> undefined;
                L when is_binary(L) -> L;
                L -> iolist_to_binary(io_lib:format("~0tp", [L]))
            catch _:_ -> undefined
            end;
        false ->
            undefined
    end.

%% @doc The initial call a proc_event (msgflow_tracer:proc_events_take/1) gives a
%% process, named the way proc_lib names it: `{Mod, init, 1}' for a
%% gen_server or gen_statem, `{supervisor, Mod, 1}' for a supervisor; for
%% a process spawned from a fun, the fun's module and own name.
-spec proc_event_call(term()) -> {module(), atom(), arity()} | undefined.
proc_event_call({proc_lib, {gen, init_it, Args}}) -> gen_call(Args);
proc_event_call({proc_lib, {M, F, Args}}) when is_list(Args) -> {M, F, length(Args)};
proc_event_call({M, F, A}) when is_atom(M), is_atom(F), is_integer(A) -> {M, F, A};
proc_event_call({'fun', Fun}) when is_function(Fun) ->
    %% the function the fun was written in: msgflow_fmt:mfa/3 reads
    %% {ux_load, '-start/0-fun-0-', 0} as `ux_load:start/0 fun'; a fun
    %% whose code is no longer loaded has no name (`[]'), and is only
    %% erlang:apply/2
    case {erlang:fun_info(Fun, module), erlang:fun_info(Fun, name)} of
        {{module, M}, {name, F}} when is_atom(M), is_atom(F), F =/= [] ->
            {arity, A} = erlang:fun_info(Fun, arity),
            {M, F, A};
        _ ->
            {erlang, apply, 2}
    end;
proc_event_call(_) -> undefined.

gen_call([gen_server, _, _, supervisor, {_, Mod, _}, _]) -> {supervisor, Mod, 1};
gen_call([gen_server, _, _, _, supervisor, {_, Mod, _}, _]) -> {supervisor, Mod, 1};
gen_call([gen_event | _]) -> {gen_event, init_it, 6};
gen_call([_, _, _, Mod, _, _]) when is_atom(Mod), Mod =/= '_' -> {Mod, init, 1};
gen_call([_, _, _, _, Mod | _]) when is_atom(Mod), Mod =/= '_' -> {Mod, init, 1};
gen_call(Args) -> {gen, init_it, length(Args)}.

proc_lib_initial_call(Pid) ->
    %% OTP 26.2+ can read one key; before that, the whole dictionary.  Which
    %% one this VM does is found out once.
    Dict = case dictionary_key_form() of
               true ->
                   case process_info(Pid, {dictionary, '$initial_call'}) of
                       {{dictionary, '$initial_call'}, V} -> [{'$initial_call', V}];
                       _ -> []
                   end;
               false ->
                   case process_info(Pid, dictionary) of
                       {dictionary, D} -> D;
                       undefined -> []
                   end
           end,
    case lists:keyfind('$initial_call', 1, Dict) of
        {_, {M, F, A}} when is_atom(M), is_atom(F) -> {M, F, A};
        _ -> false
    end.

dictionary_key_form() ->
    case persistent_term:get({?MODULE, dictionary_key_form}, unknown) of
        unknown ->
            Known = try process_info(self(), {dictionary, '$initial_call'}) of
                        _ -> true
                    catch error:badarg -> false
                    end,
            persistent_term:put({?MODULE, dictionary_key_form}, Known),
            Known;
        Known ->
            Known
    end.

initial_call({M, F, A}, _Pid) -> msgflow_fmt:mfa(M, F, A);
initial_call(_, Pid) -> msgflow_fmt:endpoint(Pid).
