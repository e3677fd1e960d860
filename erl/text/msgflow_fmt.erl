%%% @doc Text for tables and reports: endpoints as the VM shows them,
%%% `M:F/A', numbers with thousands separators, cells that fit their
%%% column.  Pure: it reads nothing of the live system (msgflow_labels
%%% does that).
-module(msgflow_fmt).
-export([text/1, run_state/1, run_state/2, on_nodes/1, missing/1, behind/1, wrap/3, xml/1, endpoint/1, int/1, rate/1, short_rate/1, cell/3, label_cell/3, label_cell/4, rcell/2, ellipsis/1,
         endpoint_cell/4, ellipsis/0, mfa/3, name/1, kind/2, main_kind/4, columns/0, rows/0,
         micros/1, bytes/1, visible/1]).

%% @doc The terminal's width in columns (io:columns/0 of the caller's
%% group leader, at least 40), 80 where there is none.
-spec columns() -> pos_integer().
columns() ->
    geometry(io:columns(), 40, 80).

%% @doc The terminal's height in lines (io:rows/0 of the caller's group
%% leader, at least 10), 24 where there is none.
-spec rows() -> pos_integer().
rows() ->
    geometry(io:rows(), 10, 24).

geometry({ok, N}, Min, _) -> max(N, Min);
geometry(_, _, Default) -> Default.

%% @doc Text a terminal, a scrape or a graph may be given: every control
%% character (C0, DEL, C1) and every bidirectional mark, embedding,
%% override or isolate (U+061C, U+200E-U+200F, U+202A-U+202E,
%% U+2066-U+2069) shown escaped, as Erlang writes it in a string: `\e',
%% `\n', `\r', `\t', else `\xHH' (up to U+00FF) or `\x{HHHH}'; a byte
%% that is no UTF-8 likewise `\xHH'.  Anything else is left as it is, a
%% backslash too, so that visible(visible(T)) =:= visible(T).  Every
%% renderer applies it to the names, labels and tags it prints (a process
%% registered as `'\e[31mEVIL'' must not colour the operator's terminal),
%% and counts widths in the escaped form; msgflow-top and msgflow-report
%% apply the same rule as they decode (tools/c/mf_dump.c).
-spec visible(unicode:chardata()) -> binary().
visible(Text) when is_binary(Text) ->
    case plain(Text) of
        true -> Text;
        false -> iolist_to_binary(escape(Text))
    end;
visible(Text) ->
    case unicode:characters_to_binary(Text) of
        B when is_binary(B) -> visible(B);
        {_, Good, Rest} -> <<(visible(Good))/binary, (visible(iolist_to_binary(Rest)))/binary>>
    end.

%% Whether B has nothing to escape (ASCII printable, the common case).
plain(<<C, Rest/binary>>) when C >= 16#20, C < 16#7F -> plain(Rest);
plain(<<>>) -> true;
plain(_) -> false.

escape(<<C/utf8, Rest/binary>>) -> [escape_char(C) | escape(Rest)];
escape(<<B, Rest/binary>>) -> [hex(B) | escape(Rest)];
escape(<<>>) -> [].

escape_char($\e) -> "\\e";
escape_char($\n) -> "\\n";
escape_char($\r) -> "\\r";
escape_char($\t) -> "\\t";
escape_char(C) when C < 16#20; C =:= 16#7F; C >= 16#80, C =< 16#9F -> hex(C);
escape_char(C) when C =:= 16#61C; C =:= 16#200E; C =:= 16#200F; C >= 16#202A, C =< 16#202E;
                    C >= 16#2066, C =< 16#2069 ->
    io_lib:format("\\x{~4.16.0B}", [C]);
escape_char(C) -> <<C/utf8>>.

hex(C) -> io_lib:format("\\x~2.16.0B", [C]).

