/* seg.c - named shared-memory segments: names with the session key, create, open-and-verify
 * (owner, mode, header), unlink. */
#include "seg.h"

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/random.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include "ns_util.h"

void ns_seg_user(char *buf, size_t n)
{
	const char *u = getenv("USER");
	size_t j = 0;

	if (n == 0)
		return;
	if (u && *u) {
		for (size_t i = 0; u[i] && j + 1 < n && j < 24; i++) {
			char c = u[i];
			if ((c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') ||
			    (c >= '0' && c <= '9') || c == '_')
				buf[j++] = c;
		}
	}
	buf[j] = '\0';
	if (j == 0)
		snprintf(buf, n, "uid%u", (unsigned)getuid());
}

bool ns_session_id_valid(const char *id)
{
	size_t n = 0;

	if (!id)
		return false;
	for (; id[n]; n++) {
		char c = id[n];
		if (!((c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') ||
		      (c >= '0' && c <= '9') || c == '_'))
			return false;
		if (n >= NS_SESSION_ID_LEN)
			return false;
	}
	return n > 0;
}

int ns_session_arg_check(const char *prog, const char *id)
{
	if (ns_session_id_valid(id))
		return 0;
	fprintf(stderr, "%s: --session '%s' is not 1-16 of [A-Za-z0-9_]\n", prog,
		id ? id : "");
	return -EINVAL;
}

int ns_session_args_check(const char *prog, const char *id, const char *model)
{
	if (!id || !model) {
		fprintf(stderr, "%s: %s is required (usage: %s --session ID --model PATH "
			"[options]; --help lists them)\n", prog, !id ? "--session ID" :
			"--model PATH", prog);
		return -EINVAL;
	}
	return ns_session_arg_check(prog, id);
}

/* shm_open's directory (glibc's): where segments are listed and their owners checked */
#define S_SHM_DIR "/dev/shm"

int ns_seg_check_owner(int fd, const char *what, char *err, size_t errlen)
{
	struct stat st;

	if (fstat(fd, &st) != 0)
		return ns_errf(err, errlen, "fstat %s: %s", what, strerror(errno)), -errno;
	if (st.st_uid != geteuid())
		return ns_errf(err, errlen, "segment %s belongs to uid %u, not to us (uid %u): "
			       "refusing it (another user made it)", what, (unsigned)st.st_uid,
			       (unsigned)geteuid()), -EPERM;
	if ((st.st_mode & 07777) != 0600)
		return ns_errf(err, errlen, "segment %s has mode %04o, not 0600: refusing it",
			       what, (unsigned)(st.st_mode & 07777)), -EPERM;
	return 0;
}

static int s_plain_name(char *buf, size_t n, const char *session, const char *key,
			const char *what)
{
	char user[32];
	int k;

	ns_seg_user(user, sizeof(user));
	if (key)
		k = snprintf(buf, n, "/ns-%s-%s-%s-%s", user, session, key, what);
	else
		k = snprintf(buf, n, "/ns-%s-%s-%s", user, session, what);
	if (k < 0 || (size_t)k >= n)
		return -ENAMETOOLONG;
	return 0;
}

/* The name key of a session, from its control segment's header (checked as any open). */
static int s_session_key(const char *session, char key[NS_SEG_KEY_LEN + 1], char *err,
			 size_t errlen)
{
	char name[NS_SEG_NAME_LEN], why[NS_ERR_LEN];
	struct ns_seg_header h;
	struct stat st;
	ssize_t got;
	int fd, rc;

	rc = s_plain_name(name, sizeof(name), session, NULL, NS_SEG_CTL_WHAT);
	if (rc)
		return ns_errf(err, errlen, "segment name for session '%s' too long", session), rc;
	fd = shm_open(name, O_RDONLY | O_CLOEXEC, 0);
	if (fd < 0)
		return ns_errf(err, errlen, "shm_open %s: %s", name, strerror(errno)), -errno;
	rc = ns_seg_check_owner(fd, name, err, errlen);
	if (rc == 0 && fstat(fd, &st) != 0)
		rc = -errno;
	got = rc ? 0 : pread(fd, &h, sizeof(h), 0);
	close(fd);
	if (rc)
		return rc;
	if (got != (ssize_t)sizeof(h)) {
		ns_errf(err, errlen, "%s: too short for its header", name);
		return -EPROTO;
	}
	rc = ns_seg_check_header(&h, (size_t)st.st_size, NS_SEG_CTL, session, why, sizeof(why));
	if (rc)
		return ns_errf(err, errlen, "%s: %s", name, why), rc;
	for (int i = 0; i < NS_SEG_KEY_LEN; i++)
		if (!((h.key[i] >= '0' && h.key[i] <= '9') || (h.key[i] >= 'a' && h.key[i] <= 'f')))
			return ns_errf(err, errlen, "%s: no valid name key", name), -EPROTO;
	memcpy(key, h.key, NS_SEG_KEY_LEN);
	key[NS_SEG_KEY_LEN] = 0;
	return 0;
}

int ns_seg_name(char *buf, size_t n, const char *session, const char *what, char *err,
		size_t errlen)
{
	char key[NS_SEG_KEY_LEN + 1];
	int rc;

	if (!strcmp(what, NS_SEG_CTL_WHAT))
		rc = s_plain_name(buf, n, session, NULL, what);
	else if ((rc = s_session_key(session, key, err, errlen)) == 0)
		rc = s_plain_name(buf, n, session, key, what);
	else
		return rc;
	if (rc)
		ns_errf(err, errlen, "segment name for session '%s' too long", session);
	return rc;
}

bool ns_seg_name_session(const char *name, char id[NS_SESSION_ID_LEN + 1])
{
	char user[32];
	size_t u, k = 0;

	ns_seg_user(user, sizeof(user));
	u = strlen(user);
	if (strncmp(name, "ns-", 3) || strncmp(name + 3, user, u) || name[3 + u] != '-')
		return false;
	name += 4 + u;
	while (name[k] && name[k] != '-' && k < NS_SESSION_ID_LEN)
		id[k] = name[k], k++;
	id[k] = 0;
	return name[k] == '-' && ns_session_id_valid(id);
}

int ns_session_random_id(char id[NS_SESSION_ID_LEN + 1])
{
	uint64_t v;
	ssize_t r = getrandom(&v, sizeof(v), 0);

	if (r != (ssize_t)sizeof(v))
		return r < 0 ? -errno : -EIO;
	snprintf(id, NS_SESSION_ID_LEN + 1, "%016llx", (unsigned long long)v);
	return 0;
}

/* Test hook NS_TEST_SEG_KEY=16 hex digits: the key a new control segment gets instead of a
 * random one, so that a test can plant a session's other segments under their real names (the
 * two-user test). Returns 0 when it set *key. */
static int s_test_key(uint64_t *key)
{
	const char *v = getenv("NS_TEST_SEG_KEY");
	char *end;

	if (!v || strlen(v) != NS_SEG_KEY_LEN)
		return -ENOENT;
	*key = strtoull(v, &end, 16);
	return *end ? -EINVAL : 0;
}

/* The owner fields a keyed segment copies from its session's control segment. */
static void s_owner_of(const char *session, int32_t *pid, uint64_t *start)
{
	struct ns_seg ctl;
	char err[NS_ERR_LEN];

	*pid = (int32_t)getpid();
	*start = ns_proc_start_time(getpid());
	if (ns_seg_open(&ctl, session, NS_SEG_CTL_WHAT, NS_SEG_CTL, false, err, sizeof(err)))
		return;
	*pid = ((struct ns_seg_header *)ctl.base)->owner_pid;
	*start = ((struct ns_seg_header *)ctl.base)->owner_start;
	ns_seg_unmap(&ctl);
}

int ns_seg_create(struct ns_seg *seg, const char *session, const char *what, uint32_t kind,
		  size_t size, char *err, size_t errlen)
{
	struct ns_seg_header *h;
	bool root = !strcmp(what, NS_SEG_CTL_WHAT);
	uint64_t key = 0, start;
	int32_t owner;
	int fd, rc;

	memset(seg, 0, sizeof(*seg));
	if (size < sizeof(struct ns_seg_header)) {
		ns_errf(err, errlen, "segment %s: size %zu too small", what, size);
		return -EINVAL;
	}
	rc = ns_seg_name(seg->name, sizeof(seg->name), session, what, err, errlen);
	if (rc)
		return rc;
	if (root && s_test_key(&key) && getrandom(&key, sizeof(key), 0) != (ssize_t)sizeof(key))
		return ns_errf(err, errlen, "getrandom: %s", strerror(errno)), -EIO;
	if (root) {
		owner = (int32_t)getpid();
		start = ns_proc_start_time(getpid());
	} else {
		s_owner_of(session, &owner, &start);
	}
	fd = shm_open(seg->name, O_RDWR | O_CREAT | O_EXCL | O_CLOEXEC, 0600);
	if (fd < 0) {
		char path[NS_SEG_NAME_LEN + 16];
		struct stat st;

		rc = -errno;
		snprintf(path, sizeof(path), S_SHM_DIR "%s", seg->name);
		if (rc == -EEXIST && stat(path, &st) == 0 && st.st_uid != geteuid())
			return ns_errf(err, errlen, "segment %s exists already and belongs to uid "
				       "%u (mode %04o), not to us: another user made it; refusing "
				       "it", seg->name, (unsigned)st.st_uid,
				       (unsigned)(st.st_mode & 07777)), -EPERM;
		ns_errf(err, errlen, "shm_open %s: %s", seg->name, strerror(errno));
		return rc;
	}
	/* a umask cannot widen 0600, but make the mode exact whatever it is */
	if (fchmod(fd, 0600) != 0 || ftruncate(fd, (off_t)size) != 0) {
		rc = -errno;
		ns_errf(err, errlen, "ftruncate %s to %zu bytes: %s", seg->name, size,
			strerror(errno));
		goto fail;
	}
	seg->base = mmap(NULL, size, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
	if (seg->base == MAP_FAILED) {
		rc = -errno;
		seg->base = NULL;
		ns_errf(err, errlen, "mmap %s (%zu bytes): %s", seg->name, size, strerror(errno));
		goto fail;
	}
	close(fd);
	seg->size = size;
	h = seg->base;
	h->layout_version = NS_SEG_LAYOUT_VERSION;
	h->kind = kind;
	h->size = size;
	h->owner_pid = owner;
	h->owner_start = start;
	atomic_store(&h->generation, 0);
	snprintf(h->session, sizeof(h->session), "%s", session);
	ns_seg_user(h->user, sizeof(h->user));
	if (root)
		snprintf(h->key, sizeof(h->key), "%016llx", (unsigned long long)key);
	/* magic last: a reader never sees a half-written header as valid */
	atomic_thread_fence(memory_order_release);
	h->magic = NS_SEG_MAGIC;
	return 0;
fail:
	close(fd);
	shm_unlink(seg->name);
	return rc;
}

int ns_seg_check_header(const struct ns_seg_header *h, size_t mapped, uint32_t kind,
			const char *session, char *err, size_t errlen)
{
	if (mapped < sizeof(*h)) {
		ns_errf(err, errlen, "segment is %zu bytes, smaller than its header", mapped);
		return -EPROTO;
	}
	if (h->magic != NS_SEG_MAGIC) {
		ns_errf(err, errlen, "segment magic 0x%016llx is not a neurostream segment",
			(unsigned long long)h->magic);
		return -EPROTO;
	}
	if (h->layout_version != NS_SEG_LAYOUT_VERSION) {
		ns_errf(err, errlen, "segment layout version %u, this build speaks %u",
			h->layout_version, NS_SEG_LAYOUT_VERSION);
		return -EPROTO;
	}
	if (h->kind != kind) {
		ns_errf(err, errlen, "segment kind %u, expected %u", h->kind, kind);
		return -EPROTO;
	}
	if (h->size != mapped) {
		ns_errf(err, errlen, "segment header says %llu bytes, the object has %zu",
			(unsigned long long)h->size, mapped);
		return -EPROTO;
	}
	if (session && strncmp(h->session, session, sizeof(h->session)) != 0) {
		ns_errf(err, errlen, "segment belongs to session '%.16s', not '%s'", h->session,
			session);
		return -EPROTO;
	}
	return 0;
}

int ns_seg_open(struct ns_seg *seg, const char *session, const char *what, uint32_t kind,
		bool writable, char *err, size_t errlen)
{
	struct stat st;
	int fd, rc;
	char why[NS_ERR_LEN];

	memset(seg, 0, sizeof(*seg));
	rc = ns_seg_name(seg->name, sizeof(seg->name), session, what, err, errlen);
	if (rc)
		return rc;
	fd = shm_open(seg->name, (writable ? O_RDWR : O_RDONLY) | O_CLOEXEC, 0);
	if (fd < 0) {
		rc = -errno;
		ns_errf(err, errlen, "shm_open %s: %s", seg->name, strerror(errno));
		return rc;
	}
	rc = ns_seg_check_owner(fd, seg->name, err, errlen);
	if (rc) {
		close(fd);
		return rc;
	}
	if (fstat(fd, &st) != 0) {
		rc = -errno;
		ns_errf(err, errlen, "fstat %s: %s", seg->name, strerror(errno));
		close(fd);
		return rc;
	}
	if (st.st_size == 0) { /* created, not yet sized: its creator is between two calls */
		ns_errf(err, errlen, "segment %s is being created", seg->name);
		close(fd);
		return -EAGAIN;
	}
	if (st.st_size < (off_t)sizeof(struct ns_seg_header)) {
		ns_errf(err, errlen, "segment %s: %lld bytes, smaller than its header", seg->name,
			(long long)st.st_size);
		close(fd);
		return -EPROTO;
	}
	seg->size = (size_t)st.st_size;
	seg->base = mmap(NULL, seg->size, writable ? PROT_READ | PROT_WRITE : PROT_READ,
			 MAP_SHARED, fd, 0);
	close(fd);
	if (seg->base == MAP_FAILED) {
		rc = -errno;
		seg->base = NULL;
		ns_errf(err, errlen, "mmap %s: %s", seg->name, strerror(-rc));
		return rc;
	}
	/* magic 0: sized and mapped but not yet published (ns_seg_create writes it last) */
	if (((const volatile struct ns_seg_header *)seg->base)->magic == 0) {
		rc = -EAGAIN;
		snprintf(why, sizeof(why), "being created (header not yet published)");
	} else {
		atomic_thread_fence(memory_order_acquire); /* pairs with ns_seg_create's release */
		rc = ns_seg_check_header(seg->base, seg->size, kind, session, why, sizeof(why));
	}
	if (rc) {
		ns_errf(err, errlen, "%s: %s", seg->name, why);
		ns_seg_unmap(seg);
		return rc;
	}
	return 0;
}

void ns_seg_unmap(struct ns_seg *seg)
{
	if (seg->base)
		munmap(seg->base, seg->size);
	seg->base = NULL;
	seg->size = 0;
}

/* Unlink the entries of /dev/shm named "<prefix>*" (and ending in suffix, when given) that
 * belong to us. Returns the number removed. */
static int s_unlink_matching(const char *prefix, const char *suffix)
{
	size_t pl = strlen(prefix), sl = suffix ? strlen(suffix) : 0;
	char path[300];
	struct dirent *de;
	struct stat st;
	DIR *d = opendir(S_SHM_DIR);
	int n = 0;

	if (!d)
		return 0;
	while ((de = readdir(d))) {
		size_t l = strlen(de->d_name);

		if (strncmp(de->d_name, prefix, pl) || (sl && (l < sl ||
		    strcmp(de->d_name + l - sl, suffix))))
			continue;
		/* never another user's object: sticky /dev/shm refuses it anyway, say it here */
		if (fstatat(dirfd(d), de->d_name, &st, AT_SYMLINK_NOFOLLOW) || st.st_uid != geteuid())
			continue;
		snprintf(path, sizeof(path), "/%s", de->d_name);
		if (shm_unlink(path) == 0)
			n++;
	}
	closedir(d);
	return n;
}

int ns_seg_unlink(const char *session, const char *what)
{
	char name[NS_SEG_NAME_LEN], err[NS_ERR_LEN], user[32], pre[96], suf[64];
	int rc = ns_seg_name(name, sizeof(name), session, what, err, sizeof(err));

	if (rc == 0)
		return shm_unlink(name) == 0 ? 0 : -errno;
	if (rc != -ENOENT || !ns_session_id_valid(session))
		return rc;
	/* the control segment (and its key) is gone: the keyed name by its ends */
	ns_seg_user(user, sizeof(user));
	snprintf(pre, sizeof(pre), "ns-%s-%s-", user, session);
	snprintf(suf, sizeof(suf), "-%s", what);
	return s_unlink_matching(pre, suf) ? 0 : -ENOENT;
}

int ns_seg_unlink_session(const char *session)
{
	char user[32], prefix[96];

	if (!ns_session_id_valid(session))
		return 0;
	ns_seg_user(user, sizeof(user));
	snprintf(prefix, sizeof(prefix), "ns-%s-%s-", user, session);
	return s_unlink_matching(prefix, NULL);
}

/* State letter and start time (field 22, clock ticks after boot) of pid from /proc/PID/stat.
 * Returns 0, or -errno (-ENOENT: no such process). */
static int s_proc_stat(pid_t pid, char *state, uint64_t *start)
{
	char path[64], buf[1024], *p;
	unsigned long long st = 0;
	int rc = -EIO;
	FILE *f;

	snprintf(path, sizeof(path), "/proc/%d/stat", (int)pid);
	f = fopen(path, "re");
	if (!f)
		return -errno;
	/* after "pid (comm)", comm possibly holding ')' or spaces: state is field 3 */
	if (fgets(buf, sizeof(buf), f) && (p = strrchr(buf, ')')) &&
	    sscanf(p + 1, " %c %*d %*d %*d %*d %*d %*u %*u %*u %*u %*u %*u %*u %*d %*d %*d %*d "
		   "%*d %*d %llu", state, &st) == 2) {
		*start = st;
		rc = 0;
	}
	fclose(f);
	return rc;
}

uint64_t ns_proc_start_time(pid_t pid)
{
	uint64_t start;
	char state;

	return s_proc_stat(pid, &state, &start) == 0 ? start : 0;
}

bool ns_pid_alive(pid_t pid)
{
	return ns_proc_alive(pid, 0);
}

bool ns_proc_alive(pid_t pid, uint64_t start)
{
	uint64_t st;
	char state;
	int rc;

	if (pid <= 0)
		return false;
	if (kill(pid, 0) != 0 && errno == ESRCH)
		return false;
	rc = s_proc_stat(pid, &state, &st);
	if (rc == -ENOENT)
		return false;
	if (rc)
		return true; /* cannot tell: alive, as kill() said */
	/* a zombie still answers kill(0) but is dead for our purposes; the same pid with
	 * another start time is another process: the one we knew is dead */
	return state != 'Z' && state != 'X' && (!start || st == start);
}
