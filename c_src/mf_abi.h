/*
 * mf_abi.h -- the version of the library's resources' layout.
 *
 * A resource type (sessions, takes, call entries, aggregates) is opened
 * under its name and this number.  A release upgrade that loads a library
 * of the same number takes the old library's resources over (their
 * destructors and monitors run the new code, which reads them as its own;
 * the old library stays mapped, msgflow_tracer_nif.c); one of another
 * number opens types of its own, never reads a resource the old library
 * made (enif_get_resource fails: badarg), and leaves the old resources to
 * the old library's code, as after code:delete/1 (the run counts no more;
 * stop/0 still removes its flags).  Bump MF_ABI whenever a struct behind
 * a resource changes.  No thread state: constants only.
 */
#ifndef MF_ABI_H
#define MF_ABI_H

#ifndef MF_ABI /* (a test builds another, -DMF_ABI=N) */
#define MF_ABI 1
#endif

#define MF_ABI_STR2(n) #n
#define MF_ABI_STR(n) MF_ABI_STR2(n)
/* A resource type's name, "msgflow_session" -> "msgflow_session.1". */
#define MF_RT_NAME(base) base "." MF_ABI_STR(MF_ABI)

#endif