%% @doc A kind and tag as the views write them: `call get', `reply',
%% `info tick'.
-spec kind(atom() | binary(), atom() | binary()) -> binary().
kind(none, _) -> <<"-">>;
kind(Kind, Tag) -> iolist_to_binary([name(Kind), " ", name(Tag)]).

%% @doc The main kind of a row's kinds with its share of Total in Width
%% columns, as the top table shows it: `call get 92%'; a long tag is cut
%% (Ellipsis), the kind and the share never are; `-' with kinds off.
-spec main_kind([{atom() | binary(), atom() | binary(), pos_integer()}], non_neg_integer(), pos_integer(),
                string()) -> string().
main_kind([], _, Width, Ellipsis) ->
    cell("-", Width, Ellipsis);
main_kind([{K, T, N} | _], Total, Width, Ellipsis) ->
    Share = case Total > 0 of
                true -> io_lib:format(" ~b%", [min(100, round(100 * N / Total))]);
                false -> ""
            end,
    Kind = unicode:characters_to_list(name(K)),
    Room = Width - length(Kind) - 1 - length(lists:flatten(Share)),
    Tag = unicode:characters_to_list(name(T)),
    Text = case Room >= 2 of
               true -> [Kind, " ", string:trim(cell(Tag, min(Room, string:length(Tag)), Ellipsis), trailing),
                        Share];
               false -> [Kind, Share]
           end,
    cell(Text, Width, Ellipsis).

%% @doc `M:F/A' as a binary (A may be the argument list); for an Elixir
%% module as Elixir writes it, `My.Worker.init/1'.  A fun's own name
%% (`'-start/0-fun-0-'', as erlang:fun_info/2 and stack frames give it)
%% reads as the function it was written in: `ux_load:start/0 fun'.
-spec mfa(atom(), atom(), arity() | list()) -> binary().
mfa(M, F, A) when is_list(A) -> mfa(M, F, length(A));
mfa(M, F, A) ->
    case fun_home(F) of
        false ->
            plain_mfa(M, F, A);
        Home ->
            case elixir(M) of
                false -> <<(atom_text(M))/binary, $:, Home/binary, " fun">>;
                Alias -> <<Alias/binary, $., Home/binary, " fun">>
            end
    end.

%% `start/0' for a fun's name `'-start/0-fun-0-'' (also
%% `'-start/0-lc$^0/1-0-'' and the like: the function is what comes
%% between the first `-' and the next one), else false.
fun_home(F) ->
    case atom_to_binary(F) of
        <<"-", Rest/binary>> ->
            case binary:match(Rest, <<"-">>) of
                {Pos, 1} ->
                    Home = binary:part(Rest, 0, Pos),
                    case string:split(Home, <<"/">>, trailing) of
                        [Name, Arity] when Name =/= <<>> ->
                            try binary_to_integer(Arity) of
                                _ -> visible(Home)
                            catch
                                error:badarg -> false
                            end;
                        _ -> false
                    end;
                nomatch -> false
            end;
        _ -> false
    end.

plain_mfa(M, F, A) ->
    %% as ~w:~w/~w would write it; a collector labels every new process
    %% with it, so the common atoms skip io_lib's quoting rules
    case elixir(M) of
        false ->
            <<(atom_text(M))/binary, $:, (atom_text(F))/binary, $/,
              (integer_to_binary(A))/binary>>;
        Alias ->
            <<Alias/binary, $., (atom_text(F))/binary, $/, (integer_to_binary(A))/binary>>
    end.

%% @doc A module or registered name as a label: an Elixir alias without
%% its `Elixir.' prefix (`'Elixir.My.Worker'' is `My.Worker'), any other
%% atom's text as it is; a name read from a file that this VM has no
%% atom for (msgflow_etf) is its binary, shown the same way.
-spec name(atom() | binary()) -> binary().
name(Atom) ->
    case elixir(Atom) of
        false -> visible(text(Atom));
        Alias -> Alias
    end.

%% @doc An atom's text, or a name read from a file that this VM has no
%% atom for (msgflow_etf), which is its text already: as it is, for JSON
%% (escaped by the encoder, not here).
-spec text(atom() | binary()) -> binary().
text(A) when is_atom(A) -> atom_to_binary(A);
text(B) when is_binary(B) -> B.

%% The alias an Elixir module name stands for, or false.
elixir(Atom) ->
    case text(Atom) of
        <<"Elixir.", Alias/binary>> when Alias =/= <<>> -> visible(Alias);
        _ -> false
    end.

%% An atom as ~w writes it: bare when it is a lower-case letter followed by
%% letters, digits, _ and @ and not a reserved word; else io_lib decides.
atom_text(Atom) ->
    B = atom_to_binary(Atom),
    case B of
        <<C, Rest/binary>> when C >= $a, C =< $z ->
            case bare(Rest) andalso not reserved(Atom) of
                true -> B;
                false -> unicode:characters_to_binary(io_lib:write_atom(Atom))
            end;
        _ ->
            unicode:characters_to_binary(io_lib:write_atom(Atom))
    end.

bare(<<C, Rest/binary>>) when C >= $a, C =< $z; C >= $A, C =< $Z; C >= $0, C =< $9;
                              C =:= $_; C =:= $@ ->
    bare(Rest);
bare(<<>>) -> true;
bare(_) -> false.

%% Erlang's reserved words (with `maybe' and `else' of the maybe feature),
%% which ~w quotes.
reserved(A) ->
    lists:member(A, ['after', 'and', 'andalso', 'band', 'begin', 'bnot', 'bor', 'bsl', 'bsr',
                     'bxor', 'case', 'catch', 'cond', 'div', 'else', 'end', 'fun', 'if', 'let',
                     'maybe', 'not', 'of', 'or', 'orelse', 'receive', 'rem', 'try', 'when',
                     'xor']).

