%%% @doc Shipping msgflow to a node that does not have it, in one place
%%% for both who ship it (the cluster coordinator, and the msgflow-top C
%%% node): a bundle of the build (its release, NIF version, application
%%% spec, modules and NIF) handed to install/1, which runs on the node and
%%% refuses a build made for another release or NIF version before it
%%% writes or loads anything.  ensure/2 is the coordinator's way there:
%%% every remote step an erpc call with the caller's timeout.
-module(msgflow_cluster_code).
-export([compatible/2, ensure/2, bundle/0, install/1, load_called/1]).
-export_type([bundle/0]).

%% What install/1 takes.  `app' is the text of the application spec (as in
%% a .app file); `beams' the object code of each module; `nif' the bytes of
%% msgflow_tracer.so; `otp_release' and `nif_version' what they were built
%% for (erlang:system_info/1's strings).
-type bundle() :: #{otp_release := string(), nif_version := string(), app := binary(),
                    beams := [{module(), binary()}], nif := binary()}.

%% The NIF is built for this node's release and NIF version; so are the
%% beams (a beam of a newer release may not load on an older one).
%% @doc `ok' when node N runs this node's OTP release and NIF version (the
%% NIF and the beams are built for them); else throws `{incompatible,
%% {otp_release, Rel, nif_version, Nif}}'.  Timeout in ms per call.
-spec compatible(node(), timeout()) -> ok.
compatible(N, Timeout) ->
    same_build(release(), {erpc:call(N, erlang, system_info, [otp_release], Timeout),
                           erpc:call(N, erlang, system_info, [nif_version], Timeout)}).

%% This node's OTP release and NIF version.
release() ->
    {erlang:system_info(otp_release), erlang:system_info(nif_version)}.

%% The one rule, for compatible/2 and install/1: a build runs only on the
%% release and NIF version it was built for.  Throws the node's pair.
same_build(Built, Built) -> ok;
same_build(_, {Rel, Nif}) -> throw({incompatible, {otp_release, Rel, nif_version, Nif}}).

