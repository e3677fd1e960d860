%%% @doc Shipping msgflow to a node that does not have it: the check
%%% that it can run this node's build, and the load of the application,
%%% its modules and the NIF.  Runs in the caller (the coordinator); every
%%% remote step is an erpc call with the caller's timeout.
-module(msgflow_cluster_code).
-export([compatible/2, ensure/2]).

%% The NIF is built for this node's release and NIF version; so are the
%% beams (a beam of a newer release may not load on an older one).
%% @doc `ok' when node N runs this node's OTP release and NIF version (the
%% NIF and the beams are built for them); else throws `{incompatible,
%% {otp_release, Rel, nif_version, Nif}}'.  Timeout in ms per call.
-spec compatible(node(), timeout()) -> ok.
compatible(N, Timeout) ->
    Mine = {erlang:system_info(otp_release), erlang:system_info(nif_version)},
    Theirs = {erpc:call(N, erlang, system_info, [otp_release], Timeout),
              erpc:call(N, erlang, system_info, [nif_version], Timeout)},
    case Theirs of
        Mine -> ok;
        {Rel, Nif} -> throw({incompatible, {otp_release, Rel, nif_version, Nif}})
    end.

%% @doc msgflow's modules loaded with code:load_binary/3 (so also on an
%% embedded node), its application spec loaded, and the NIF written to the
%% node's user cache directory, under msgflow-cluster-Release-Hash/priv,
%% which is where msgflow_tracer looks for it: beside the ebin its file name
%% says.  Hash is of the NIF's bytes, so every node on a host that writes
%% there writes the same bytes: each under a name of its own, renamed into
%% place only when the file is not there yet, so that no VM maps a file
%% that anyone is still writing.  Throws what failed (`{app_load, Why}',
%% `{load_binary, M, Why}', an erpc error).
-spec ensure(node(), timeout()) -> ok.
ensure(N, Timeout) ->
    case erpc:call(N, code, which, [msgflow_cluster], Timeout) of
        File when is_list(File) ->
            ok;
        _ ->
            {ok, So} = file:read_file(filename:join(code:priv_dir(msgflow), "msgflow_tracer.so")),
            %% erlang:md5/1: a BIF, so no crypto application is needed
            Hash = binary:encode_hex(binary:part(erlang:md5(So), 0, 8)),
            Dir = filename:join(erpc:call(N, filename, basedir, [user_cache, "msgflow"]),
                                "msgflow-cluster-" ++ erlang:system_info(otp_release) ++ "-"
                                ++ string:lowercase(binary_to_list(Hash))),
            SoFile = filename:join([Dir, "priv", "msgflow_tracer.so"]),
            ok = erpc:call(N, filelib, ensure_path, [filename:join(Dir, "priv")]),
            case erpc:call(N, filelib, file_size, [SoFile]) =:= byte_size(So) of
                true ->
                    ok;
                false ->
                    Tmp = SoFile ++ "." ++ atom_to_list(N) ++ "."
                        ++ integer_to_list(erlang:unique_integer([positive])),
                    ok = erpc:call(N, file, write_file, [Tmp, So]),
                    %% renamed over a file of the same bytes at most: a VM
                    %% that mapped that one keeps it mapped
                    ok = erpc:call(N, file, rename, [Tmp, SoFile])
            end,
            %% the application first, its environment saying where the NIF is
            {ok, Keys} = application:get_all_key(msgflow),
            Env = [{priv_dir, filename:join(Dir, "priv")} | proplists:get_value(env, Keys, [])],
            AppSpec = {application, msgflow,
                       [{env, Env} | [KV || KV = {K, _} <- Keys,
                                            not lists:member(K, [env, start_phases])]]},
            case erpc:call(N, application, load, [AppSpec]) of
                ok -> ok;
                {error, {already_loaded, msgflow}} ->
                    erpc:call(N, application, set_env, [msgflow, priv_dir,
                                                        filename:join(Dir, "priv")]);
                {error, Why} -> throw({app_load, Why})
            end,
            {ok, Mods} = application:get_key(msgflow, modules),
            %% the tracer last: its on_load loads the NIF
            _ = [load_module(N, Dir, M, Timeout) || M <- (Mods -- [msgflow_tracer]) ++ [msgflow_tracer]],
            ok
    end.

load_module(N, Dir, M, Timeout) ->
    {M, Bin, _} = code:get_object_code(M),
    File = filename:join([Dir, "ebin", atom_to_list(M) ++ ".beam"]),
    case erpc:call(N, code, load_binary, [M, File, Bin], Timeout) of
        {module, M} -> ok;
        {error, Why} -> throw({load_binary, M, Why})
    end.
