%%% install/1 refuses what it must before it writes or loads anything.
-module(msgflow_cluster_code_tests).
-include_lib("eunit/include/eunit.hrl").

bundle(Overrides) ->
    maps:merge(#{otp_release => erlang:system_info(otp_release),
                 nif_version => erlang:system_info(nif_version),
                 app => <<"{application, msgflow, [{modules, []}]}.\n">>,
                 beams => [], nif => <<"not a NIF">>}, Overrides).

cache() ->
    filename:basedir(user_cache, "msgflow").

%% nothing in the cache changes: the directory listing before and after
listing() ->
    case file:list_dir(cache()) of
        {ok, L} -> lists:sort(L);
        {error, _} -> []
    end.

other_release_test() ->
    Before = listing(),
    Here = {erlang:system_info(otp_release), erlang:system_info(nif_version)},
    ?assertEqual({error, {incompatible, {otp_release, element(1, Here),
                                         nif_version, element(2, Here)}}},
                 msgflow_cluster_code:install(bundle(#{otp_release => "20"}))),
    ?assertMatch({error, {incompatible, _}},
                 msgflow_cluster_code:install(bundle(#{nif_version => "1.0"}))),
    ?assertEqual(Before, listing()).

bad_app_spec_test() ->
    Before = listing(),
    ?assertMatch({error, {app_spec, _}},
                 msgflow_cluster_code:install(bundle(#{app => <<"{application, msgflow">>}))),
    ?assertMatch({error, {app_spec, {not_msgflow, {application, other, []}}}},
                 msgflow_cluster_code:install(bundle(#{app => <<"{application, other, []}.">>}))),
    ?assertEqual(Before, listing()).

%% this node's bundle has what install/1 needs of it
bundle_test() ->
    _ = application:load(msgflow),
    B = msgflow_cluster_code:bundle(),
    ?assertEqual(erlang:system_info(otp_release), maps:get(otp_release, B)),
    {ok, Mods} = application:get_key(msgflow, modules),
    ?assertEqual(lists:sort(Mods), lists:sort([M || {M, _} <- maps:get(beams, B)])),
    {ok, So} = file:read_file(filename:join(code:priv_dir(msgflow), "msgflow_tracer.so")),
    ?assertEqual(So, maps:get(nif, B)),
    {ok, Tokens, _} = erl_scan:string(binary_to_list(maps:get(app, B))),
    {ok, {application, msgflow, Keys}} = erl_parse:parse_term(Tokens),
    ?assertEqual(Mods, proplists:get_value(modules, Keys)).
