%%% @doc The rate rule, in one place: how messages over a length of time
%%% become a rate.  Rows keep rates as integers (messages per 1000 s,
%%% "milli-rates", so a row never holds a float); views give messages/s,
%%% multiplied by the sampling scale (the period over the traced slice;
%%% 1 when not sampling).  Pure; any process.
-module(msgflow_rate).
-export([milli/2, per_s/3, milli_to_per_s/1]).

%% @doc Messages per 1000 s of Count messages in Ms ms, rounded down; 0
%% over 0 ms.
-spec milli(non_neg_integer(), non_neg_integer()) -> non_neg_integer().
milli(_, 0) -> 0;
milli(Count, Ms) -> (Count * 1000000) div Ms.

%% @doc Messages/s of Count messages in Ms ms, times Scale; 0.0 over 0 ms.
-spec per_s(non_neg_integer(), non_neg_integer(), number()) -> float().
per_s(_, 0, _) -> 0.0;
per_s(Count, Ms, Scale) -> Scale * Count * 1000 / Ms.

%% @doc Messages/s of a milli-rate.
-spec milli_to_per_s(non_neg_integer()) -> float().
milli_to_per_s(Milli) -> Milli / 1000.