%% @doc The endpoint as the VM reported it, in text: `<0.80.0>',
%% `#Port<0.5>', `name', `{name,node@host}', `<9.80.0>@node@host',
%% `alias #Ref<...>'; a group of exited endpoints `exited#LabelId'.
-spec endpoint(term()) -> binary().
endpoint(Pid) when is_pid(Pid), node(Pid) =:= node() ->
    list_to_binary(pid_to_list(Pid));
endpoint(Pid) when is_pid(Pid) ->
    iolist_to_binary([pid_to_list(Pid), "@", atom_to_list(node(Pid))]);
endpoint(Ref) when is_reference(Ref) ->
    iolist_to_binary(["alias ", ref_to_list(Ref)]);
endpoint(Atom) when is_atom(Atom) ->
    visible(atom_to_binary(Atom));
endpoint(Text) when is_binary(Text) ->
    %% (a name, or a pid of a node, that a file held and this VM has no
    %% atom for: msgflow_etf)
    visible(Text);
endpoint({Name, Node}) when is_binary(Name); is_binary(Node) ->
    iolist_to_binary(["{", endpoint(Name), ",", endpoint(Node), "}"]);
endpoint({exited, Id, _Node}) when is_integer(Id) ->
    %% the exited endpoints of one label id (msgflow_labels:rollup_key/2)
    <<"exited#", (integer_to_binary(Id))/binary>>;
endpoint(Term) ->
    iolist_to_binary(io_lib:format("~0tp", [Term])).

%% @doc An integer with thousands separators: `int(1234567) -> "1,234,567"'.
-spec int(integer()) -> string().
int(N) when N < 0 -> [$- | int(-N)];
int(N) -> group(integer_to_list(N)).

group(Digits) when length(Digits) =< 3 -> Digits;
group(Digits) ->
    {Head, Tail} = lists:split(length(Digits) - 3, Digits),
    group(Head) ++ [$, | Tail].

%% @doc A rate (messages/s) with one decimal and separators: `"1,234.5"'.
-spec rate(number()) -> string().
rate(R) ->
    Tenths = round(R * 10),
    int(Tenths div 10) ++ [$. | integer_to_list(Tenths rem 10)].

