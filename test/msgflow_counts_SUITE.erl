%%% Exact counts on a live node: every pair and receiver kind, the tracer
%%% callbacks called directly, the caps (max_pairs, max_memory), sampling,
%%% generations rotated under load and churn, and views answered while the
%%% collector merges.
%%% Cases run one at a time (tracing is node-global), each on its own;
%%% barriers are msgflow:stop/0 and messages from the workload, never
%%% sleeps.  Helpers shared with other suites are in msgflow_test_lib and
%%% msgflow_workloads.
-module(msgflow_counts_SUITE).

-include_lib("common_test/include/ct.hrl").
-include_lib("stdlib/include/assert.hrl").

-export([all/0, suite/0]).
-export([exact_counts/1, receiver_kinds/1, callbacks_direct/1, layout_reads_on/1,
         max_pairs_overflow/1, max_memory_overflow/1, sampling/1, gen_call_two_edges/1,
         own_set_churn/1, snapshot_busy/1, answers_while_merging/1, rotate_direct/1,
         rotate_under_load/1, churn_conserved/1, churn_labels_leave/1, cap_live_pairs/1]).
%% run by spawn, peers or behaviours
-export([churn_client/2, churn_server/0, churn_spawner/1]).

all() ->
    [exact_counts, receiver_kinds, callbacks_direct, layout_reads_on,
     max_pairs_overflow, max_memory_overflow, sampling, gen_call_two_edges,
     own_set_churn, snapshot_busy, answers_while_merging, rotate_direct,
     rotate_under_load, churn_conserved, churn_labels_leave, cap_live_pairs].

%% set-up and clean-up around the suite and each case: msgflow_test_hook
suite() ->
    [{ct_hooks, [msgflow_test_hook]}].

%% 40 senders on both schedulers, each with its own known count per
%% receiver; every pair compared with equality.
exact_counts(_Config) ->
    ?assert(erlang:system_info(schedulers_online) >= 2),
    {Expected, Got, Info} = msgflow_workloads:exact_workload(),
    ?assertEqual(Expected, Got),
    %% the senders were counted on more than one scheduler thread
    ?assert(maps:get(shards, Info) >= 2),
    ?assertEqual(0, maps:get(overflow, Info)).

