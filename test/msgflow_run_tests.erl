%%% EUnit: what msgflow runs on (msgflow_run:supported/1) and what a VM
%%% whose term layout the tracer refused costs (msgflow_run:reads_off/1).
-module(msgflow_run_tests).

-include_lib("eunit/include/eunit.hrl").

releases_test() ->
    ?assertEqual(ok, msgflow_run:supported("25")),
    ?assertEqual(ok, msgflow_run:supported("29")),
    ?assertEqual({error, {unsupported, {otp_release, "24"}, [<<"25 or newer">>]}},
                 msgflow_run:supported("24")),
    ?assertEqual({error, {unsupported, {otp_release, "R16B03"}, [<<"25 or newer">>]}},
                 msgflow_run:supported("R16B03")),
    ?assertEqual(ok, msgflow_run:supported(erlang:system_info(otp_release))).

reads_off_test() ->
    On = #{fast_extra => true, alias_owner => true, fast_terms => true, plain_refs => true,
           native_records => none, fast_resources => true},
    ?assertEqual([], msgflow_run:reads_off(On)),
    ?assertEqual([], msgflow_run:reads_off(On#{native_records := read})),
    ?assertEqual([native_records],
                 [R || {R, _} <- msgflow_run:reads_off(On#{native_records := unread})]),
    ?assertEqual([alias_owner], [R || {R, _} <- msgflow_run:reads_off(On#{alias_owner := false})]),
    %% a read lib_info/0 does not report is off
    ?assertEqual([fast_extra, fast_terms, fast_resources, alias_owner, plain_refs,
                  native_records],
                 [R || {R, _} <- msgflow_run:reads_off(#{})]).