%% @doc A duration given in µs as a person reads it: `38us', `2.1ms',
%% `1.20s'; `-' for undefined.
-spec micros(number() | undefined) -> string().
micros(undefined) -> "-";
micros(U) when U < 10 -> lists:flatten(io_lib:format("~.1fus", [float(U)]));
micros(U) when U < 1000 -> lists:flatten(io_lib:format("~bus", [round(U)]));
micros(U) when U < 10000 -> lists:flatten(io_lib:format("~.2fms", [U / 1000]));
micros(U) when U < 1000000 -> lists:flatten(io_lib:format("~.1fms", [U / 1000]));
micros(U) -> lists:flatten(io_lib:format("~.2fs", [U / 1000000])).

%% @doc Text left-aligned in exactly Width columns; longer text is cut and
%% ends with Ellipsis (one column wide).
-spec cell(unicode:chardata(), pos_integer(), string()) -> string().
cell(Text, Width, Ellipsis) ->
    S = unicode:characters_to_list(visible(Text)),
    case string:length(S) of
        L when L =< Width -> S ++ lists:duplicate(Width - L, $\s);
        _ -> string:slice(S, 0, Width - 1) ++ Ellipsis
    end.

%% @doc A label in Width columns: label_cell/4 with no text beside it.
-spec label_cell(unicode:chardata(), pos_integer(), string()) -> string().
label_cell(Label, Width, Ellipsis) ->
    label_cell(Label, none, Width, Ellipsis).

