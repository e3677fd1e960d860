%%% The history's segment files (msgflow_history_file): windows written
%%% and read back whole; a frame cut short ends a segment with the frames
%%% before it read; windows merged ten to one, never across two runs; a
%%% segment found at two levels (a downsampling cut short) listed once, at
%%% the higher, and the lower deleted by drop_superseded/2; the marks of
%%% bottlenecks a window holds.
-module(msgflow_history_file_tests).
-include_lib("eunit/include/eunit.hrl").

-define(NODE, 'h@host').

dir() ->
    D = filename:join(["/tmp", "msgflow_history_file_tests_" ++ os:getpid() ++ "_" ++
                           integer_to_list(erlang:unique_integer([positive]))]),
    ok = filelib:ensure_path(D),
    D.

win(Run, N, Rows) ->
    #{node => ?NODE, run => Run, n => N, at => 1000 * N, ms => 1000, scale => 1, rows => Rows}.

e(Name) -> {Name, atom_to_binary(Name), undefined, undefined}.

round_trip_and_cut_test() ->
    D = dir(),
    Ws = [win(1, N, [{e(a), e(b), info, x, N}, {e(a), e(c), call, get, 2 * N}]) || N <- [1, 2, 3]],
    F = msgflow_history_file:path(D, 1000, 0, ?NODE),
    ok = msgflow_history_file:write(F, msgflow_history_file:encode_all(Ws)),
    ?assertEqual({ok, Ws, ok}, msgflow_history_file:read(F)),
    %% cut in the middle of the last frame: the first two read
    {ok, Bin} = file:read_file(F),
    ok = file:write_file(F, binary:part(Bin, 0, byte_size(Bin) - 5)),
    {ok, Two, {cut, _}} = msgflow_history_file:read(F),
    ?assertEqual(lists:sublist(Ws, 2), Two),
    ok = file:del_dir_r(D).

%% A byte flipped in frame 2 of 3: frames 1 and 3 read, frame 2 is named
%% damaged; a frame claiming to inflate to 4 GB is damaged, never
%% inflated; every byte flipped in turn never raises.
damaged_frames_test_() ->
    %% (every byte of a segment flipped in turn: seconds on a busy machine)
    {timeout, 120, fun damaged_frames/0}.

