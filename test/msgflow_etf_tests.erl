%%% Reading the external term format without new atoms (msgflow_etf):
%%% every term term_to_binary makes (but funs) reads back as itself,
%%% compressed or not; an atom this VM lacks reads as its name, a pid,
%%% port or reference of a node it lacks as its text; a term that says it
%%% inflates past the limit is refused, one that lies about its size too;
%%% no byte flipped or cut ever raises or makes an atom.
-module(msgflow_etf_tests).
-include_lib("proper/include/proper.hrl").  %% before eunit.hrl: both define LET
-include_lib("eunit/include/eunit.hrl").

-define(RUNS, 300).
-define(MAX, 64 * 1024 * 1024).

%% An atom's bytes in the external format, made without the atom.
atom_ext(Name) when byte_size(Name) < 256 -> <<119, (byte_size(Name)), Name/binary>>.

%% What follows the atom at the head of B (each release writes its own
%% of the four atom tags).
after_atom(<<T, L:16, _:L/binary, R/binary>>) when T =:= 100; T =:= 118 -> R;
after_atom(<<T, L, _:L/binary, R/binary>>) when T =:= 115; T =:= 119 -> R.

%% A name no test made: the atom does not exist.
unknown(Tag) ->
    N = iolist_to_binary(["msgflow_etf_tests_", Tag, "_", integer_to_list(erlang:unique_integer([positive]))]),
    ?assertError(badarg, binary_to_existing_atom(N)),
    N.

value() ->
    ?SIZED(S, value(S)).

value(0) ->
    oneof([int(), real(), binary(), bitstring(), atom(), string(),
           exactly(self()), exactly(make_ref()), exactly(hd(erlang:ports())), exactly(1 bsl 200)]);
value(S) ->
    oneof([value(0),
           ?LAZY(list(value(S div 3))),
           ?LAZY(?LET(L, list(value(S div 3)), list_to_tuple(L))),
           ?LAZY(?LET(L, list({value(S div 4), value(S div 4)}), maps:from_list(L))),
           ?LAZY(?LET({L, T}, {non_empty(list(value(S div 3))), value(0)}, L ++ T))]).

