%%% @doc Reading the live system to name an endpoint: a process's
%%% registered name, proc_lib initial call or label, its module; a port's
%%% driver.  msgflow_labels calls it the first time an endpoint shows up
%%% (while it may still be alive); views of flows call label/1.  Reads
%%% process_info and port_info only; any process.
-module(msgflow_describe).
-export([label/1, module_of/1, describe/1, birth_call/1]).

%% process_info(P, {dictionary, Key}) is OTP 26.2+; OTP 25's contract
%% does not know it (it is only called where the VM supports it).
-dialyzer({no_fail_call, [proc_lib_initial_call/1, dictionary_key_form/0]}).

%% @doc A readable label for an endpoint, read from the live system now:
%% a local process's registered name, else its proc_lib initial call
%% (`'$initial_call''; before that, on OTP 27+, its `proc_lib:set_label/1'
%% label), else its initial call `M:F/A', else the pid; a port's
%% driver or command name; a registered name as msgflow_fmt:name/1 writes
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
label(Port) when is_port(Port) ->
    case erlang:port_info(Port, name) of
        {name, Name} -> iolist_to_binary(["port ", Name]);
        undefined -> msgflow_fmt:endpoint(Port)
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
    case process_info(Pid, [registered_name, initial_call, group_leader]) of
        undefined ->
            undefined;
        [{registered_name, Reg}, {initial_call, Init}, {group_leader, GL}] ->
            Name = case Reg of [] -> undefined; _ -> Reg end,
            %% only a process proc_lib started has its initial call in its
            %% dictionary; reading that is one more round trip to it
            PlCall = case Init of
                         {proc_lib, init_p, _} -> proc_lib_initial_call(Pid);
                         _ -> false
                     end,
            Module = case {PlCall, Init} of
                         {{M, _, _}, _} -> M;
                         {false, {M, _, _}} -> M;
                         _ -> undefined
                     end,
            Label = if
                        Name =/= undefined -> msgflow_fmt:name(Name);
                        true -> unnamed_label(Pid, PlCall, Init)
                    end,
            #{label => Label, module => Module, name => Name, group_leader => GL}
    end.

unnamed_label(Pid, PlCall, Init) ->
    case proc_lib_label(Pid) of
        undefined ->
            case PlCall of
                {M, F, A} -> msgflow_fmt:mfa(M, F, A);
                false -> initial_call(Init, Pid)
            end;
        Label ->
            Label
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

%% @doc The initial call a birth (msgflow_tracer:births_take/1) gives a
%% process, named the way proc_lib names it: `{Mod, init, 1}' for a
%% gen_server or gen_statem, `{supervisor, Mod, 1}' for a supervisor.
-spec birth_call(term()) -> {module(), atom(), arity()} | undefined.
birth_call({proc_lib, {gen, init_it, Args}}) -> gen_call(Args);
birth_call({proc_lib, {M, F, Args}}) when is_list(Args) -> {M, F, length(Args)};
birth_call({M, F, A}) when is_atom(M), is_atom(F), is_integer(A) -> {M, F, A};
birth_call(_) -> undefined.

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
