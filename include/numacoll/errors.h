/*
 * numacoll error codes: one X-macro table gives the enum and the messages.
 * Every call returns int: 0 on success, a negative NUMACOLL_ERR_* on failure.
 */
#ifndef NUMACOLL_ERRORS_H
#define NUMACOLL_ERRORS_H

#define NUMACOLL_ERRNO_MAP(X)                                                          \
    X(INVAL,      -1, "invalid argument")                                              \
    X(NOMEM,      -2, "out of memory")                                                 \
    X(TUNABLE,    -3, "invalid tunable value (see the message naming the variable)")   \
    X(SHM,        -4, "shared-memory segment could not be created or attached")        \
    X(TOPO,       -5, "topology could not be read (hwloc)")                            \
    X(BOOTSTRAP,  -6, "bootstrap exchange between members failed")                     \
    X(MISMATCH,   -7, "members disagree (the call: collective, datatype or op; or the configuration)") \
    X(TRUNCATE,   -8, "message size differs from the root's")                          \
    X(PEER_DEAD,  -9, "a member of the team has died")                                 \
    X(BROKEN,    -10, "the team is unusable after an earlier fatal error")             \
    X(TIMEOUT,   -11, "timed out waiting for the other members")                       \
    X(NOTSUP,    -12, "not supported here")                                           \
    X(ROOT,      -13, "members disagree on the root of the call")                     \
    X(NOSPACE,   -14, "not enough shared memory (/dev/shm full or NUMACOLL_SHM_LIMIT reached)") \
    X(FAULT,     -15, "a buffer is not accessible for the whole message (bad address or size)")

enum {
#define NUMACOLL_ERR_ENUM_(name, code, msg) NUMACOLL_ERR_##name = (code),
    NUMACOLL_SUCCESS = 0,
    NUMACOLL_ERRNO_MAP(NUMACOLL_ERR_ENUM_)
#undef NUMACOLL_ERR_ENUM_
};

#endif