%% Each term read back through `safe' and, beside an atom this VM
%% lacks, through the reader's own walk.
prop_round_trip() ->
    A = unknown("walk"),
    ?FORALL({T, Opts}, {resize(12, value()), oneof([[], [{minor_version, 2}]])},
            begin
                <<131, Plain/binary>> = term_to_binary(T, Opts),
                Walked = <<104, 2, (atom_ext(A))/binary, Plain/binary>>,
                Z = zlib:compress(Walked),
                {ok, T} =:= msgflow_etf:decode(term_to_binary(T, [compressed | Opts]), ?MAX)
                    andalso {ok, {A, T}} =:= msgflow_etf:decode(<<131, Walked/binary>>, ?MAX)
                    andalso {ok, {A, T}} =:= msgflow_etf:decode(<<131, 80, (byte_size(Walked)):32, Z/binary>>, ?MAX)
            end).

proper_test_() ->
    {timeout, 120, ?_assert(proper:quickcheck(prop_round_trip(), [{numtests, ?RUNS}, {to_file, user}]))}.

unknown_atoms_test() ->
    A = unknown("atom"),
    U = unknown(<<"ünicode"/utf8>>),
    Before = erlang:system_info(atom_count),
    Bin = <<131, 108, 4:32, (atom_ext(A))/binary, (atom_ext(<<"ok">>))/binary,
            100, (byte_size(A)):16, A/binary, (atom_ext(U))/binary, 106>>,
    ?assertEqual({ok, [A, ok, A, U]}, msgflow_etf:decode(Bin, ?MAX)),
    %% compressed as term_to_binary compresses
    <<131, Plain/binary>> = Bin,
    Z = <<131, 80, (byte_size(Plain)):32, (zlib:compress(Plain))/binary>>,
    ?assertEqual({ok, [A, ok, A, U]}, msgflow_etf:decode(Z, ?MAX)),
    ?assertEqual(Before, erlang:system_info(atom_count)).

%% A pid, port and reference of a node this VM lacks: their text, as
%% the views print a remote pid; of a node it has: themselves.
unknown_node_test() ->
    Node = unknown("node"),
    Remote = fun(T) ->
                     <<131, Tag, R0/binary>> = term_to_binary(T),
                     {Pre, R1} = case Tag of
                                     90 -> <<Len:16, R/binary>> = R0, {<<Len:16>>, R};
                                     _ -> {<<>>, R0}
                                 end,
                     Rest = after_atom(R1),                       %% this node's name
                     <<131, Tag, Pre/binary, (atom_ext(Node))/binary, Rest/binary>>
             end,
    Before = erlang:system_info(atom_count),
    {ok, P} = msgflow_etf:decode(Remote(list_to_pid("<0.42.7>")), ?MAX),
    ?assertEqual(<<"<0.42.7>@", Node/binary>>, P),
    {ok, Port} = msgflow_etf:decode(Remote(hd(erlang:ports())), ?MAX),
    ?assertMatch({match, _}, re:run(Port, <<"^#Port<0\\.[0-9]+>@", Node/binary, "$">>)),
    Ref = make_ref(),
    {ok, R} = msgflow_etf:decode(Remote(Ref), ?MAX),
    [_, Words] = string:split(ref_to_list(Ref), "."),
    ?assertEqual(iolist_to_binary(["#Ref<0.", Words, "@", Node]), R),
    ?assertEqual(Before, erlang:system_info(atom_count)),
    %% a term that also names an atom this VM lacks: the pid is itself
    Mixed = <<131, 104, 2, (atom_ext(Node))/binary, (binary:part(term_to_binary(self()), 1,
                                                                byte_size(term_to_binary(self())) - 1))/binary>>,
    ?assertEqual({ok, {Node, self()}}, msgflow_etf:decode(Mixed, ?MAX)).

%% A term that would inflate past the limit is refused unread; one whose
%% size is a lie (more or less than it says) is damaged.
compression_bomb_test() ->
    Big = term_to_binary(binary:copy(<<0>>, 10 * 1024 * 1024), [compressed]),
    <<131, 80, USize:32, Z/binary>> = Big,
    ?assert(byte_size(Big) < 20000),
    ?assertEqual({error, {too_big, USize, 1024 * 1024}}, msgflow_etf:decode(Big, 1024 * 1024)),
    %% it says 1 kB and holds 10 MB (and an atom this VM lacks, so that
    %% the reader inflates it itself)
    A = unknown("bomb"),
    Plain = <<108, 2:32, (atom_ext(A))/binary, 109, (10 * 1024 * 1024):32,
              (binary:copy(<<0>>, 10 * 1024 * 1024))/binary, 106>>,
    Lie = <<131, 80, 1024:32, (zlib:compress(Plain))/binary>>,
    ?assertMatch({error, {bad_term, _}}, msgflow_etf:decode(Lie, ?MAX)),
    Short = <<131, 80, (byte_size(Plain) + 1):32, (zlib:compress(Plain))/binary>>,
    ?assertMatch({error, {bad_term, _}}, msgflow_etf:decode(Short, ?MAX)),
    ?assertMatch({error, {bad_term, _}}, msgflow_etf:decode(<<131, 80, USize:32, Z:100/binary>>, ?MAX)).

%% What the walk refuses, each beside an atom this VM lacks (so that it
%% is the walk that reads it), as an error, never an exception: compression
%% inside the term (it would pass the limit: 50 MB from 50 kB), a tuple of
%% 16M elements, an integer of 5 MB, a term nested 100,000 deep, bytes
%% after the term.
refused_test_() ->
    {timeout, 60,
     fun() ->
             A = atom_ext(unknown("refused")),
             Beside = fun(T) -> <<131, 104, 2, A/binary, T/binary>> end,
             Inner = term_to_binary(binary:copy(<<0>>, 50 * 1024 * 1024), [compressed]),
             ?assert(byte_size(Inner) < 100000),
             ?assertMatch({error, {bad_term, _}}, msgflow_etf:decode(Beside(Inner), 1024 * 1024)),
             <<131, Plain/binary>> = Beside(Inner),
             Z = <<131, 80, (byte_size(Plain)):32, (zlib:compress(Plain))/binary>>,
             ?assertMatch({error, {bad_term, _}}, msgflow_etf:decode(Z, 1024 * 1024)),
             Tuple = <<105, 16#1000000:32, (binary:copy(<<106>>, 16#1000000))/binary>>,
             ?assertMatch({error, {bad_term, _}}, msgflow_etf:decode(Beside(Tuple), ?MAX)),
             [?assertMatch({error, {bad_term, _}},
                           msgflow_etf:decode(Beside(<<111, (5 * 1024 * 1024):32, Sign,
                                                       (binary:copy(<<255>>, 5 * 1024 * 1024))/binary>>),
                                              ?MAX)) || Sign <- [0, 1]],
             Deep = iolist_to_binary([lists:duplicate(100000, <<104, 1>>), <<106>>]),
             ?assertMatch({error, {bad_term, _}}, msgflow_etf:decode(Beside(Deep), ?MAX)),
             ?assertMatch({error, {bad_term, _}}, msgflow_etf:decode(<<(Beside(<<106>>))/binary, 1>>, ?MAX))
     end}.

%% A fun `safe' refuses (of a module this VM lacks) is refused.
funs_refused_test() ->
    M = unknown("module"),
    ?assertMatch({error, {bad_term, 1}}, msgflow_etf:decode(<<131, 113, (atom_ext(M))/binary, (atom_ext(<<"f">>))/binary, 97, 1>>, ?MAX)),
    ?assertMatch({error, {bad_term, 0}}, msgflow_etf:decode(<<"not a term">>, ?MAX)),
    ?assertMatch({error, {bad_term, _}}, msgflow_etf:decode(<<131>>, ?MAX)).

%% Every byte of a few terms flipped, and every cut: never raises, never
%% makes an atom.
fuzz_test_() ->
    {timeout, 120,
     fun() ->
             A = unknown("fuzz"),
             Seeds = [term_to_binary(#{a => [1, 2.5, <<"x">>, {self(), make_ref(), hd(erlang:ports())}],
                                       b => -(1 bsl 100), c => "str", d => [1 | 2], e => <<1:3>>}),
                      term_to_binary(lists:seq(1, 300), [compressed]),
                      <<131, 108, 3:32, (atom_ext(A))/binary, 97, 1, 88, (atom_ext(A))/binary,
                        1:32, 2:32, 3:32, 106>>],
             _ = [msgflow_etf:decode(S, ?MAX) || S <- Seeds],
             Before = erlang:system_info(atom_count),
             [begin
                  <<H:P/binary, X, T/binary>> = S,
                  [{_, _} = msgflow_etf:decode(<<H/binary, (X bxor (1 bsl B)), T/binary>>, ?MAX)
                   || B <- lists:seq(0, 7)],
                  {_, _} = msgflow_etf:decode(H, ?MAX)
              end || S <- Seeds, P <- lists:seq(0, byte_size(S) - 1)],
             ?assertEqual(Before, erlang:system_info(atom_count))
     end}.
