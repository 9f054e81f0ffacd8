/* seg.h - named POSIX shared-memory segments with a verified header and a verified owner.
 *
 * Names: the session's control segment is "/ns-<user>-<session>-ctl"; every other segment of
 * the session is "/ns-<user>-<session>-<key>-<what>", where key is a random 64-bit value the
 * control segment's header carries (written by its creator, readable only by us: mode 0600).
 * The session id is public (it is on the children's command lines, and /dev/shm lists names
 * to everyone), the key is not, so no other user can create a session's plan, arena or RAM
 * segment before the session does. Every segment is created O_EXCL with mode 0600; every open
 * (and the key's lookup) checks with fstat that the object belongs to our uid with mode 0600,
 * and refuses it in one line otherwise (-EPERM). A segment begins with a struct ns_seg_header
 * (magic, layout version, kind, size, owner pid and start time, generation) that every reader
 * checks before trusting anything else in the mapping.
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
#define NS_SEG_LAYOUT_VERSION 3u /* 3: the MoE prediction counters in ns_stats */
#define NS_SEG_NAME_LEN 128
#define NS_SESSION_ID_LEN 16 /* hex characters of a random 64-bit id */
#define NS_SEG_KEY_LEN 16    /* hex characters of the session's random 64-bit name key */
#define NS_SEG_CTL_WHAT "ctl"
/* Exit code of a session's process that found a segment of it that is not ours (-EPERM from
 * the checks below): its supervisor stops the session rather than restart it into the same. */
#define NS_EXIT_FOREIGN 4

enum ns_seg_kind {
	NS_SEG_CTL = 1,   /* control: clients, rings, leases, tensor table, stats (read-write) */
	NS_SEG_ARENA = 2, /* streamed weight bytes (read-only for compute) */
	NS_SEG_PLAN = 3,  /* nsplan's published plan (nsplan/plan_shm.h) */
	NS_SEG_RAM = 4,   /* nsio's RAM tier (shm/ram_seg.h) */
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
	uint64_t owner_start;     /* owner_pid's start time (clock ticks after boot): a pid
				   * reused by another process does not look like the owner */
	char key[NS_SEG_KEY_LEN + 1]; /* control segment only: the name key (see above) */
	uint8_t pad[128 - 8 - 4 - 4 - 8 - 4 - 4 - 8 - (NS_SESSION_ID_LEN + 1) - 31 - 8 -
		    (NS_SEG_KEY_LEN + 1)];
};
_Static_assert(sizeof(struct ns_seg_header) == 128, "segment header is 128 bytes");

struct ns_seg {
	void *base;    /* mapping, starts with the header */
	size_t size;
	char name[NS_SEG_NAME_LEN];
};

/* The user part of names: login name filtered to [A-Za-z0-9_], or "uid<N>". */
void ns_seg_user(char *buf, size_t n);

/* The segment's name into buf: "/ns-<user>-<session>-ctl" for what "ctl", else
 * "/ns-<user>-<session>-<key>-<what>" with the key read from the session's control segment
 * (checked: ours, 0600, a control header of this session). Returns 0, -ENAMETOOLONG, or the
 * key lookup's error (-ENOENT without a control segment, -EPERM, -EPROTO) with a line in err. */
int ns_seg_name(char *buf, size_t n, const char *session, const char *what, char *err,
		size_t errlen);

/* Create a new segment of size bytes (O_EXCL, 0600), zero it, write the header: generation 0;
 * for the control segment a new random key (test hook: $NS_TEST_SEG_KEY, 16 hex digits) and
 * owner = this process; for the others the owner the control segment names. Fails with
 * -EEXIST if the name is taken, -EPERM (and a line naming the owner) if another user took it. */
int ns_seg_create(struct ns_seg *seg, const char *session, const char *what, uint32_t kind,
		  size_t size, char *err, size_t errlen);

/* Open and map an existing segment, read-only or read-write: it must belong to our uid with
 * mode 0600 (-EPERM otherwise: "segment NAME belongs to uid N ..."), and its header must match
 * kind and session (magic, version, size = file size; -EPROTO, err says which field).
 * -ENOENT if absent; -EAGAIN while its creator has not published it yet (empty, or magic 0:
 * look again later). */
int ns_seg_open(struct ns_seg *seg, const char *session, const char *what, uint32_t kind,
		bool writable, char *err, size_t errlen);

void ns_seg_unmap(struct ns_seg *seg);
/* Unlink one segment of a session (a keyed one found by its suffix when the control segment
 * is gone). Returns 0 or -errno. */
int ns_seg_unlink(const char *session, const char *what);
/* Unlink every segment of a session ("/ns-<user>-<session>-*", other modules' too) that
 * belongs to us. Returns the number removed. */
int ns_seg_unlink_session(const char *session);

/* Header check on an already mapped region (used by ns_seg_open and by tests). */
int ns_seg_check_header(const struct ns_seg_header *h, size_t mapped, uint32_t kind,
			const char *session, char *err, size_t errlen);

/* fd's object belongs to our uid and has mode 0600 (what == its name, for the message).
 * Returns 0, or -EPERM with one line in err. */
int ns_seg_check_owner(int fd, const char *what, char *err, size_t errlen);

/* Start time of pid (field 22 of /proc/PID/stat, clock ticks after boot), 0 if unknown. */
uint64_t ns_proc_start_time(pid_t pid);

/* True if pid names a live, non-zombie process. */
bool ns_pid_alive(pid_t pid);

/* True if pid names a live, non-zombie process that started at start (start 0: any). */
bool ns_proc_alive(pid_t pid, uint64_t start);

/* The session id of a segment's file name "ns-<user>-<session>-..." of ours into id, or
 * false when name is not one. */
bool ns_seg_name_session(const char *name, char id[NS_SESSION_ID_LEN + 1]);

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