%% @doc msgflow on node N: nothing when it is there (its code path has
%% msgflow_cluster), else this module loaded there and install/1 called
%% there with this node's bundle/0.  Throws what failed (install/1's
%% reason, `{load_binary, M, Why}', an erpc error).  Call compatible/2
%% first: on a node of another release nothing should be loaded at all.
-spec ensure(node(), timeout()) -> ok.
ensure(N, Timeout) ->
    case erpc:call(N, code, which, [msgflow_cluster], Timeout) of
        File when is_list(File) ->
            ok;
        _ ->
            {?MODULE, Bin, File} = code:get_object_code(?MODULE),
            case erpc:call(N, code, load_binary, [?MODULE, File, Bin], Timeout) of
                {module, ?MODULE} -> ok;
                {error, Why} -> throw({load_binary, ?MODULE, Why})
            end,
            case erpc:call(N, ?MODULE, install, [bundle()], Timeout) of
                ok -> ok;
                {error, Why2} -> throw(Why2)
            end
    end.

%% @doc This node's build of msgflow as install/1 takes it (see bundle()).
%% Errors: exits when the NIF file cannot be read.
-spec bundle() -> bundle().
bundle() ->
    {ok, So} = file:read_file(filename:join(code:priv_dir(msgflow), "msgflow_tracer.so")),
    {ok, Keys} = application:get_all_key(msgflow),
    Spec = {application, msgflow, [KV || KV = {K, _} <- Keys, K =/= start_phases]},
    {ok, Mods} = application:get_key(msgflow, modules),
    {Rel, Nif} = release(),
    #{otp_release => Rel, nif_version => Nif,
      app => unicode:characters_to_binary(io_lib:format("~tp.~n", [Spec])),
      beams => [{M, element(2, code:get_object_code(M))} || M <- Mods],
      nif => So}.

%% @doc Runs on the node that gets msgflow: ok once the application spec
%% is loaded (its `priv_dir' saying where the NIF is), the NIF written to
%% the node's user cache directory, under msgflow-cluster-Release-Hash/priv,
%% and the modules loaded with code:load_binary/3 (so also on an embedded
%% node), msgflow_tracer last (its on_load loads the NIF).  Hash is of the
%% NIF's bytes, so every node on a host that writes there writes the same
%% bytes: each under a name of its own, renamed into place only when the
%% file is not there yet, so that no VM maps a file that anyone is still
%% writing.  Errors, before anything is written for the first:
%% `{error, {incompatible, {otp_release, Rel, nif_version, Nif}}}' (this
%% node's, when the bundle was built for others), `{error, {app_spec,
%% Why}}', `{error, {write, File, Why}}', `{error, {app_load, Why}}',
%% `{error, {load_binary, M, Why}}'.
-spec install(bundle()) -> ok | {error, term()}.
install(#{otp_release := Rel, nif_version := Nif, app := App, beams := Beams, nif := So}) ->
    try
        ok = same_build({Rel, Nif}, release()),
        Spec = app_spec(App),
        Dir = filename:join(filename:basedir(user_cache, "msgflow"),
                            "msgflow-cluster-" ++ Rel ++ "-" ++ hash(So)),
        ok = write_nif(filename:join([Dir, "priv", "msgflow_tracer.so"]), So),
        ok = load_app(Spec, filename:join(Dir, "priv")),
        {Last, Rest} = lists:partition(fun({M, _}) -> M =:= msgflow_tracer end, Beams),
        _ = [load_beam(Dir, M, Bin) || {M, Bin} <- Rest ++ Last],
        load_called([Bin || {_, Bin} <- Beams])
    catch
        throw:Why -> {error, Why}
    end.

app_spec(Text) ->
    case erl_scan:string(unicode:characters_to_list(Text)) of
        {ok, Tokens, _} ->
            case erl_parse:parse_term(Tokens) of
                {ok, {application, msgflow, Keys} = Spec} when is_list(Keys) -> Spec;
                {ok, Other} -> throw({app_spec, {not_msgflow, Other}});
                {error, Why} -> throw({app_spec, Why})
            end;
        {error, Why, _} ->
            throw({app_spec, Why})
    end.

%% erlang:md5/1: a BIF, so no crypto application is needed
hash(So) ->
    string:lowercase(binary_to_list(binary:encode_hex(binary:part(erlang:md5(So), 0, 8)))).

write_nif(File, So) ->
    case filelib:ensure_path(filename:dirname(File)) of
        ok -> ok;
        {error, Why0} -> throw({write, filename:dirname(File), Why0})
    end,
    case filelib:file_size(File) =:= byte_size(So) of
        true ->
            ok;
        false ->
            Tmp = File ++ "." ++ atom_to_list(node()) ++ "."
                ++ integer_to_list(erlang:unique_integer([positive])),
            %% renamed over a file of the same bytes at most: a VM that
            %% mapped that one keeps it mapped
            case file:write_file(Tmp, So) of
                ok -> ok;
                {error, Why} -> throw({write, Tmp, Why})
            end,
            case file:rename(Tmp, File) of
                ok -> ok;
                {error, Why2} -> throw({write, File, Why2})
            end
    end.

load_app({application, msgflow, Keys}, PrivDir) ->
    Env = [{priv_dir, PrivDir} | proplists:get_value(env, Keys, [])],
    Spec = {application, msgflow, [{env, Env} | [KV || KV = {K, _} <- Keys, K =/= env]]},
    case application:load(Spec) of
        ok -> ok;
        {error, {already_loaded, msgflow}} -> application:set_env(msgflow, priv_dir, PrivDir);
        {error, Why} -> throw({app_load, Why})
    end.

load_beam(Dir, M, Bin) ->
    File = filename:join([Dir, "ebin", atom_to_list(M) ++ ".beam"]),
    case M =:= ?MODULE andalso code:is_loaded(M) =/= false of
        true ->
            ok; %% this code, running now
        false ->
            case code:load_binary(M, File, Bin) of
                {module, M} -> ok;
                {error, Why} -> throw({load_binary, M, Why})
            end
    end.

%% @doc Loads every module the given beams (files or binaries) call that
%% is not loaded yet, so that none is loaded later, through the code
%% server, while msgflow counts (its answers to msgflow's processes would
%% be counted).  A beam that cannot be read is skipped.  Always `ok'.
-spec load_called([file:filename() | binary()]) -> ok.
load_called(Beams) ->
    Called = lists:usort([C || B <- Beams,
                               {ok, {_, [{imports, Is}]}} <- [imports(B)],
                               {C, _, _} <- Is]),
    %% trace and json: asked for by function_exported when they exist;
    %% io_lib's formatting modules: what io_lib:format/2 calls
    _ = code:ensure_modules_loaded((Called -- [trace, json]) ++ [io_lib_format, io_lib_pretty, epp]),
    ok.

%% The imports chunk of a beam, or `error' for one that cannot be read.
imports(Beam) ->
    try beam_lib:chunks(Beam, [imports]) catch _:_ -> error end.