damaged_frames() ->
    D = dir(),
    Ws = [win(1, N, [{e(a), e(b), info, x, N}]) || N <- [1, 2, 3]],
    F = msgflow_history_file:path(D, 1000, 0, ?NODE),
    Bin = msgflow_history_file:encode_all(Ws),
    <<Size1:32, _/binary>> = Bin,
    Off2 = 8 + Size1,
    <<_:(Off2 + 12)/binary, B, _/binary>> = Bin,
    Flipped = <<(binary:part(Bin, 0, Off2 + 12))/binary, (B bxor 16#40), (binary:part(Bin, Off2 + 13, byte_size(Bin) - Off2 - 13))/binary>>,
    ok = file:write_file(F, Flipped),
    ?assertEqual({ok, [hd(Ws), lists:last(Ws)], {damaged, [Off2]}}, msgflow_history_file:read(F)),
    Bomb = <<131, 80, 16#FFFFFFFF:32, (zlib:compress(<<0:8000>>))/binary>>,
    ok = file:write_file(F, <<(byte_size(Bomb)):32, (erlang:crc32(Bomb)):32, Bomb/binary, Bin/binary>>),
    ?assertEqual({ok, Ws, {damaged, [0]}}, msgflow_history_file:read(F)),
    [begin
         <<Pre:I/binary, X, Post/binary>> = Bin,
         ok = file:write_file(F, <<Pre/binary, (X bxor 16#FF), Post/binary>>),
         {ok, _, _} = msgflow_history_file:read(F)
     end || I <- lists:seq(0, byte_size(Bin) - 1)],
    ok = file:del_dir_r(D).

merge_test() ->
    Ws = [win(1, N, [{e(a), e(b), info, x, 1}]) || N <- lists:seq(1, 12)]
        ++ [win(2, N, [{e(a), e(b), info, x, 1}]) || N <- [13, 14]],
    M = msgflow_history_file:merge(Ws, 10),
    %% run 1: 10 + 2 windows; run 2: 2, never merged with run 1's
    ?assertEqual([{1, 1, 10000, 10}, {1, 11, 2000, 2}, {2, 13, 2000, 2}],
                 [{R, N, Ms, Sum} || #{run := R, n := N, ms := Ms, rows := [{_, _, _, _, Sum}]} <- M]),
    ?assertEqual([10000, 12000, 14000], [At || #{at := At} <- M]).

%% A window's marks (bottlenecks appeared or cleared) read back as they
%% were written; those not of a mark's shape (a foreign or damaged term)
%% passed over; a merged window holds the marks of those it merged, in
%% order, and a window without marks has no `marks' key.
marks_test() ->
    D = dir(),
    Appeared = {1500, <<"appeared">>, <<"saturated">>, <<"svc_8">>, <<"<0.90.0>">>},
    Cleared = {2500, <<"cleared">>, <<"saturated">>, <<"svc_8">>, <<"<0.90.0>">>},
    Ws = [(win(1, 1, [{e(a), e(b), info, x, 1}]))#{marks => [Appeared]},
          win(1, 2, [{e(a), e(b), info, x, 1}]),
          (win(1, 3, [{e(a), e(b), info, x, 1}]))#{marks => [Cleared, {oops, 1}]}],
    F = msgflow_history_file:path(D, 1000, 0, ?NODE),
    ok = msgflow_history_file:write(F, msgflow_history_file:encode_all(Ws)),
    {ok, Read, ok} = msgflow_history_file:read(F),
    ?assertEqual([[Appeared], none, [Cleared]], [maps:get(marks, W, none) || W <- Read]),
    ?assertMatch([#{marks := [Appeared, Cleared], n := 1}], msgflow_history_file:merge(Read, 10)),
    ?assertEqual([none], [maps:get(marks, W, none) || W <- msgflow_history_file:merge(tl(lists:droplast(Read)), 10)]),
    ok = file:del_dir_r(D).

superseded_test() ->
    D = dir(),
    W = [win(1, 1, [{e(a), e(b), info, x, 1}])],
    Bin = msgflow_history_file:encode_all(W),
    [ok = msgflow_history_file:write(msgflow_history_file:path(D, 1000, L, ?NODE), Bin) || L <- [0, 1]],
    ok = msgflow_history_file:write(msgflow_history_file:path(D, 2000, 0, ?NODE), Bin),
    ok = msgflow_history_file:write(msgflow_history_file:path(D, 1000, 0, 'other@host'), Bin),
    ?assertEqual([{1000, 0, 'other@host'}, {1000, 1, ?NODE}, {2000, 0, ?NODE}],
                 [{A, L, N} || #{first_at := A, level := L, node := N} <- msgflow_history_file:list(D, all)]),
    ?assertEqual([{1000, 1}, {2000, 0}],
                 [{A, L} || #{first_at := A, level := L} <- msgflow_history_file:list(D, [?NODE])]),
    ok = msgflow_history_file:drop_superseded(D, ?NODE),
    ?assertEqual(false, filelib:is_file(msgflow_history_file:path(D, 1000, 0, ?NODE))),
    ?assertEqual(true, filelib:is_file(msgflow_history_file:path(D, 1000, 0, 'other@host'))),
    ok = file:del_dir_r(D).

%% No atom is made from a file's name: 5,000 segments named for nodes
%% no atom names are listed with their names as binaries.
names_make_no_atoms_test_() ->
    %% (5,000 files made and listed: seconds on a busy machine)
    {timeout, 120, fun names_make_no_atoms/0}.

names_make_no_atoms() ->
    D = dir(),
    _ = msgflow_history_file:list(D, all),     %% (its code loaded first)
    Names = ["0000000001000-0-no_such_node_" ++ integer_to_list(I) ++ "@h+1@h.mfh" || I <- lists:seq(1, 5000)],
    [ok = file:write_file(filename:join(D, N), <<>>) || N <- Names],
    Before = erlang:system_info(atom_count),
    Listed = msgflow_history_file:list(D, all),
    ?assert(erlang:system_info(atom_count) - Before < 50),
    ?assertEqual(5000, length(Listed)),
    ?assert(lists:all(fun(#{node := N}) -> is_binary(N) end, Listed)),
    ok = file:del_dir_r(D).

%% Two VMs of one node name write one directory: each may delete and
%% downsample its own segments and those of a writer that is gone, never those
%% of a writer that runs (here a peer VM).
writers_test_() ->
    %% (a peer VM started: seconds on a busy machine)
    {timeout, 120, fun writers/0}.

writers() ->
    D = dir(),
    {ok, Peer, _} = peer:start(#{connection => standard_io}),
    Other = peer:call(Peer, os, getpid, []),
    Bin = msgflow_history_file:encode_all([win(1, 1, [{e(a), e(b), info, x, 1}])]),
    Name = fun(At, Level, Writer) ->
                   {ok, Host} = inet:gethostname(),
                   filename:join(D, lists:flatten(io_lib:format("~13..0b-~b-~s+~s@~s.mfh", [At, Level, ?NODE, Writer, Host])))
           end,
    ok = msgflow_history_file:write(Name(1000, 0, Other), Bin),
    ok = msgflow_history_file:write(Name(1000, 1, Other), Bin),
    ok = msgflow_history_file:write(msgflow_history_file:path(D, 2000, 0, ?NODE), Bin),
    ok = msgflow_history_file:write(Name(3000, 0, "999999999"), Bin),
    Mine = [{A, L, W} || S = #{first_at := A, level := L, writer := W} <- msgflow_history_file:list(D, [?NODE]),
                         msgflow_history_file:mine(S)],
    {ok, Host} = inet:gethostname(),
    ?assertEqual([{2000, 0, {os:getpid(), Host}}, {3000, 0, {"999999999", Host}}], Mine),
    %% another host's writer is never this VM's to delete
    ok = msgflow_history_file:write(filename:join(D, "0000000005000-0-" ++ atom_to_list(?NODE) ++ "+7@elsewhere.mfh"), Bin),
    ?assertNot(lists:any(fun msgflow_history_file:mine/1, [S || S = #{first_at := 5000} <- msgflow_history_file:list(D, [?NODE])])),
    %% the running writer's lower level stays
    ok = msgflow_history_file:drop_superseded(D, ?NODE),
    ?assert(filelib:is_file(Name(1000, 0, Other))),
    peer:stop(Peer),
    ok = file:del_dir_r(D).

bad_text_test() ->
    ?assertMatch({error, {badopt, {history, <<255>>}, _}}, msgflow_opts:validate(#{history => <<255>>})).
