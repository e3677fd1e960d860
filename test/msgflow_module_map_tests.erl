%%% CONTRIBUTING.md's module map ("Where things live") against the tree:
%%% every module of erl/ is listed under the folder it is in, and the map
%%% lists no module that is not there.
-module(msgflow_module_map_tests).
-include_lib("eunit/include/eunit.hrl").

map_matches_tree_test() ->
    Root = msgflow_test_lib:root(),
    {ok, Doc} = file:read_file(filename:join(Root, "CONTRIBUTING.md")),
    Tree = tree(filename:join(Root, "erl")),
    Map = map(Doc),
    %% {not in the map, in the map but not there}
    ?assertEqual({[], []}, {Tree -- Map, Map -- Tree}).

%% {Folder, Module} of every module under Erl ("" for erl/ itself).
tree(Erl) ->
    lists:sort([{"", filename:basename(F, ".erl")} || F <- filelib:wildcard(filename:join(Erl, "*.erl"))]
               ++ [{D, filename:basename(F, ".erl")}
                   || D <- filelib:wildcard("*", Erl), filelib:is_dir(filename:join(Erl, D)),
                      F <- filelib:wildcard(filename:join([Erl, D, "*.erl"]))]).

%% {Folder, Module} of every module the map names: the code block after
%% "## Where things live", from its `erl/' line to the next line that is
%% not indented; a folder is a line `  name/'; a line's names are what
%% comes before its description (two spaces or more), and a line indented
%% as a description (20 columns or more) names none.
map(Doc) ->
    [_, After] = binary:split(Doc, <<"## Where things live">>),
    [_, Block | _] = binary:split(After, <<"```">>, [global]),
    Lines = [binary_to_list(L) || L <- binary:split(Block, <<"\n">>, [global])],
    [_ | Erl] = lists:dropwhile(fun(L) -> L =/= "erl/" end, Lines),
    Inside = lists:takewhile(fun([$\s | _]) -> true; (_) -> false end, Erl),
    {Pairs, _} = lists:foldl(fun(L, {Acc, Folder}) ->
                                     case re:run(L, "^  ([a-z]+)/\\s*$", [{capture, all_but_first, list}]) of
                                         {match, [F]} -> {Acc, F};
                                         nomatch -> {Acc ++ [{Folder, M} || M <- names(L)], Folder}
                                     end
                             end, {[], ""}, Inside),
    lists:usort(Pairs).

names(Line) ->
    case string:length(Line) - string:length(string:trim(Line, leading)) >= 20 of
        true ->
            [];
        false ->
            [Names | _] = re:split(string:trim(Line, leading), "\\s{2,}", [{return, list}]),
            case re:run(Names, "\\b(msgflow(?:_[a-z0-9]+)*)\\b", [global, {capture, all_but_first, list}]) of
                {match, Ms} -> [M || [M] <- Ms];
                nomatch -> []
            end
    end.
