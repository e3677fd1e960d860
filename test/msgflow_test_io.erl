%%% What a test prints, captured: capture(Fun) runs Fun in a process whose
%%% group leader keeps what it is sent (a unicode device), and returns it.
-module(msgflow_test_io).
-export([capture/1]).

-spec capture(fun(() -> term())) -> binary().
capture(F) ->
    Self = self(),
    GL = spawn(fun() -> gl_loop([]) end),
    P = spawn(fun() -> group_leader(GL, self()), F(), Self ! {captured, self()} end),
    receive {captured, P} -> ok end,
    GL ! {get, Self},
    receive {gl_out, Out} -> Out end.

gl_loop(Acc) ->
    receive
        {io_request, From, Ref, Req} ->
            {Reply, Acc1} = gl_request(Req, Acc),
            From ! {io_reply, Ref, Reply},
            gl_loop(Acc1);
        {get, From} ->
            From ! {gl_out, unicode:characters_to_binary(lists:reverse(Acc))}
    end.

gl_request({put_chars, Enc, Chars}, Acc) ->
    {ok, [unicode:characters_to_list(Chars, Enc) | Acc]};
gl_request({put_chars, Enc, M, F, A}, Acc) ->
    gl_request({put_chars, Enc, apply(M, F, A)}, Acc);
gl_request(getopts, Acc) ->
    {[{encoding, unicode}], Acc};
gl_request(_, Acc) ->
    {{error, enotsup}, Acc}.

