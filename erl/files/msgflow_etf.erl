%%% @doc Reading the external term format from a file without making
%%% atoms: what the history's segments and diff/2's dumps are read with.
%%%
%%% `binary_to_term/1' makes every atom a term names (a file of a million
%%% names fills the atom table and the VM dies); `binary_to_term/2' with
%%% `safe' makes none but refuses a term naming one this VM lacks (the
%%% registered names and modules of another node, or of this one before a
%%% restart).  decode/2 tries `safe' first; refused, it walks the term
%%% itself: an atom this VM has is that atom, one it lacks is its name as
%%% a UTF-8 binary, and a pid, port or reference of a node whose name is
%%% no atom here is the text views print for it (`<0.42.0>@prod@host',
%%% `#Port<0.7>@prod@host', `#Ref<0.1.2.3>@prod@host').  The walk refuses
%%% funs (`safe' reads those of modules loaded here), terms nested over 100
%%% deep, integers over 1 kB and compression inside the term.  A
%%% compressed term is inflated only when it says it is at most Max bytes,
%%% and never past what it says.  Pure; any process.
-module(msgflow_etf).

-export([decode/2]).

%% how deep a term read by the walk may nest (msgflow's files nest a few
%% levels): deeper is damaged, never a deep recursion
-define(MAX_DEPTH, 100).
%% the largest tuple and integer (bytes) the walk makes: larger is damaged
-define(MAX_ARITY, 16#FFFFFF).
-define(MAX_BIG_BYTES, 1024).

%% @doc The term Bin encodes, made without new atoms, or `{error,
%% Reason}': `{too_big, Bytes, Max}' (it would inflate to Bytes),
%% `{bad_term, Offset}' (the bytes at Offset of the term, inflated, are no
%% term this reader takes: damaged, a fun, or not the external format).
-spec decode(binary(), pos_integer()) -> {ok, term()} | {error, term()}.
decode(<<131, 80, USize:32, _/binary>>, Max) when USize > Max ->
    {error, {too_big, USize, Max}};
decode(Bin, _Max) ->
    try binary_to_term(Bin, [safe, used]) of
        {T, Used} when Used =:= byte_size(Bin) -> {ok, T};
        {_, Used} -> {error, {bad_term, Used}}     %% (bytes after the term)
    catch
        error:badarg -> walk(Bin)
    end.

walk(<<131, 80, USize:32, Z/binary>>) ->
    case inflate(Z, USize) of
        {ok, Plain} -> plain(Plain, 6);
        error -> {error, {bad_term, 6}}
    end;
walk(<<131, Plain/binary>>) ->
    plain(Plain, 1);
walk(_) ->
    {error, {bad_term, 0}}.

%% The one term Plain holds (no compression inside: a term never nests
%% one), Off the offset of Plain in the file's term.
plain(Plain, Off) ->
    try t(Plain, ?MAX_DEPTH) of
        {T, <<>>} -> {ok, T};
        {_, Rest} -> {error, {bad_term, Off + byte_size(Plain) - byte_size(Rest)}}
    catch
        throw:{bad, Rest} -> {error, {bad_term, Off + byte_size(Plain) - byte_size(Rest)}};
        error:_ -> {error, {bad_term, Off}}
    end.

%% Z inflated, if it is exactly USize bytes (zlib's chunks stop it at
%% the first past USize: a bomb is never inflated whole).
inflate(Z, USize) ->
    S = zlib:open(),
    try
        ok = zlib:inflateInit(S),
        chunks(S, zlib:safeInflate(S, Z), USize, 0, [])
    catch
        error:_ -> error
    after
        zlib:close(S)
    end.

chunks(S, {continue, Out}, USize, Got0, Acc) ->
    case Got0 + iolist_size(Out) of
        Got when Got > USize -> error;
        Got -> chunks(S, zlib:safeInflate(S, []), USize, Got, [Out | Acc])
    end;
chunks(_, {finished, Out}, USize, Got0, Acc) ->
    case Got0 + iolist_size(Out) of
        USize -> {ok, iolist_to_binary(lists:reverse(Acc, [Out]))};
        _ -> error
    end.

%% One term at the head of B and the bytes after it, nested at most Depth
%% deep; throws {bad, Where}.
t(B, 0) -> throw({bad, B});
t(<<97, I, R/binary>>, _) -> {I, R};
t(<<98, I:32/signed, R/binary>>, _) -> {I, R};
t(<<70, F:64/float, R/binary>>, _) -> {F, R};
t(<<110, N, Sign, D:N/binary, R/binary>>, _) -> {big(Sign, D), R};
t(<<111, N:32, Sign, D:N/binary, R/binary>>, _) when N =< ?MAX_BIG_BYTES -> {big(Sign, D), R};
t(<<100, L:16, A:L/binary, R/binary>>, _) -> {atom(A, latin1), R};
t(<<115, L, A:L/binary, R/binary>>, _) -> {atom(A, latin1), R};
t(<<118, L:16, A:L/binary, R/binary>>, _) -> {atom(A, utf8), R};
t(<<119, L, A:L/binary, R/binary>>, _) -> {atom(A, utf8), R};
t(<<104, N, R/binary>>, D) -> tuple(N, R, D - 1);
t(<<105, N:32, _/binary>> = B, _) when N > ?MAX_ARITY -> throw({bad, B});
t(<<105, N:32, R/binary>>, D) -> tuple(N, R, D - 1);
t(<<106, R/binary>>, _) -> {[], R};
t(<<107, L:16, S:L/binary, R/binary>>, _) -> {binary_to_list(S), R};
t(<<108, N:32, R/binary>>, D) -> list(N, R, [], D - 1);
t(<<109, L:32, B:L/binary, R/binary>>, _) -> {binary:copy(B), R};
t(<<77, L:32, Bits, B:L/binary, R/binary>>, _) when L > 0, Bits >= 1, Bits =< 8 ->
    Whole = L - 1,
    <<H:Whole/binary, Last:Bits/bits, _/bits>> = B,
    {<<H/binary, Last/bits>>, R};
t(<<116, N:32, R/binary>>, D) -> map(N, R, [], D - 1);
t(<<Tag, R0/binary>> = B, D) when Tag =:= 88; Tag =:= 103; Tag =:= 89; Tag =:= 102; Tag =:= 120;
                                Tag =:= 101 ->
    {Node, R1} = t(R0, D),
    {Tail, Text} = case {Tag, R1} of
                       {88, <<I:32, S:32, _:32, _/binary>>} -> {12, fmt("<0.~b.~b>", [I, S])};
                       {103, <<I:32, S:32, _, _/binary>>} -> {9, fmt("<0.~b.~b>", [I, S])};
                       {89, <<I:32, _:32, _/binary>>} -> {8, fmt("#Port<0.~b>", [I])};
                       {102, <<I:32, _, _/binary>>} -> {5, fmt("#Port<0.~b>", [I])};
                       {120, <<I:64, _:32, _/binary>>} -> {12, fmt("#Port<0.~b>", [I])};
                       {101, <<I:32, _, _/binary>>} -> {5, fmt("#Ref<0.~b>", [I])};
                       _ -> throw({bad, R1})
                   end,
    remote(B, Node, R1, Tail, Text);
t(<<Tag, N:16, R0/binary>> = B, D) when (Tag =:= 90 orelse Tag =:= 114), N >= 1, N =< 5 ->
    {Node, R1} = t(R0, D),
    Cr = case Tag of 90 -> 4; 114 -> 1 end,
    case R1 of
        <<_:Cr/binary, Ids:(4 * N)/binary, _/binary>> ->
            Words = lists:reverse([integer_to_list(W) || <<W:32>> <= Ids]),
            remote(B, Node, R1, Cr + 4 * N, iolist_to_binary(["#Ref<0.", lists:join(".", Words), ">"]));
        _ ->
            throw({bad, R1})
    end;
t(B, _) -> throw({bad, B}).

%% The pid, port or reference that starts at B, whose node (an atom or,
%% one this VM lacks, its name) ends at R, Tail bytes before what follows
%% it: the term itself on a node this VM knows, else Text@Node.
remote(B, Node, R, Tail, Text) ->
    Len = byte_size(B) - byte_size(R) + Tail,
    <<Whole:Len/binary, Rest/binary>> = B,
    {if is_atom(Node) ->
             try binary_to_term(<<131, Whole/binary>>, [safe])
             catch error:badarg -> throw({bad, B})
             end;
        is_binary(Node) -> <<Text/binary, "@", Node/binary>>;
        true -> throw({bad, B})
     end, Rest}.

fmt(F, A) -> iolist_to_binary(io_lib:format(F, A)).

big(0, D) -> binary:decode_unsigned(D, little);
big(1, D) -> -binary:decode_unsigned(D, little);
big(_, D) -> throw({bad, D}).

%% An atom this VM has, else its name as UTF-8.
atom(A, Enc) ->
    try binary_to_existing_atom(A, Enc)
    catch
        error:badarg when Enc =:= latin1 -> unicode:characters_to_binary(A, latin1);
        error:badarg ->
            case unicode:characters_to_binary(A) of
                U when is_binary(U) -> U;
                _ -> throw({bad, A})
            end
    end.

tuple(N, R0, D) ->
    {Es, R} = elements(N, R0, [], D),
    {list_to_tuple(Es), R}.

elements(0, R, Acc, _) -> {lists:reverse(Acc), R};
elements(N, R0, Acc, D) -> {E, R} = t(R0, D), elements(N - 1, R, [E | Acc], D).

list(0, R0, Acc, D) ->
    {Tail, R} = t(R0, D),
    {lists:reverse(Acc, Tail), R};
list(N, R0, Acc, D) ->
    {E, R} = t(R0, D),
    list(N - 1, R, [E | Acc], D).

map(0, R, Acc, _) -> {maps:from_list(Acc), R};
map(N, R0, Acc, D) ->
    {K, R1} = t(R0, D),
    {V, R} = t(R1, D),
    map(N - 1, R, [{K, V} | Acc], D).