%% @doc A label, and Text beside it (the pid or port of an endpoint whose
%% label others share; `none' for no text), in exactly Width columns,
%% keeping what a person recognises.  The label's name part is all of it
%% but a last `:f/1' (or `.f/1', or `:f/1 fun'): a registered name, a
%% module, a port's driver and owner's module.  The first of these that
%% fits is shown:
%% <ol>
%% <li>the label and the text: `xmpp_stream_in:init/1 <0.181.0>';</li>
%% <li>the label and the text's short form, the pid's or port's number:
%% `xmpp_stream_in:init/1 <181>';</li>
%% <li>the name part, Ellipsis, and the short text: `xmpp_stream_in~ <181>';</li>
%% <li>the name part cut at its end, and the short text when nine columns
%% are left for the name: `tcp_inet <- httpd_~ <181>'; else the name part
%% alone, cut.</li>
%% </ol>
%% So from 12 columns on a cell starts with the label's first 8 characters
%% or its whole name part, and rows that read the same are told apart by
%% the number.  msgflow-top and msgflow-report cut by the same rule
%% (tools/c/mf_table.c).
-spec label_cell(unicode:chardata(), unicode:chardata() | none, pos_integer(), string()) ->
          string().
label_cell(Label0, Text0, Width, Ellipsis) ->
    Label = unicode:characters_to_list(visible(Label0)),
    {Name, Rest} = name_part(Label),
    Len = fun string:length/1,
    {Text, Short} = case Text0 of
                        none -> {none, none};
                        _ -> T = unicode:characters_to_list(visible(Text0)), {T, short_text(T)}
                    end,
    With = fun(L, none) -> L; (L, T) -> L ++ " " ++ T end,
    Candidates = [With(Label, Text) | [With(Label, Short) || Short =/= none]]
        ++ [With(Name ++ Ellipsis, Short) || Rest =/= []],
    case [C || C <- Candidates, Len(C) =< Width] of
        [Fit | _] ->
            pad(Fit, Width);
        [] when Short =/= none, Width - 1 - length(Short) >= 9 ->
            cell(Name, Width - 1 - length(Short), Ellipsis) ++ " " ++ Short;
        [] ->
            cell(Name, Width, Ellipsis)
    end.

pad(S, Width) ->
    S ++ lists:duplicate(max(0, Width - string:length(S)), $\s).

%% A label's name part and the rest: `xmpp_stream_in' and `:init/1'.
name_part(Label) ->
    case re:run(Label, "^(.+?)([:.][^:./ ]+/[0-9]+(?: fun)?)\\z",
                [unicode, dotall, {capture, all_but_first, list}]) of
        {match, [Name, Rest]} -> {Name, Rest};
        nomatch -> {Label, []}
    end.

%% The short form of a pid's or port's text, its number: `<181>' for
%% `<0.181.0>', `<8>' for `#Port<0.8>' (the second number, its last five
%% digits); other text as it is.
short_text(T) ->
    case re:run(T, "[0-9]+", [unicode, global, {capture, all, list}]) of
        {match, [_, [D] | _]} -> "<" ++ lists:nthtail(max(0, length(D) - 5), D) ++ ">";
        _ -> T
    end.

%% @doc An endpoint's label in Width columns, from what a view says of it
%% (msgflow_rows:endpoint_info(), or `undefined' for a key it did not
%% label: its text then), by label_cell/4: a label other keys share has
%% the endpoint's text (pid or port) beside it.
-spec endpoint_cell(map() | undefined, term(), pos_integer(), string()) -> string().
endpoint_cell(#{label := L, display := L}, _Key, Width, Ellipsis) ->
    label_cell(L, none, Width, Ellipsis);
endpoint_cell(#{label := L, text := T}, _Key, Width, Ellipsis) ->
    label_cell(L, T, Width, Ellipsis);
endpoint_cell(undefined, Key, Width, Ellipsis) ->
    label_cell(endpoint(Key), none, Width, Ellipsis).

%% @doc The ellipsis the group leader can print: `\x{2026}' on a unicode
%% device, `~' on a latin1 one (as `erl -noshell' has).  An io request:
%% for the shell's renderer, which prints to that group leader.
-spec ellipsis() -> string().
ellipsis() ->
    case io:getopts() of
        Opts when is_list(Opts) ->
            case lists:keyfind(encoding, 1, Opts) of
                {encoding, unicode} -> [16#2026];
                _ -> "~"
            end;
        _ ->
            "~"
    end.

%% @doc The ellipsis a view's text cuts cells with: the area's (the shell
%% gives its group leader's, ellipsis/0), else `\x{2026}' (the web page,
%% msgflow-top and the files are UTF-8).  Asks nothing of any process.
-spec ellipsis(#{ellipsis => string(), atom() => term()}) -> string().
ellipsis(Area) ->
    maps:get(ellipsis, Area, [16#2026]).

%% @doc Text right-aligned in Width columns (numbers are never cut).
-spec rcell(unicode:chardata(), pos_integer()) -> string().
rcell(Text, Width) ->
    S = unicode:characters_to_list(Text),
    lists:duplicate(max(0, Width - string:length(S)), $\s) ++ S.

%% @doc A rate (messages/s) in at most 7 columns: one decimal below 100,
%% whole numbers with separators up to 999,999, then `1.2M'.
-spec short_rate(number()) -> string().
short_rate(R) when R < 99.95 -> rate(R);
short_rate(R) when R < 999999.5 -> int(round(R));
short_rate(R) -> float_to_list(R / 1.0e6, [{decimals, 1}]) ++ "M".

%% @doc Bytes in at most 6 characters: `512', `9.8K', `1.0M', `3.2G'
%% (powers of 1,024).
-spec bytes(non_neg_integer()) -> string().
bytes(B) when B < 1024 -> integer_to_list(B);
bytes(B) when B < 1024 * 1024 -> float_to_list(B / 1024, [{decimals, 1}]) ++ "K";
bytes(B) when B < 1024 * 1024 * 1024 -> float_to_list(B / (1024 * 1024), [{decimals, 1}]) ++ "M";
bytes(B) -> float_to_list(B / (1024 * 1024 * 1024), [{decimals, 1}]) ++ "G".

%% @doc `"running"' or `"stopped"', as a view's head says it.
-spec run_state(boolean()) -> string().
run_state(true) -> "running";
run_state(false) -> "stopped".

%% @doc run_state/1, or for a view of a range of the history (its value
%% has `range', msgflow_query) `"history 2026-11-26 04:00:00 to
%% 04:10:00"' (local time).
-spec run_state(boolean(), map()) -> iolist().
run_state(_, #{range := #{from := F, to := T}}) ->
    {DF, TF} = local(F),
    {DT, TT} = local(T),
    ["history ", DF, " ", TF, " to ", case DF =:= DT of true -> []; false -> [DT, " "] end, TT];
run_state(Running, _) ->
    run_state(Running).

local(Ms) ->
    {{Y, Mo, D}, {H, Mi, S}} = calendar:system_time_to_local_time(Ms, millisecond),
    {io_lib:format("~4..0b-~2..0b-~2..0b", [Y, Mo, D]), io_lib:format("~2..0b:~2..0b:~2..0b", [H, Mi, S])}.

%% @doc `" on 3 nodes"' for a value of several nodes' counts, else `""'.
-spec on_nodes([node()]) -> iolist().
on_nodes(Nodes) when length(Nodes) > 1 -> io_lib:format(" on ~b nodes", [length(Nodes)]);
on_nodes(_) -> "".

%% @doc The line a view prints for the nodes that did not answer in time
%% (msgflow_query's `missing'), or nothing.
-spec missing([{node(), term()}]) -> iolist().
missing([]) ->
    [];
missing(Missing) ->
    io_lib:format("not in it: ~ts~n",
                  [lists:join(", ", [io_lib:format("~s (~0tp)", [N, Why]) || {N, Why} <- Missing])]).

%% @doc The line a view prints when its counts are those that stood
%% while the collector was behind (msgflow_collector:store/1): how long
%% before the view its last whole snapshot was taken; or nothing.
-spec behind(map()) -> iolist().
behind(#{behind := true, snapshot_at := At, taken_at := Taken}) when is_integer(At) ->
    %% (within 80 columns)
    io_lib:format("the collector is behind: counts of ~.1f s ago, some newer (sync => true "
                  "waits)~n", [max(0, Taken - At) / 1000]);
behind(#{behind := true}) ->
    "the collector is behind: part of its first merge (sync => true waits)\n";
behind(_) ->
    [].

%% @doc Text in lines of Width columns, broken at spaces; lines after the
%% first indented by Indent.
-spec wrap(string(), pos_integer(), non_neg_integer()) -> unicode:chardata().
wrap(Text, Width, Indent) ->
    Words = string:lexemes(Text, " "),
    {Lines, Last} = lists:foldl(fun(W, {Done, []}) -> {Done, W};
                                   (W, {Done, Cur}) ->
                                        case string:length(Cur) + 1 + string:length(W) > Width of
                                            true -> {[Cur | Done], W};
                                            false -> {Done, Cur ++ " " ++ W}
                                        end
                                end, {[], []}, Words),
    lists:join([$\n | lists:duplicate(Indent, $\s)], lists:reverse([Last | Lines])) ++ "\n".

%% @doc Text escaped for XML and HTML (& < > "), as a UTF-8 binary.
-spec xml(unicode:chardata()) -> binary().
xml(T) ->
    B = unicode:characters_to_binary(T),
    lists:foldl(fun({F, R}, Acc) -> binary:replace(Acc, F, R, [global]) end, B,
                [{<<"&">>, <<"&amp;">>}, {<<"<">>, <<"&lt;">>}, {<<">">>, <<"&gt;">>},
                 {<<"\"">>, <<"&quot;">>}]).