%% Every kind of receiver the VM reports in `extra', and dead letters.
receiver_kinds(_Config) ->
    Node = msgflow_test_lib:start_distribution(),
    {ok, Peer, PeerNode} = peer:start_link(#{name => peer:random_name()}),
    try
        RemotePid = erlang:spawn(PeerNode, timer, sleep, [infinity]),
        true = erpc:call(PeerNode, erlang, register, [kinds_remote, RemotePid]),
        Local = spawn_link(fun msgflow_test_lib:sink/0),
        register(kinds_local, Local),
        Self = self(),
        AliasOwner = spawn_link(fun() -> Self ! {alias, alias()}, msgflow_test_lib:sink() end),
        Alias = receive {alias, A} -> A end,
        %% an alias on another node: a receiver of its own
        RemoteAlias = erpc:call(PeerNode, erlang, alias, []),
        Dead = spawn(fun() -> ok end),
        MRef = monitor(process, Dead),
        receive {'DOWN', MRef, process, Dead, _} -> ok end,
        Sender = spawn_link(
                   fun() ->
                           %% output only: a port that polls no input is
                           %% seldom busy, and ERTS traces a send to a port
                           %% only when it runs the command at once
                           Port = open_port({spawn, "cat > /dev/null"}, [binary, out]),
                           Self ! {port, Port},
                           receive go -> ok end,
                           Local ! m,
                           Port ! {self(), {command, <<"x">>}},
                           kinds_local ! m,
                           {kinds_local, Node} ! m,
                           RemotePid ! m,
                           {kinds_remote, PeerNode} ! m,
                           Alias ! m,
                           Alias ! {make_ref(), ok},
                           RemoteAlias ! m,
                           Dead ! m,
                           Self ! {done, self()},
                           receive stop -> ok end   %% the port closes with us
                   end),
        Port = receive {port, Pt} -> Pt end,
        ok = msgflow:start(#{procs => [Sender]}),
        Sender ! go,
        receive {done, Sender} -> ok end,
        ok = msgflow:stop(),
        %% a send to a local alias is counted for its owner: a message
        %% that is no reply as a pair to the owner, the reply ({Ref, ok})
        %% rolled up at once (pairs() has it nowhere)
        Expected = lists:sort([{Sender, R, 1}
                               || R <- [Local, Port, kinds_local, {kinds_local, Node},
                                        RemotePid, {kinds_remote, PeerNode}, RemoteAlias, Dead,
                                        self(), AliasOwner]]),
        ?assertEqual(Expected, lists:sort(msgflow:pairs())),
        ?assertMatch(#{dead_letters := 1, events := 11, overflow := 0, rolled_up := 1},
                     msgflow:info()),
        ?assertMatch(#{alias_owner := true}, msgflow_tracer:lib_info()),
        ?assertMatch(#{{Sender, AliasOwner} := #{count := 2}},
                     maps:get(cells, msgflow:view(matrix, #{by => process}))),
        %% every endpoint kind, for the C decoder's tests
        msgflow_test_lib:write_dump("kinds"),
        Sender ! stop,
        [unlink(P) || P <- [Local, AliasOwner]],
        [exit(P, kill) || P <- [Local, AliasOwner]]
    after
        peer:stop(Peer)
    end.

%% The tracer callbacks called as the VM calls them.  trace_send reads the
%% receiver from a one-key options map itself and asks enif_get_map_value
%% for any other map: both count; options without `extra' count nothing.
callbacks_direct(_Config) ->
    Self = self(),
    Session = msgflow_tracer:session_new(Self, 100, 0),
    Other = spawn(fun() -> ok end),
    ?assertEqual(trace, msgflow_tracer:enabled_send(send, Session, Self)),
    ?assertEqual(trace, msgflow_tracer:enabled(trace_status, Session, Self)),
    ?assertEqual(trace, msgflow_tracer:enabled(send, Session, Self)),
    ?assertEqual(discard, msgflow_tracer:enabled('receive', Session, Self)),
    Send = fun(Opts) -> ok = msgflow_tracer:trace_send(send, Session, Self, m, Opts) end,
    [Send(#{extra => Other}) || _ <- lists:seq(1, 5)],
    [Send(#{extra => Other, timestamp => 0}) || _ <- lists:seq(1, 3)],
    Send(#{}),
    Send({extra, Other}),
    Send(#{timestamp => 0}),
    [Send(#{extra => some_name}) || _ <- lists:seq(1, 2)],
    ok = msgflow_tracer:trace_send(send_to_non_existing_process, Session, Self, m,
                                   #{extra => Other}),
    {Pairs, Dead, [], 0, 0} = msgflow_tracer:snapshot(Session),
    ?assertEqual(lists:sort([{Self, Other, 9}, {Self, some_name, 2}]), lists:sort(Pairs)),
    ?assertEqual([{Self, Other, 1}], Dead),
    msgflow_tracer:session_stop(Session),
    ?assertEqual(remove, msgflow_tracer:enabled(trace_status, Session, Self)),
    ?assertEqual(discard, msgflow_tracer:enabled(send, Session, Self)),
    ?assertEqual(discard, msgflow_tracer:enabled_procs(spawn, Session, Self)),
    %% a tracer state that is no session: removed on trace_status only.
    %% References of every kind at hand (read from their words when
    %% fast_resources is on): a plain one, an alias, a monitor's alias,
    %% another node's, ETS's and atomics' (magic references, no NIF
    %% resources), and terms holding a session
    Ets = ets:new(?MODULE, []),
    Atomics = atomics:new(4, []),
    [atomics:put(Atomics, I, -1) || I <- lists:seq(1, 4)],
    Alias = alias(),
    MonAlias = erlang:monitor(process, Other, [{alias, explicit_unalias}]),
    %% NEWER_REFERENCE_EXT of node 'x@y', creation 1, three words
    Remote = binary_to_term(<<131, 90, 0, 3, 100, 0, 3, "x@y", 0, 0, 0, 1,
                              0, 0, 0, 1, 0, 0, 0, 2, 0, 0, 0, 3>>),
    ?assertNotEqual(node(), node(Remote)),
    Live = msgflow_tracer:session_new(Self, 100, 0),
    [begin
         ?assertEqual(remove, msgflow_tracer:enabled(trace_status, State, Self)),
         ?assertEqual(discard, msgflow_tracer:enabled(send, State, Self)),
         ?assertEqual(discard, msgflow_tracer:enabled_procs(spawn, State, Self)),
         ?assertEqual(ok, msgflow_tracer:trace_send(send, State, Self, m, #{extra => Other}))
     end || State <- [make_ref(), Alias, MonAlias, Remote, Ets, Atomics, {Live}, [Live],
                      <<"state">>, 1 bsl 70]],
    %% another resource type of the library's (a call entry): its own
    %% answer to trace_status, nothing counted
    Entry = msgflow_tracer:entry_new(1),
    ?assertEqual(trace, msgflow_tracer:enabled(trace_status, Entry, Self)),
    ?assertEqual(discard, msgflow_tracer:enabled(send, Entry, Self)),
    ok = msgflow_tracer:trace_send(send, Entry, Self, m, #{extra => Other}),
    %% nothing counted by any of them, one send to the live session
    ok = msgflow_tracer:trace_send(send, Live, Self, m, #{extra => Other}),
    ?assertEqual({[{Self, Other, 1}], [], [], 0, 0}, msgflow_tracer:snapshot(Live)),
    msgflow_tracer:entry_stop(Entry),
    msgflow_tracer:session_stop(Live),
    unalias(Alias),
    erlang:demonitor(MonAlias, [flush]),
    unalias(MonAlias), %% (explicit_unalias: the monitor's end leaves it active)
    ets:delete(Ets).

%% msgflow's own processes in a session as they come and go: 400 added,
%% 300 of them removed, 400 more added (past three quarters of the set's
%% slots in use, live and removed: the set is made again), then each of the
%% 800 sends once to a process that is none of them.  The sends of the 500
%% own now are left out, exactly; those of the 300 removed are counted, one
%% pair each.  Sends to an own process are left out too.
own_set_churn(_Config) ->
    Session = msgflow_tracer:session_new(self(), 100000, 0),
    Procs = [spawn_link(fun msgflow_test_lib:sink/0) || _ <- lists:seq(1, 800)],
    {First, Later} = lists:split(400, Procs),
    {Removed, Kept} = lists:split(300, First),
    Own = Kept ++ Later,
    [ok = msgflow_tracer:own(Session, add, P) || P <- First],
    [ok = msgflow_tracer:own(Session, remove, P) || P <- Removed],
    [ok = msgflow_tracer:own(Session, add, P) || P <- Later],
    ?assertEqual(lists:sort(Own), lists:sort(msgflow_tracer:own(Session, list, none))),
    Other = spawn_link(fun msgflow_test_lib:sink/0),
    [ok = msgflow_tracer:trace_send(send, Session, P, m, #{extra => Other}) || P <- Procs],
    [ok = msgflow_tracer:trace_send(send, Session, Other, m, #{extra => P}) || P <- Own],
    {Pairs, [], [], 0, 0} = msgflow_tracer:snapshot(Session),
    ?assertEqual(lists:sort([{P, Other, 1} || P <- Removed]), lists:sort(Pairs)),
    ?assertMatch(#{own_left_out := 1000, own := 500}, msgflow_tracer:session_info(Session)),
    msgflow_tracer:session_stop(Session),
    [begin unlink(P), exit(P, kill) end || P <- [Other | Procs]].

%% A cap of 10 entries: 10 senders x 20 receivers still add up exactly.
max_pairs_overflow(_Config) ->
    Parent = self(),
    Sinks = [spawn_link(fun msgflow_test_lib:sink/0) || _ <- lists:seq(1, 20)],
    Senders = [spawn_link(fun() -> msgflow_workloads:sender(Parent, [{S, 7} || S <- Sinks]) end)
               || _ <- lists:seq(1, 10)],
    ok = msgflow:start(#{procs => Senders, max_pairs => 10}),
    [S ! go || S <- Senders],
    [receive {done, S} -> ok end || S <- Senders],
    ok = msgflow:stop(),
    #{overflow := Overflow, events := Events, table_entries := Entries,
      pairs := Pairs} = msgflow:info(),
    Counted = lists:sum([N || {_, _, N} <- msgflow:pairs()]),
    Total = 10 * 20 * 7 + 10,
    ?assertEqual(Total, Counted + Overflow),
    ?assertEqual(Total, Events),
    ?assert(Overflow > 0),
    %% max_pairs counts distinct pairs; the NIF holds at most four table
    %% entries per pair allowed (threads and kinds)
    ?assertEqual(10, Pairs),
    ?assertEqual(10, length(msgflow:pairs())),
    ?assert(Entries =< 40),
    %% the info view (what the web page and /metrics read) gives the same
    ?assertMatch(#{overflow := Overflow, events := Total, table_entries := Entries, pairs := 10},
                 msgflow:view(info, #{})),
    [begin unlink(P), exit(P, kill) end || P <- Sinks].

%% max_memory 4 MiB above what a small run takes.  A first batch (40
%% senders x 5 receivers) is held whole, far below it; a second (the same
%% senders x 500 receivers, about 10 MB of pairs) reaches it, and from then
%% on no pair is added.  Every message is in a pair held or in overflow,
%% exactly: after a third batch to all of them, the pairs held are those
%% of the first two that were, the first batch's among them, none with
%% fewer messages (a pair held counts on while the tracer's half of
%% max_memory has room for it; what it cannot count is overflow), and
%% events = held + overflow.  info(), the info view and top's header say
%% the memory is full.
max_memory_overflow(_Config) ->
    Parent = self(),
    Few = [spawn_link(fun msgflow_test_lib:sink/0) || _ <- lists:seq(1, 5)],
    Many = [spawn_link(fun msgflow_test_lib:sink/0) || _ <- lists:seq(1, 1500)],
    Senders = fun() -> [spawn_link(fun() -> batch_sender(Parent) end) || _ <- lists:seq(1, 40)] end,
    Send = fun(Ss, To) ->
                   [S ! {send, [{R, 7} || R <- To]} || S <- Ss],
                   [receive {done, S} -> ok end || S <- Ss]
           end,
    %% what a run of 40 senders takes with the tracer's tables made
    Probe = Senders(),
    ok = msgflow:start(#{procs => Probe}),
    Send(Probe, Few),
    #{store_memory := Store0, memory := Nif0} = msgflow:info(),
    ok = msgflow:stop(),
    %% (room for some of the 60,000 pairs to come, not all: a pair takes
    %% about 85 bytes in the aggregate and 60-115 in the tracer; the
    %% collector's heap counts too, more on a busy machine)
    Bound = Store0 + Nif0 + 4 * 1048576,
    Ss = Senders(),
    ok = msgflow:start(#{procs => Ss, max_memory => Bound}),
    Send(Ss, Few),
    %% (each sender's `done' to this process is a pair too)
    #{memory_full := false, pairs := 240} = msgflow:info(),
    First = lists:sort(msgflow:pairs()),
    Send(Ss, Many),
    %% (40 x 1,500 new pairs: a merge a plain info/0 does not wait for)
    ok = msgflow:sync(),
    #{memory_full := true, pairs := Held1, overflow := Over1} = msgflow:info(),
    ?assert(Held1 > 240 andalso Held1 < 240 + 40 * 1500),
    Pairs1 = lists:sort(msgflow:pairs()),
    ?assertEqual(40 * 1505 * 7 + 80, lists:sum([N || {_, _, N} <- Pairs1]) + Over1),
    Send(Ss, Few ++ Many),
    ok = msgflow:sync(),
    #{memory_full := true, pairs := Held2, overflow := Over2, events := Events} = msgflow:info(),
    Pairs2 = lists:sort(msgflow:pairs()),
    %% no pair added past the bound: the same pairs, none with fewer
    %% messages, the first batch's all there
    ?assertEqual(Held1, Held2),
    ?assertEqual([{S, R} || {S, R, _} <- Pairs1], [{S, R} || {S, R, _} <- Pairs2]),
    ?assertEqual([], [P || {P = {_, _, N1}, {_, _, N2}} <- lists:zip(Pairs1, Pairs2), N2 < N1]),
    ?assertEqual([], [{S, R} || {S, R, _} <- First] -- [{S, R} || {S, R, _} <- Pairs2]),
    ?assertEqual(2 * 40 * 1505 * 7 + 120, Events),
    ?assertEqual(Events, lists:sum([N || {_, _, N} <- Pairs2]) + Over2),
    ?assertMatch(#{memory_full := true, max_memory := Bound}, msgflow:view(info, #{})),
    Text = msgflow_test_io:capture(fun() -> msgflow:top(5) end),
    ?assertMatch({match, _}, re:run(Text, "max_memory reached")),
    ok = msgflow:stop(),
    [begin unlink(P), exit(P, kill) end || P <- Few ++ Many ++ Probe ++ Ss].

%% Sends each batch it is given, `{send, [{Receiver, N}]}', and says when
%% it is done; until killed.
batch_sender(Parent) ->
    receive {send, Sends} -> msgflow_workloads:send_rounds(Sends), Parent ! {done, self()} end,
    batch_sender(Parent).

%% Every read of the VM's term words the checks at load allow is on where
%% msgflow is tested (64-bit OTP 25, 27 and 29): the options map's
%% `extra', an alias's owner, a plain reference, atoms and tuples, the
%% session behind a tracer state; a
%% release where one is off says which (the layout changed: the slow path
%% counts the same, and this test names what to look at).  info() says
%% so too; proc_events_dropped is reported.
layout_reads_on(_Config) ->
    Lib = msgflow_tracer:lib_info(),
    Reads = maps:with([fast_extra, alias_owner, fast_terms, plain_refs, native_records,
                       fast_resources], Lib),
    Release = erlang:system_info(otp_release),
    case erlang:system_info(wordsize) =:= 8 andalso lists:member(Release, ["25", "27", "29"]) of
        true ->
            %% native records came with OTP 29
            Records = case Release of "29" -> read; _ -> none end,
            ?assertEqual({Release, #{fast_extra => true, alias_owner => true, fast_terms => true,
                                     plain_refs => true, native_records => Records,
                                     fast_resources => true}},
                         {Release, Reads});
        false ->
            ct:comment("OTP ~s, untested: ~p", [Release, Reads])
    end,
    ok = msgflow:start(#{procs => [self()]}),
    ok = msgflow:stop(),
    #{fast_extra := Fast, fast_resources := Resources} = Lib,
    ?assertMatch(#{fast_extra := Fast, fast_resources := Resources, proc_events_dropped := 0},
                 msgflow:info()).

%% Sampling really turns the flags off between slices.  This process is the
%% traced sender and reads its raw trace flags (without asking the tracer)
%% before and after each send: a send with flags on both times must be
%% counted, one with flags off both times must not; only sends that
%% straddle a switch may go either way.
sampling(_Config) ->
    Sink = spawn_link(fun msgflow_test_lib:sink/0),
    Self = self(),
    ok = msgflow:start(#{procs => [Self], sample => {20, 40}, interval => 10}),
    Until = erlang:monotonic_time(millisecond) + 400,   %% about 10 periods
    {On, Off, Either} = sample_sends(Sink, Until, {0, 0, 0}),
    ok = msgflow:stop(),
    Counted = case [N || {S, R, N} <- msgflow:pairs(), S =:= Self, R =:= Sink] of
                  [N] -> N;
                  [] -> 0
              end,
    ct:log("on ~b, off ~b, either ~b, counted ~b", [On, Off, Either, Counted]),
    ?assert(On > 0),
    ?assert(Off > 0),
    ?assert(Counted >= On),
    ?assert(Counted =< On + Either),
    ?assertMatch(#{sample := {20, 40}}, msgflow:info()),
    unlink(Sink),
    exit(Sink, kill).

sample_sends(Sink, Until, {On, Off, Either} = Acc) ->
    case erlang:monotonic_time(millisecond) < Until of
        false ->
            Acc;
        true ->
            Before = process_info(self(), trace),
            Sink ! m,
            After = process_info(self(), trace),
            sample_sends(Sink, Until,
                         case {Before, After} of
                             {{trace, 0}, {trace, 0}} -> {On, Off + 1, Either};
                             {{trace, F}, {trace, F}} -> {On + 1, Off, Either};
                             _ -> {On, Off, Either + 1}
                         end)
    end.

%% Another caller taking a snapshot of the collector's session at the same
%% time makes the NIF answer `busy': the collector skips that turn and
%% lives on with what it had; its next snapshot counts again.
snapshot_busy(_Config) ->
    %% legacy mode: the NIF session is in the supervisor's table
    ok = msgflow:start(#{procs => all, interval => 3600000, trace_mode => legacy}),
    Collector = whereis(msgflow_collector),
    Before = msgflow_workloads:counted_burst(20),
    Session = msgflow_run:legacy_session(),
    Take = msgflow_tracer:snapshot_start(Session),
    ?assertEqual({error, busy}, try msgflow_tracer:snapshot(Session) catch error:E -> {error, E} end),
    Pairs = msgflow:pairs(),                   %% the collector's take is refused too
    ?assertEqual(Collector, whereis(msgflow_collector)),
    [?assert(lists:member(P, Pairs)) || P <- Before],
    drain(Take),
    After = msgflow_workloads:counted_burst(30),                %% asserts pairs() has them: counting again
    ok = msgflow:stop(),
    ?assertEqual(Collector, whereis(msgflow_collector)),
    [?assert(lists:member(P, msgflow:pairs())) || P <- Before ++ After].

%% A snapshot of 300,000 new pairs is merged a chunk a message: a call
%% that needs no snapshot is answered between two chunks, so hotspots()
%% (built from closed windows) returns while the merge a store(true) asked
%% for first is still under way; that store then holds every pair,
%% exactly.
answers_while_merging(_Config) ->
    Self = self(),
    Rs = [spawn(fun msgflow_test_lib:sink/0) || _ <- lists:seq(1, 500)],
    Ss = [spawn(fun() ->
                        receive go -> [R ! m || R <- Rs] end,
                        Self ! {sent, self()},
                        receive stop -> ok end
                end) || _ <- lists:seq(1, 600)],
    ok = msgflow:start(#{procs => Ss, interval => 3600000}),
    [S ! go || S <- Ss],
    [receive {sent, S} -> ok end || S <- Ss],
    [receive {trace_delivered, S, Ref} -> ok end || S <- Ss, Ref <- [erlang:trace_delivered(S)]],
    %% the merge asked for first; hotspots' call comes after it
    Req = gen_server:send_request(msgflow_collector, {store, sync}),
    ?assert(is_list(msgflow:view(hotspots, #{}))),
    ?assertEqual(timeout, gen_server:wait_response(Req, 0)),
    ?assertMatch({reply, #{pairs := _}}, gen_server:receive_response(Req, 60000)),
    Into = maps:from_list([{R, true} || R <- Rs]),
    ok = msgflow:sync(),
    Counted = [N || {_, R, N} <- msgflow:pairs(), is_map_key(R, Into)],
    ?assertEqual({300000, 300000}, {length(Counted), lists:sum(Counted)}),
    ok = msgflow:stop(),
    [exit(P, kill) || P <- Ss ++ Rs].

drain(Take) ->
    case msgflow_tracer:snapshot_next(Take) of
        {more, _, _, _} -> drain(Take);
        {done, _, _, _, _, _, _} -> ok
    end.

%% 1,000 gen_server:calls are two edges of 1,000 messages each by
%% process: the replies go to a fresh alias each (OTP 24+), which the NIF
%% counts for its owner, the caller; pairs() has the requests only.
gen_call_two_edges(_Config) ->
    {ok, Server} = gen_server:start(msgflow_slow_server, [], []),
    Client = spawn(fun() ->
                           receive go -> ok end,
                           [0 = gen_server:call(Server, count) || _ <- lists:seq(1, 1000)]
                   end),
    Ref = monitor(process, Client),
    ok = msgflow:start(#{procs => [Client, Server], interval => 3600000}),
    Client ! go,
    receive {'DOWN', Ref, process, Client, normal} -> ok end,
    ok = msgflow:stop(),
    Cells = maps:get(cells, msgflow:view(matrix, #{by => process})),
    ?assertEqual(#{{Client, Server} => 1000, {Server, Client} => 1000},
                 maps:map(fun(_, #{count := C}) -> C end, Cells)),
    ?assertEqual([{Client, Server, 1000}], msgflow:pairs()),
    ?assertMatch(#{events := 2000, rolled_up := 1000, overflow := 0}, msgflow:info()),
    ?assertEqual(1000, lists:sum([C || #{count := C} <- msgflow:history(Server, Client)])),
    gen_server:stop(Server).

%% The NIF's generations, called directly: after session_rotate/1 the
%% thread counts in a new generation, the snapshot takes the last counts
%% of the old one and frees it, and no count is lost or taken twice.
rotate_direct(_Config) ->
    ok = msgflow_workloads:rotations().

%% Generations retired and freed while 4 senders count on every scheduler,
%% a rotation and a snapshot after another during 64,000 sends: each pair
%% has its exact count.
rotate_under_load(_Config) ->
    %% legacy mode: the NIF session is in the supervisor's table
    ok = msgflow:start(#{procs => new, interval => 3600000, trace_mode => legacy}),
    Session = msgflow_run:legacy_session(),
    Sinks = [spawn(fun msgflow_test_lib:sink/0) || _ <- lists:seq(1, 8)],
    Senders = [spawn(fun() ->
                             receive go -> ok end,
                             %% 100 bursts, 2 ms apart
                             [begin [S ! m || _ <- lists:seq(1, 20), S <- Sinks],
                                    receive after 2 -> ok end
                              end || _ <- lists:seq(1, 100)]
                     end) || _ <- lists:seq(1, 4)],
    Refs = [monitor(process, S) || S <- Senders],
    [S ! go || S <- Senders],
    Rotations = rotate_until(Session, Refs, 0),
    ok = msgflow:stop(),
    #{freed := Freed} = msgflow_tracer:session_info(Session),
    ct:log("~b rotations, ~b generations freed", [Rotations, Freed]),
    ?assert(Freed > 0),
    Pairs = msgflow:pairs(),
    [?assertEqual({S, K, 2000}, lists:keyfind(K, 2, [P || P = {S1, _, _} <- Pairs, S1 =:= S]))
     || S <- Senders, K <- Sinks],
    [exit(P, kill) || P <- Sinks].

rotate_until(Session, [], N) ->
    _ = Session,
    N;
rotate_until(Session, [Ref | Refs], N) ->
    ok = msgflow_tracer:session_rotate(Session),
    _ = msgflow:pairs(),                       %% a snapshot: frees the retired
    receive
        {'DOWN', Ref, process, _, normal} -> rotate_until(Session, Refs, N + 1)
    after 0 ->
        rotate_until(Session, [Ref | Refs], N + 1)
    end.

%% 60 short-lived clients, each 10 round trips with one of 3 servers: once
%% they exited and two more windows closed, their pairs have left pairs()
%% and their counts are in matrix(name) exactly; events = pairs + rolled up +
%% overflow at each step.
churn_conserved(_Config) ->
    ok = msgflow:start(#{procs => new, interval => 50}),
    Servers = [spawn(?MODULE, churn_server, []) || _ <- [1, 2, 3]],
    Spawner = spawn(?MODULE, churn_spawner, [self()]),
    Clients = start_clients(Spawner, 60, Servers, 10),
    [receive {'DOWN', R, process, C, normal} -> ok end || {C, R} <- Clients],
    balanced(),
    ok = msgflow_collector:await_windows(4, 10000),
    balanced(),
    Pids = [C || {C, _} <- Clients],
    ?assertEqual([], [P || P = {S, R, _} <- msgflow:pairs(),
                           lists:member(S, Pids) orelse lists:member(R, Pids)]),
    Cells = maps:get(cells, msgflow:view(matrix, #{by => name})),
    Client = <<"msgflow_counts_SUITE:churn_client/2">>,
    Server = <<"msgflow_counts_SUITE:churn_server/0">>,
    ?assertMatch(#{{Client, Server} := #{count := 600}, {Server, Client} := #{count := 600}},
                 Cells),
    #{rolled_up := Folded, overflow := 0} = msgflow:info(),
    ?assert(Folded >= 1200),
    ok = msgflow:stop(),
    balanced(),
    [exit(P, kill) || P <- [Spawner | Servers]].

%% An endpoint labelled for a delta whose row is not its own (a group's,
%% or its group's when it rolled up: msgflow_labels:group_end/2) and held
%% by no row leaves the labels two window closes later (purge/1); one a
%% row holds stays.  Under churn (make soak) such endpoints were kept for
%% good: 1,000 a second.
churn_labels_leave(_Config) ->
    L0 = msgflow_labels:new(),
    [Gone, Held] = [spawn(fun() -> ok end) || _ <- [1, 2]],
    {_, L1} = msgflow_labels:group_end(L0, Gone),
    L2 = msgflow_labels:hold(L1, Held),
    #{endpoints := Ends} = Tables = msgflow_labels:tables(L2),
    ?assert(ets:member(Ends, Gone)),
    _ = msgflow_labels:purge(msgflow_labels:purge(L2)),
    ?assertEqual({false, true}, {ets:member(Ends, Gone), ets:member(Ends, Held)}),
    [ets:delete(T) || T <- maps:values(Tables)],
    ok.

balanced() ->
    #{events := E, held := H, rolled_up := F, overflow := O} = msgflow_collector:balance(),
    ?assertEqual(E, H + F + O).

%% max_pairs bounds the pairs alive at once: 40 clients with 2 pairs each
%% come and go in batches of 4 under max_pairs 20, and nothing overflows;
%% then 25 new pairs alive at once overflow by exactly what is past the cap.
cap_live_pairs(_Config) ->
    ok = msgflow:start(#{procs => new, interval => 50, max_pairs => 20}),
    Servers = [spawn(?MODULE, churn_server, [])],
    Spawner = spawn(?MODULE, churn_spawner, [self()]),
    [begin
         Batch = start_clients(Spawner, 4, Servers, 3),
         [receive {'DOWN', R, process, C, normal} -> ok end || {C, R} <- Batch],
         ok = msgflow_collector:await_windows(4, 10000)
     end || _ <- lists:seq(1, 10)],
    ?assertMatch(#{overflow := 0, rolled_up := F} when F >= 240, msgflow:info()),
    Held = length(msgflow:pairs()),
    Sinks = [spawn(fun msgflow_test_lib:sink/0) || _ <- lists:seq(1, 25)],
    Sender = spawn(fun() -> receive go -> [S ! m || S <- Sinks] end end),
    Ref = monitor(process, Sender),
    Sender ! go,
    receive {'DOWN', Ref, process, Sender, normal} -> ok end,
    #{overflow := Over, pairs := Pairs} = msgflow:info(),
    ?assertEqual(20, Pairs),
    ?assertEqual(25 - (20 - Held), Over),
    balanced(),
    ok = msgflow:stop(),
    [exit(P, kill) || P <- [Spawner | Servers ++ Sinks]].

%% Clients started by Spawner, monitored, then let go: [{Pid, MonitorRef}].
start_clients(Spawner, N, Servers, Trips) ->
    Spawner ! {start, N, Servers, Trips},
    Clients = receive {clients, Cs} -> [{C, monitor(process, C)} || C <- Cs] end,
    [C ! go || {C, _} <- Clients],
    Clients.

%% @private A server of the churn tests: answers each {req, From}.
churn_server() ->
    receive {req, From} -> From ! rep, churn_server() end.

%% @private Spawns the clients of the churn tests (a traced process, so
%% that msgflow has their process events); tells Parent their pids and monitors.
churn_spawner(Parent) ->
    receive
        {start, N, Servers, Trips} ->
            Cs = [spawn(?MODULE, churn_client, [lists:nth(1 + I rem length(Servers), Servers), Trips])
                  || I <- lists:seq(1, N)],
            Parent ! {clients, Cs},
            churn_spawner(Parent)
    end.

%% @private A client of the churn tests: Trips round trips, then it exits.
churn_client(Server, Trips) ->
    receive go -> ok end,
    [begin Server ! {req, self()}, receive rep -> ok end end || _ <- lists:seq(1, Trips)],
    ok.

%%% Other tracing tools (issue 13)
