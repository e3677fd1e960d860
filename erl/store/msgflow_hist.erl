%%% @doc The history codec, in one place: a pair's earlier windows with
%%% traffic, kept in its row as one binary of `<<Window:32, Count:32>>'
%%% entries, windows ascending, or `[]' when there are none (an empty
%%% binary is never stored, so an idle pair's row holds no binary).  A
%%% count past 2^32 - 1 messages in one window of one pair is kept as
%%% that.  Pure; any process.
-module(msgflow_hist).
-export([push/4, encode/2, entries/2, from/2, at/3]).
-export_type([hist/0]).

-type hist() :: binary() | [].

-define(MAX_COUNT, 16#FFFFFFFF).

%% @doc Hist with (W, Count) added at the end, its entries before window
%% Oldest dropped.
-spec push(hist(), pos_integer(), non_neg_integer(), integer()) -> hist().
push(Hist, W, Count, Oldest) ->
    stored(trim(<<(bin(Hist))/binary, W:32, (min(Count, ?MAX_COUNT)):32>>, Oldest)).

%% @doc A history of these entries (windows ascending), none before Oldest.
-spec encode([{pos_integer(), non_neg_integer()}], integer()) -> hist().
encode(Entries, Oldest) ->
    stored(trim(<< <<W:32, (min(C, ?MAX_COUNT)):32>> || {W, C} <- Entries >>, Oldest)).

%% @doc The entries `{Window, Count}' of windows up to Last, ascending.
-spec entries(hist(), integer()) -> [{pos_integer(), non_neg_integer()}].
entries(Hist, Last) -> list(bin(Hist), Last).

%% @doc The entries from the first with a window >= First (found by
%% bisection), as a binary.
-spec from(hist(), integer()) -> binary().
from([], _) ->
    <<>>;
from(H, First) ->
    N = byte_size(H) div 8,
    Lo = bisect(H, First, 0, N),
    binary:part(H, Lo * 8, (N - Lo) * 8).

%% @doc The count of window W if it is in the I-th entry from the end (I
%% is 1 or 2; for 2, the last entry is tried too), else 0.
-spec at(hist(), 1 | 2, integer()) -> non_neg_integer().
at([], _, _) ->
    0;
at(Hist, I, W) ->
    Skip = byte_size(Hist) - 8 * I,
    case Skip >= 0 of
        true ->
            case Hist of
                <<_:Skip/binary, W:32, C:32, _/binary>> -> C;
                _ when I =:= 2 -> at(Hist, 1, W);
                _ -> 0
            end;
        false ->
            0
    end.

bin([]) -> <<>>;
bin(H) -> H.

stored(<<>>) -> [];
stored(H) -> H.

trim(<<W:32, _:32, Rest/binary>>, Oldest) when W < Oldest -> trim(Rest, Oldest);
trim(H, _) -> H.

list(<<W:32, C:32, Rest/binary>>, Last) when W =< Last -> [{W, C} | list(Rest, Last)];
list(_, _) -> [].

bisect(_, _, Lo, Hi) when Lo >= Hi -> Lo;
bisect(H, First, Lo, Hi) ->
    Mid = (Lo + Hi) div 2,
    <<_:Mid/binary-unit:64, W:32, _/binary>> = H,
    case W < First of
        true -> bisect(H, First, Mid + 1, Hi);
        false -> bisect(H, First, Lo, Mid)
    end.
