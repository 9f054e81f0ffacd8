/* test_ram_seg.c - the RAM tier's segment and its checked reader (shm/ram_seg.h): a view is
 * refused while loading, for a tensor count or a window that does not fit the reader's model
 * or the segment, and for a directory that does not fit the mapping; an accepted view keeps
 * private copies of the tables, so a later write to the shared tables changes nothing it
 * uses. */
#include "io_testlib.h"
#include "ram_seg.h"

#define S_N 3
#define S_ROW_BYTES 64

/* The reader's model: tensor t has 4 + t rows of S_ROW_BYTES. */
static bool s_tensor(void *ctx, uint64_t t, uint64_t *n_rows, uint64_t *row_bytes)
{
	(void)ctx;
	if (t >= S_N)
		return false;
	*n_rows = 4 + t;
	*row_bytes = S_ROW_BYTES;
	return true;
}

/* Open a view of session id; returns its rc, the view closed again unless keep. */
static int s_view(const char *id, uint64_t n, struct ns_ram_view *v, bool keep, char *err,
		  size_t errlen)
{
	int rc = ns_ram_view_open(v, id, n, s_tensor, NULL, err, errlen);

	if (rc == 0 && !keep)
		ns_ram_view_close(v);
	return rc;
}

int main(void)
{
	struct ns_session_params p = NS_SESSION_PARAMS_DEFAULT;
	struct ns_session *s;
	struct ns_ram_seg r;
	struct ns_ram_view v;
	char err[NS_ERR_LEN];
	/* tensor 0: 2 rows at 0; tensor 1 none; tensor 2: all 6 rows after tensor 0's */
	uint64_t rows[S_N] = { 2, 0, 6 }, off[S_N] = { 0, 0, 2 * S_ROW_BYTES };
	uint64_t data_bytes = 8 * S_ROW_BYTES, gen = 99, saved;
	int rc;

	p.arena_bytes = 1 << 20;
	IOT_CHECK(ns_session_create(&p, &s, err, sizeof(err)) == 0, "create: %s", err);
	IOT_CHECK(s_view(s->id, S_N, &v, false, err, sizeof(err)) == -ENOENT, "no segment yet");
	IOT_CHECK(ns_ram_seg_create(&r, s->id, S_N, rows, off, data_bytes, err, sizeof(err)) == 0,
		  "ram create: %s", err);
	IOT_CHECK(r.dir->data_off % 64 == 0, "data offset aligned");
	memset(r.data, 0xa5, data_bytes);

	/* loading: not yet a view */
	IOT_CHECK(s_view(s->id, S_N, &v, false, err, sizeof(err)) == -EAGAIN, "before ready");
	ns_ram_seg_ready(&r);
	atomic_store(&r.dir->plan_gen, 7);
	IOT_CHECK(ns_ram_seg_loaded(s->id, &gen, err, sizeof(err)) == 0 && gen == 7,
		  "loaded generation %llu: %s", (unsigned long long)gen, err);

	/* the model disagrees: another tensor count */
	rc = s_view(s->id, S_N + 1, &v, false, err, sizeof(err));
	IOT_CHECK(rc == -EPROTO && strstr(err, "tensors"), "tensor count: %d %s", rc, err);

	/* a window past its tensor's rows, then past the data: refused, naming the tensor */
	r.rows[0] = 5;
	rc = s_view(s->id, S_N, &v, false, err, sizeof(err));
	IOT_CHECK(rc == -EPROTO && strstr(err, "tensor 0"), "rows past the tensor: %d %s", rc, err);
	r.rows[0] = 2;
	r.off[2] = data_bytes - 5 * S_ROW_BYTES;
	rc = s_view(s->id, S_N, &v, false, err, sizeof(err));
	IOT_CHECK(rc == -EPROTO && strstr(err, "tensor 2"), "window past the data: %d %s", rc, err);
	r.off[2] = UINT64_MAX - S_ROW_BYTES; /* the end overflows */
	rc = s_view(s->id, S_N, &v, false, err, sizeof(err));
	IOT_CHECK(rc == -EPROTO && strstr(err, "tensor 2"), "overflowing window: %d %s", rc, err);
	r.off[2] = 2 * S_ROW_BYTES;

	/* a directory that does not fit the mapping, or is not a RAM directory */
	saved = r.dir->data_bytes;
	r.dir->data_bytes = r.seg.size;
	rc = s_view(s->id, S_N, &v, false, err, sizeof(err));
	IOT_CHECK(rc == -EPROTO && strstr(err, "does not fit"), "data past the mapping: %s", err);
	r.dir->data_bytes = saved;
	saved = r.dir->data_off;
	r.dir->data_off += 8;
	rc = s_view(s->id, S_N, &v, false, err, sizeof(err));
	IOT_CHECK(rc == -EPROTO, "unaligned data offset: %d", rc);
	r.dir->data_off = saved;
	r.dir->magic ^= 1;
	rc = s_view(s->id, S_N, &v, false, err, sizeof(err));
	IOT_CHECK(rc == -EPROTO && strstr(err, "magic"), "magic: %d %s", rc, err);
	IOT_CHECK(ns_ram_seg_loaded(s->id, &gen, err, sizeof(err)) == -EPROTO, "loaded, magic");
	r.dir->magic ^= 1;

	/* published but not ready (nsio still writing the directory): look again, not refused;
	 * a segment whose header magic is still 0 (its creator between two calls) alike */
	atomic_store(&r.dir->ready, 0);
	saved = r.dir->magic;
	r.dir->magic = 0;
	rc = s_view(s->id, S_N, &v, false, err, sizeof(err));
	IOT_CHECK(rc == -EAGAIN, "directory not written yet: %d %s", rc, err);
	r.dir->magic = saved;
	atomic_store(&r.dir->ready, 1);
	saved = ((struct ns_seg_header *)r.seg.base)->magic;
	((struct ns_seg_header *)r.seg.base)->magic = 0;
	rc = s_view(s->id, S_N, &v, false, err, sizeof(err));
	IOT_CHECK(rc == -EAGAIN && strstr(err, "being created"), "header not published: %d %s",
		  rc, err);
	((struct ns_seg_header *)r.seg.base)->magic = saved;

	/* accepted: the tables are private copies, read once */
	rc = s_view(s->id, S_N, &v, true, err, sizeof(err));
	IOT_CHECK(rc == 0, "good view: %d %s", rc, err);
	IOT_CHECK(v.n_tensors == S_N && v.data_bytes == data_bytes && v.data[0] == 0xa5 &&
		  v.data[data_bytes - 1] == 0xa5, "view geometry and data");
	IOT_CHECK(v.rows != r.rows && v.off != r.off, "tables are copies");
	r.rows[2] = 1000;
	r.off[0] = UINT64_MAX;
	IOT_CHECK(v.rows[2] == 6 && v.off[0] == 0 && v.rows[0] == 2 && v.off[2] == 2 * S_ROW_BYTES,
		  "a later write to the shared tables changed the view");
	ns_ram_view_close(&v);
	ns_seg_unmap(&r.seg);
	ns_session_destroy(&s);
	printf("ok\n");
	return 0;
}
