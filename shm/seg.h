/* seg.h - named POSIX shared-memory segments with a verified header.
 *
 * Names are "/ns-<user>-<session>-<what>": the user and a random session id keep sessions of
 * different users and runs apart. A segment is created O_EXCL with mode 0600 and begins with a
 * struct ns_seg_header (magic, layout version, kind, size, owner pid, generation) that every
 * reader checks before trusting anything else in the mapping.
 *
 * Ownership: ns_seg_create/ns_seg_open return a mapping the caller releases with ns_seg_unmap;
 * unlinking the name is separate (ns_seg_unlink) and belongs to the session owner. */
#ifndef NS_SHM_SEG_H
#define NS_SHM_SEG_H

#include <stdatomic.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>

#define NS_SEG_MAGIC 0x4d4853534e52554eull /* "NURNSSHM" little-endian */
#define NS_SEG_LAYOUT_VERSION 1u
#define NS_SEG_NAME_LEN 128
#define NS_SESSION_ID_LEN 16 /* hex characters of a random 64-bit id */

enum ns_seg_kind {
	NS_SEG_CTL = 1,   /* control: clients, rings, leases, tensor table, stats (read-write) */
	NS_SEG_ARENA = 2, /* streamed weight bytes (read-only for compute) */
};

/* First bytes of every segment; 128 bytes so the payload stays cache-line aligned. */
struct ns_seg_header {
	uint64_t magic;
	uint32_t layout_version;
	uint32_t kind;
	uint64_t size;            /* whole segment, header included */
	int32_t owner_pid;        /* the process that created the session */
	uint32_t reserved0;
	_Atomic uint64_t generation; /* bumped by every nsio that attaches */
	char session[NS_SESSION_ID_LEN + 1];
	char user[31];
	uint8_t pad[128 - 8 - 4 - 4 - 8 - 4 - 4 - 8 - (NS_SESSION_ID_LEN + 1) - 31];
};
_Static_assert(sizeof(struct ns_seg_header) == 128, "segment header is 128 bytes");

struct ns_seg {
	void *base;    /* mapping, starts with the header */
	size_t size;
	char name[NS_SEG_NAME_LEN];
};

/* The user part of names: login name filtered to [A-Za-z0-9_], or "uid<N>". */
void ns_seg_user(char *buf, size_t n);

/* "/ns-<user>-<session>-<what>" into buf. Returns 0 or -ENAMETOOLONG. */
int ns_seg_name(char *buf, size_t n, const char *session, const char *what);

/* Create a new segment of size bytes (O_EXCL, 0600), zero it, write the header with
 * owner_pid = getpid(), generation 0. Fails with -EEXIST if the name is taken. */
int ns_seg_create(struct ns_seg *seg, const char *session, const char *what, uint32_t kind,
		  size_t size, char *err, size_t errlen);

/* Open and map an existing segment, read-only or read-write, and verify its header against
 * kind and session (magic, version, size = file size). -ENOENT if absent, -EPROTO on a header
 * mismatch (err says which field). */
int ns_seg_open(struct ns_seg *seg, const char *session, const char *what, uint32_t kind,
		bool writable, char *err, size_t errlen);

void ns_seg_unmap(struct ns_seg *seg);
int ns_seg_unlink(const char *session, const char *what);
/* Unlink every segment of a session ("/ns-<user>-<session>-*", other modules' too).
 * Returns the number removed. */
int ns_seg_unlink_session(const char *session);

/* Header check on an already mapped region (used by ns_seg_open and by tests). */
int ns_seg_check_header(const struct ns_seg_header *h, size_t mapped, uint32_t kind,
			const char *session, char *err, size_t errlen);

/* True if pid names a live, non-zombie process. */
bool ns_pid_alive(pid_t pid);

/* Remove every segment "/ns-<user>-*" whose header names a dead owner (or is unreadable
 * and older than a minute). Returns the number removed. */
int ns_seg_sweep_stale(void);

/* Fill id with NS_SESSION_ID_LEN random hex characters and a NUL. Returns 0 or -errno. */
int ns_session_random_id(char id[NS_SESSION_ID_LEN + 1]);

/* Session ids are exactly [0-9a-zA-Z_]{1,16}. */
bool ns_session_id_valid(const char *id);

/* The session and model arguments of a pipeline process's command line (nsio, nsplan,
 * nsrouter, nscompute). ns_session_arg_check: 0 when id is a valid session id, else -EINVAL
 * after one line on stderr, "PROG: --session 'ID' is not 1-16 of [A-Za-z0-9_]".
 * ns_session_args_check: the same, after checking that both --session ID and --model PATH
 * were given ("PROG: --model PATH is required (usage: ...)"). */
int ns_session_arg_check(const char *prog, const char *id);
int ns_session_args_check(const char *prog, const char *id, const char *model);

#endif
