%%% Every shell session in the README and the guides runs as written.
%%%
%%% A session is an `erlang' code block whose first line is a prompt
%%% (`1> ').  Its expressions are typed, in order, into a real Erlang shell
%%% (`erl' of this release with msgflow on its code path, as `make shell'
%%% opens; its input a pipe, so it prints for 80 columns), and what the
%%% shell prints after each prompt is compared with what the doc shows
%%% after the number masks: every number (with its thousands separators,
%%% decimals and a rate's `^'/`v' mark) reads as `N', so pids, counts,
%%% rates and times may differ from run to run; whitespace is left out; a
%%% line of its own `...' in the doc stands for any output.
-module(msgflow_docs_SUITE).
-include_lib("common_test/include/ct.hrl").
-include_lib("stdlib/include/assert.hrl").

-export([all/0, readme/1, guides/1, masks/1, doc_chunks/1]).
-export([sessions/1, unrun/1, parse/1, matches/2, mask/1, shell/1]).

all() ->
    [masks, doc_chunks, readme, guides].

%% h(msgflow, start) has the facade's doc (the build writes the chunks
%% beside the ebin); every other module is hidden.
doc_chunks(_Config) ->
    {ok, Docs} = code:get_doc(msgflow),
    Start = unicode:characters_to_binary(shell_docs:render(msgflow, start, Docs)),
    {_, _} = binary:match(Start, <<"Starts counting">>),
    {_, _} = binary:match(Start, <<"call_sample">>),
    Fns = [F || {{function, F, _}, _, _, D, _} <- element(7, Docs), is_map(D), D =/= #{}],
    [] = [F || F <- [start, stop, top, view, info, export, follow, web], not lists:member(F, Fns)],
    {ok, Hidden} = code:get_doc(msgflow_collector),
    hidden = element(5, Hidden),
    ok.

%% The comparison itself: numbers masked, labels and words not.
masks(_Config) ->
    true = matches("  1 kv    erl_eval… <97>   1,000  62,500^  call get 100%",
                   <<"  1 kv    erl_eval~ <171>   1,000  45,455  call get 100%">>),
    false = matches("  1 kv    erl_eval… <97>   1,000", <<"  1 db    erl_eval~ <97>   1,000">>),
    false = matches("call get 100%", <<"cast get 100%">>),
    true = matches("header\n...\nok", <<"header\nrow 1\nrow 2\nok\n">>),
    false = matches("header\n...\nok", <<"header\nrow 1\nerror\n">>),
    [{3, [{3, "a = 1.", "ok"}, {5, "f(x,\n y).", "2"}]}] =
        sessions(<<"text\n```erlang\n1> a = 1.\nok\n2> f(x,\n y).\n2\n```\n```sh\n1> x\n```\n">>),
    %% prompts in a block that is no session: found (the sh block above,
    %% a session with a line before its first prompt); a transcript is not
    [9] = unrun(<<"text\n```erlang\n1> a = 1.\nok\n2> f(x,\n y).\n2\n```\n```sh\n1> x\n```\n">>),
    [1] = unrun(<<"```erlang\n%% first\n1> a.\n```\n```\n$ erl\n1> b.\n```\n">>),
    true = matches("took 21.0ms, rate => 1.6e5", <<"took 655us, rate => 164835.1">>),
    ok.

readme(_Config) ->
    run_files([filename:join(msgflow_test_lib:root(), "README.md")]).

guides(_Config) ->
    run_files(filelib:wildcard(filename:join([msgflow_test_lib:root(), "guides", "*.md"]))).

%% Runs every session of Files, each in a shell of its own; fails with
%% every mismatch of them all, and when a block has prompts but is no
%% session (so would not be run): a terminal's transcript (its first line
%% `$ ...', run by msgflow_recipes_SUITE) is the one exception.
run_files(Files) ->
    Unrun = [{filename:basename(F), L} || F <- Files, L <- unrun(element(2, file:read_file(F)))],
    ?assertEqual([], Unrun),
    Ran = [{F, sessions(element(2, file:read_file(F)))} || F <- Files],
    ?assertNotEqual([], lists:append([Ss || {_, Ss} <- Ran])),
    Failures = lists:append([run_session(F, S) || {F, Ss} <- Ran, S <- Ss]),
    ct:comment("~b sessions in ~b files", [length(lists:append([Ss || {_, Ss} <- Ran])),
                                           length(Files)]),
    case Failures of
        [] -> ok;
        _ -> ct:fail({docs_differ, Failures})
    end.

%% The steps whose output differs from the doc's.
run_session(File, {Line, Steps}) ->
    Got = shell([Expr || {_, Expr, _} <- Steps]),
    case length(Got) =:= length(Steps) of
        true ->
            [#{file => filename:basename(File), line => L, expr => Expr, doc => Want, got => G}
             || {{L, Expr, Want}, G0} <- lists:zip(Steps, Got), G <- [without_alerts(G0)], not matches(Want, G)];
        false ->
            [#{file => filename:basename(File), line => Line, shell => Got}]
    end.

%% Output less the bottleneck detector's log reports (msgflow_alerts):
%% they come when a window shows a root, during whichever expression
%% runs then, not as any expression's output (guides/bottlenecks.md
%% shows one).
without_alerts(Got) ->
    re:replace(Got, "=(WARNING|NOTICE) REPORT==== [^\\n]* ===\\nmsgflow bottleneck[^\\n]*\\n", "",
               [global, unicode, {return, binary}]).

%% What a fresh shell prints after each of Exprs, typed in turn (each on
%% one line), then `halt().'.
-spec shell([string()]) -> [binary()].
shell(Exprs) ->
    Erl = filename:join([code:root_dir(), "bin", "erl"]),
    Ebin = filename:dirname(code:which(msgflow)),
    Port = open_port({spawn_executable, Erl},
                     [{args, ["-pa", Ebin]}, binary, exit_status, use_stdio,
                      stderr_to_stdout]),
    Input = [[re:replace(E, "\\s*\n\\s*", " ", [global, unicode]), "\n"] || E <- Exprs],
    true = port_command(Port, [Input, "halt().\n"]),
    Out = collect(Port, []),
    %% the banner, then one part per prompt: the last is halt()'s
    [_Banner | Parts] = re:split(Out, "^\\d+> ", [multiline, unicode]),
    lists:sublist(Parts, length(Exprs)).

collect(Port, Acc) ->
    receive
        {Port, {data, D}} -> collect(Port, [D | Acc]);
        {Port, {exit_status, _}} -> iolist_to_binary(lists:reverse(Acc))
    after 120000 ->
            ct:fail({shell_hangs, iolist_to_binary(lists:reverse(Acc))})
    end.

%%% Reading the docs

%% The first lines of the fenced blocks that hold a prompt line (`1> ')
%% but are no session: not `erlang', or not starting with a prompt, and
%% not a terminal's transcript (`$ ...' first).
-spec unrun(binary()) -> [pos_integer()].
unrun(Text) ->
    L = string:split(Text, "\n", all),
    unrun(lists:zip(lists:seq(1, length(L)), L), []).

unrun([], Acc) ->
    lists:reverse(Acc);
unrun([{N, Fence} | Rest], Acc) ->
    case is_fence(Fence) of
        true ->
            {Block, After} = lists:splitwith(fun({_, X}) -> not is_fence(X) end, Rest),
            Prompts = [X || {_, X} <- Block, re:run(X, "^\\d+> ") =/= nomatch],
            Session = binary:match(Fence, <<"```erlang">>) =:= {0, 9} andalso
                Block =/= [] andalso re:run(element(2, hd(Block)), "^\\d+> ") =/= nomatch,
            Transcript = Block =/= [] andalso binary:match(element(2, hd(Block)), <<"$ ">>) =:= {0, 2},
            Acc1 = case Prompts =/= [] andalso not Session andalso not Transcript of
                       true -> [N | Acc];
                       false -> Acc
                   end,
            unrun(drop_fence(After), Acc1);
        false ->
            unrun(Rest, Acc)
    end.

%% The sessions of a Markdown text: [{Line, [{Line, Expr, Output}]}],
%% Line the 1-based line of the block's first prompt and of each step.
-spec sessions(binary()) -> [{pos_integer(), [{pos_integer(), string(), string()}]}].
sessions(Text) ->
    L = string:split(Text, "\n", all),
    blocks(lists:zip(lists:seq(1, length(L)), L), []).

blocks([], Acc) ->
    lists:reverse(Acc);
blocks([{_, <<"```erlang", _/binary>>} | Rest], Acc) ->
    {Block, After} = lists:splitwith(fun({_, L}) -> not is_fence(L) end, Rest),
    case Block of
        [{N, First} | _] ->
            case re:run(First, "^\\d+> ") of
                {match, _} -> blocks(drop_fence(After), [{N, parse(Block)} | Acc]);
                nomatch -> blocks(drop_fence(After), Acc)
            end;
        [] ->
            blocks(drop_fence(After), Acc)
    end;
blocks([{_, L} | Rest], Acc) ->
    case is_fence(L) of
        true ->
            %% another block: skipped whole
            {_, After} = lists:splitwith(fun({_, X}) -> not is_fence(X) end, Rest),
            blocks(drop_fence(After), Acc);
        false ->
            blocks(Rest, Acc)
    end.

is_fence(L) -> binary:match(L, <<"```">>) =:= {0, 3}.

drop_fence([_ | T]) -> T;
drop_fence([]) -> [].

%% Steps of a session block: a prompt line starts an expression that goes
%% on over the lines after it until it parses; the lines up to the next
%% prompt are its output.
-spec parse([{pos_integer(), binary()}]) -> [{pos_integer(), string(), string()}].
parse([]) ->
    [];
parse([{N, L} | Rest]) ->
    {match, [Expr0]} = re:run(L, "^\\d+> (.*)$", [{capture, all_but_first, list}, unicode]),
    {ExprLines, Rest1} = take_expr(Expr0, Rest),
    {Out, Rest2} = lists:splitwith(fun({_, X}) -> re:run(X, "^\\d+> ") =:= nomatch end, Rest1),
    [{N, ExprLines, lists:flatten(lists:join("\n", [unicode:characters_to_list(X)
                                                     || {_, X} <- Out]))}
     | parse(Rest2)].

take_expr(Acc, Rest) ->
    case erl_scan:string(Acc) of
        {ok, Tokens, _} when Tokens =/= [] ->
            case lists:last(Tokens) of
                {dot, _} -> {Acc, Rest};
                _ -> more_expr(Acc, Rest)
            end;
        _ ->
            more_expr(Acc, Rest)
    end.

more_expr(Acc, [{_, L} | Rest]) ->
    %% a continuation line, with or without its prompt
    Cont = re:replace(L, "^\\d+> ", "", [unicode, {return, list}]),
    take_expr(Acc ++ "\n" ++ Cont, Rest);
more_expr(Acc, []) ->
    {Acc, []}.

%%% Comparing

%% Whether output Got is what the doc shows (Want), after mask/1; a doc
%% line `...' matches any text.
-spec matches(string(), binary() | string()) -> boolean().
matches(Want, Got) ->
    Parts = [mask(P) || P <- re:split(unicode:characters_to_binary(Want), "^\\s*\\.\\.\\.\\s*$",
                                         [multiline, unicode, {return, binary}])],
    Re = unicode:characters_to_binary(["^", lists:join(".*", [re_quote(P) || P <- Parts]), "$"]),
    re:run(unicode:characters_to_binary(mask(Got)), Re, [dotall, unicode]) =/= nomatch.

%% Numbers (1,234.5, 145v, 2^, 21.0ms, a range 792-816) as N; a cut label's
%% ellipsis as `~' (a shell whose output is no UTF-8 terminal prints
%% that); whitespace left out (the shell breaks a term's lines by its
%% width, a table pads its columns).
-spec mask(iodata()) -> string().
mask(Text) ->
    T1 = re:replace(Text, "\\d[\\d,]*(\\.\\d+)?(e[-+]?\\d+)?([v^]|ns|us|\\x{b5}s|ms|s\\b)?", "N",
                    [global, unicode, {return, list}]),
    T2 = re:replace(T1, "N-N", "N", [global, unicode, {return, list}]),
    T3 = re:replace(T2, "\x{2026}", "~", [global, unicode, {return, list}]),
    re:replace(T3, "\\s+", "", [global, unicode, {return, list}]).

re_quote(S) ->
    re:replace(S, "[\\\\^$.|?*+()\\[\\]{}]", "\\\\&", [global, unicode, {return, list}]).
