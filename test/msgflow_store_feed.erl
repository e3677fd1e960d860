%%% A store fed without a tracer, for EUnit tests of the store and the
%%% views over it: the deltas a snapshot would bring merged as the
%%% collector merges them (msgflow_store:merge_deltas/3), windows closed
%%% as its ticks close them, and the handle the views read; the rows are
%%% the real row builder's.  with_ends/1,2 gives live pids to count.
-module(msgflow_store_feed).

-export([with_ends/1, with_ends/2, fed/4, fed/5, feed/3, retire/1]).

%% The pids (and a name for receiver 0) the deltas use, alive for the
%% run.
with_ends(Fun) ->
    with_ends(9, Fun).

with_ends(N, Fun) ->
    %% each running its fun before the store labels it (a process not yet
    %% scheduled in is labelled by its spawn call, on a busy machine)
    Parent = self(),
    Ends = [spawn(fun() -> Parent ! {ready, self()}, receive stop -> ok end end) || _ <- lists:seq(1, N)],
    [receive {ready, E} -> ok end || E <- Ends],
    Name = msgflow_store_tests_srv,
    true = register(Name, lists:last(Ends)),
    try Fun(list_to_tuple(Ends), Name)
    after
        unregister(Name),
        [E ! stop || E <- Ends]
    end.

%% The store fed with Windows (all but the last closed), its handle, and
%% the same handle without what the store keeps (the views then scan).
fed(Windows, Ends, Name, Caps) ->
    fed(Windows, Ends, Name, Caps, fun(_) -> false end).

%% fed/4 with the deltas Reply says are replies to aliases of their
%% receiver (rolled-up rows) merged as such.
fed(Windows, Ends, Name, Caps, Reply) ->
    End = fun(0) -> Name; (I) -> element(I, Ends) end,
    Of = fun(Ds) -> [case K of
                         none -> {element(Sn, Ends), End(R), N};
                         _ -> {element(Sn, Ends), End(R), N, K, x}
                     end || {Sn, R, N, K} <- Ds]
         end,
    {S, H} = feed([begin {Rs, Ps} = lists:partition(Reply, W), {Of(Ps), Of(Rs)} end
                   || W <- Windows], Caps, fun(_) -> ok end),
    {S, H, maps:without([busiest, named, window_ends], H)}.

%% A store fed with Windows, each `{Deltas, Replies}' as a snapshot brings
%% them (msgflow_store:merge_deltas/3: `{From, To, Messages}' or `{From,
%% To, Messages, Kind, Tag}', Replies those to aliases of their receiver),
%% all but the last closed, BeforeClose(I) called before window I closes
%% (to fill a receiver's queue, say): the state and its handle, as the
%% collector hands it to the views.
-spec feed([{list(), list()}], map(), fun((pos_integer()) -> term())) -> {term(), map()}.
feed(Windows, Caps, BeforeClose) ->
    S0 = msgflow_store:start_run(msgflow_store:new(Caps), #{windows => 60, max_pairs => 1000000}),
    S = lists:foldl(
          fun({I, {Ds, Rs}}, Acc) ->
                  Acc1 = msgflow_store:merge_deltas(Ds, Rs, Acc),
                  case I < length(Windows) of
                      true -> _ = BeforeClose(I), msgflow_store:close_window(Acc1);
                      false -> Acc1
                  end
          end, S0, lists:enumerate(Windows)),
    {S, msgflow_store:handle(S, #{node => node(), running => true, started_at => 0,
                                  stopped_at => undefined, interval => 1000, sample => off,
                                  call_sample => off, skipped => 0, new_tracer => msgflow})}.


%% Deletes the tables a fed store made (the calling process owns them).
-spec retire(term()) -> ok.
retire(_S) ->
    [ets:delete(T) || T <- ets:all(), ets:info(T, owner) =:= self(),
                      lists:prefix("msgflow_", atom_to_list(ets:info(T, name)))],
    ok.
