/* GGUF writer <-> reader round trips: every value type (nested arrays included), tensors of
 * several types, lazy tensors, byte-identical rewrites, and synthetic models (single and split)
 * that reopen with identical tensor bytes. */
#include <check.h>
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "ggml_type.h"
#include "gguf.h"
#include "gguf_write.h"
#include "model.h"
#include "ns_util.h"
#include "synth.h"

static char s_dir[256];

static void s_setup(void)
{
	snprintf(s_dir, sizeof(s_dir), "/tmp/ns-test-gguf-XXXXXX");
	ck_assert_ptr_nonnull(mkdtemp(s_dir));
}

static void s_teardown(void)
{
	char cmd[300];

	snprintf(cmd, sizeof(cmd), "rm -rf '%s'", s_dir);
	ck_assert_int_eq(system(cmd), 0);
}

static char *s_path(const char *name)
{
	static char buf[2][300];
	static int k;

	k ^= 1;
	snprintf(buf[k], sizeof(buf[k]), "%s/%s", s_dir, name);
	return buf[k];
}

static int s_fill_counter(void *ctx, uint64_t off, void *dst, size_t n)
{
	(void)ctx;
	for (size_t i = 0; i < n; i++)
		((uint8_t *)dst)[i] = (uint8_t)((off + i) * 7 + 3);
	return 0;
}

static struct ns_gguf_writer *s_zoo_writer(void)
{
	struct ns_gguf_writer *w = ns_gguf_writer_new(64);
	int32_t ints[] = { 1, -2, 3, INT32_MAX };
	uint8_t bools[] = { 1, 0, 1 };
	const char *strs[] = { "a", "", "\xc3\xbc" "n", "<|endoftext|>" };
	struct ns_gguf_value inner[2], outer = { .type = NS_GGUF_ARRAY };
	struct ns_gguf_str inner_strs[2] = { { 2, "hi" }, { 0, "" } };
	float f32[64 * 3];
	uint64_t ne2[2] = { 64, 3 }, ne1[1] = { 7 }, neq[2] = { 32, 2 }, ne3[3] = { 256, 2, 3 };
	uint8_t q8[2 * 34] = { 0 };

	ck_assert_ptr_nonnull(w);
	ck_assert_int_eq(ns_gguf_writer_set_str(w, "general.architecture", "zoo"), 0);
	ck_assert_int_eq(ns_gguf_writer_set_u32(w, "zoo.u32", 4000000000u), 0);
	ck_assert_int_eq(ns_gguf_writer_set_i32(w, "zoo.i32", -2000000000), 0);
	ck_assert_int_eq(ns_gguf_writer_set_u64(w, "zoo.u64", UINT64_MAX), 0);
	ck_assert_int_eq(ns_gguf_writer_set_f32(w, "zoo.f32", 3.140625f), 0);
	ck_assert_int_eq(ns_gguf_writer_set_bool(w, "zoo.bool", true), 0);
	ck_assert_int_eq(ns_gguf_writer_set_str(w, "zoo.str", "line1\nline2 \xe6\x97\xa5"), 0);
	ck_assert_int_eq(ns_gguf_writer_set_arr(w, "zoo.arr_i32", NS_GGUF_I32, ints, 4), 0);
	ck_assert_int_eq(ns_gguf_writer_set_arr(w, "zoo.arr_bool", NS_GGUF_BOOL, bools, 3), 0);
	ck_assert_int_eq(ns_gguf_writer_set_arr_str(w, "zoo.arr_str", strs, 4), 0);
	ck_assert_int_eq(ns_gguf_writer_set_arr(w, "zoo.arr_empty", NS_GGUF_F64, NULL, 0), 0);
	/* nested: [[1,-2,3,INT32_MAX], ["hi", ""]] */
	inner[0].type = NS_GGUF_ARRAY;
	inner[0].v.arr.item_type = NS_GGUF_I32;
	inner[0].v.arr.n = 4;
	inner[0].v.arr.items = ints;
	inner[1].type = NS_GGUF_ARRAY;
	inner[1].v.arr.item_type = NS_GGUF_STRING;
	inner[1].v.arr.n = 2;
	inner[1].v.arr.items = inner_strs;
	outer.v.arr.item_type = NS_GGUF_ARRAY;
	outer.v.arr.n = 2;
	outer.v.arr.items = inner;
	ck_assert_int_eq(ns_gguf_writer_set_value(w, "zoo.nested", &outer), 0);
	/* replacing a key keeps its position */
	ck_assert_int_eq(ns_gguf_writer_set_u32(w, "zoo.u32", 4000000001u), 0);
	for (size_t i = 0; i < NS_ARRAY_LEN(f32); i++)
		f32[i] = (float)i * 0.5f - 3.0f;
	ck_assert_int_eq(ns_gguf_writer_add_tensor(w, "t.f32", NS_TYPE_F32, 2, ne2, f32, sizeof(f32)), 0);
	ck_assert_int_eq(ns_gguf_writer_add_tensor(w, "t.f32.1d", NS_TYPE_F32, 1, ne1, f32, 28), 0);
	ck_assert_int_eq(ns_gguf_writer_add_tensor(w, "t.q8", NS_TYPE_Q8_0, 2, neq, q8, sizeof(q8)), 0);
	ck_assert_int_eq(ns_gguf_writer_add_tensor_lazy(w, "t.lazy.q4k", NS_TYPE_Q4_K, 3, ne3,
							s_fill_counter, NULL), 0);
	/* refusals: duplicate name, wrong byte count, row not a whole number of blocks */
	ck_assert_int_eq(ns_gguf_writer_add_tensor(w, "t.q8", NS_TYPE_Q8_0, 2, neq, q8, sizeof(q8)), -EEXIST);
	ck_assert_int_eq(ns_gguf_writer_add_tensor(w, "t.bad", NS_TYPE_F32, 1, ne1, f32, 27), -EINVAL);
	ck_assert_int_eq(ns_gguf_writer_add_tensor(w, "t.bad2", NS_TYPE_Q8_0, 1, ne1, q8, 34), -EINVAL);
	return w;
}

START_TEST(roundtrip_all_types)
{
	struct ns_gguf_writer *w = s_zoo_writer();
	struct ns_gguf *g = NULL;
	char err[NS_ERR_LEN];
	const struct ns_gguf_value *v;
	uint64_t u;
	int64_t i;
	double d;
	bool b;

	ck_assert_int_eq(ns_gguf_writer_write_file(w, s_path("zoo.gguf"), err, sizeof(err)), 0);
	ns_gguf_writer_destroy(&w);
	ck_assert_ptr_null(w);
	ck_assert_msg(ns_gguf_open(s_path("zoo.gguf"), &g, err, sizeof(err)) == 0, "%s", err);
	ck_assert_uint_eq(g->version, 3);
	ck_assert_uint_eq(g->alignment, 64);
	ck_assert_uint_eq(g->data_offset % 64, 0);
	ck_assert_str_eq(ns_gguf_get_str(g, "general.architecture"), "zoo");
	ck_assert(ns_gguf_get_u64(g, "zoo.u32", &u) && u == 4000000001u);
	ck_assert_str_eq(g->kv[1].key.s, "zoo.u32");
	ck_assert(ns_gguf_get_i64(g, "zoo.i32", &i) && i == -2000000000);
	ck_assert(ns_gguf_get_u64(g, "zoo.u64", &u) && u == UINT64_MAX);
	ck_assert(!ns_gguf_get_i64(g, "zoo.u64", &i)); /* does not fit */
	ck_assert(ns_gguf_get_f64(g, "zoo.f32", &d) && d == 3.140625);
	ck_assert(ns_gguf_get_bool(g, "zoo.bool", &b) && b);
	ck_assert_str_eq(ns_gguf_get_str(g, "zoo.str"), "line1\nline2 \xe6\x97\xa5");
	v = ns_gguf_get_arr(g, "zoo.arr_i32");
	ck_assert(v && v->v.arr.item_type == NS_GGUF_I32 && v->v.arr.n == 4);
	ck_assert_int_eq(ns_gguf_arr_i64(v, 1), -2);
	ck_assert_int_eq(ns_gguf_arr_i64(v, 3), INT32_MAX);
	v = ns_gguf_get_arr(g, "zoo.arr_bool");
	ck_assert(v && v->v.arr.n == 3 && ((uint8_t *)v->v.arr.items)[1] == 0);
	v = ns_gguf_get_arr(g, "zoo.arr_str");
	ck_assert(v && v->v.arr.item_type == NS_GGUF_STRING && v->v.arr.n == 4);
	ck_assert_str_eq(((struct ns_gguf_str *)v->v.arr.items)[2].s, "\xc3\xbcn");
	ck_assert_uint_eq(((struct ns_gguf_str *)v->v.arr.items)[1].len, 0);
	v = ns_gguf_get_arr(g, "zoo.arr_empty");
	ck_assert(v && v->v.arr.n == 0 && v->v.arr.item_type == NS_GGUF_F64);
	v = ns_gguf_get_arr(g, "zoo.nested");
	ck_assert(v && v->v.arr.item_type == NS_GGUF_ARRAY && v->v.arr.n == 2);
	{
		const struct ns_gguf_value *in = v->v.arr.items;
		ck_assert(in[0].v.arr.item_type == NS_GGUF_I32 && in[0].v.arr.n == 4);
		ck_assert_int_eq(ns_gguf_arr_i64(&in[0], 0), 1);
		ck_assert(in[1].v.arr.item_type == NS_GGUF_STRING && in[1].v.arr.n == 2);
		ck_assert_str_eq(((struct ns_gguf_str *)in[1].v.arr.items)[0].s, "hi");
	}
	ck_assert_uint_eq(g->n_tensors, 4);
	ck_assert_int_eq(ns_gguf_find_tensor(g, "t.lazy.q4k"), 3);
	ck_assert_uint_eq(g->tensors[3].n_rows, 6);
	ck_assert_uint_eq(g->tensors[3].row_bytes, 144);
	ck_assert_uint_eq(g->tensors[3].n_bytes, 6 * 144);
	ck_assert_uint_eq(g->tensors[1].n_dims, 1);
	for (uint64_t t = 0; t < g->n_tensors; t++)
		ck_assert_uint_eq(g->tensors[t].file_offset % 64, 0);
	/* tensor bytes land where the index says */
	{
		int fd = open(s_path("zoo.gguf"), O_RDONLY);
		float got[64 * 3];
		uint8_t lazy[6 * 144];
		ck_assert_int_ge(fd, 0);
		ck_assert_int_eq(pread(fd, got, sizeof(got), (off_t)g->tensors[0].file_offset), (ssize_t)sizeof(got));
		ck_assert_float_eq(got[5], 5 * 0.5f - 3.0f);
		ck_assert_int_eq(pread(fd, lazy, sizeof(lazy), (off_t)g->tensors[3].file_offset), (ssize_t)sizeof(lazy));
		for (size_t k = 0; k < sizeof(lazy); k++)
			ck_assert_uint_eq(lazy[k], (uint8_t)(k * 7 + 3));
		close(fd);
	}
	ns_gguf_close(&g);
	ck_assert_ptr_null(g);
}
END_TEST

static int s_cmp_files(const char *a, const char *b)
{
	char cmd[700];

	snprintf(cmd, sizeof(cmd), "cmp -s '%s' '%s'", a, b);
	return system(cmd);
}

START_TEST(rewrite_is_byte_identical)
{
	struct ns_gguf_writer *w = s_zoo_writer();
	char err[NS_ERR_LEN];

	ck_assert_int_eq(ns_gguf_writer_write_file(w, s_path("a.gguf"), err, sizeof(err)), 0);
	ck_assert_int_eq(ns_gguf_writer_write_file(w, s_path("b.gguf"), err, sizeof(err)), 0);
	ns_gguf_writer_destroy(&w);
	w = s_zoo_writer();
	ck_assert_int_eq(ns_gguf_writer_write_file(w, s_path("c.gguf"), err, sizeof(err)), 0);
	ns_gguf_writer_destroy(&w);
	ck_assert_int_eq(s_cmp_files(s_path("a.gguf"), s_path("b.gguf")), 0);
	ck_assert_int_eq(s_cmp_files(s_path("a.gguf"), s_path("c.gguf")), 0);
}
END_TEST

/* A file copied key by key and tensor by tensor through the writer is byte-identical. */
START_TEST(copy_through_writer)
{
	struct ns_gguf_writer *w = s_zoo_writer(), *w2;
	struct ns_gguf *g = NULL;
	char err[NS_ERR_LEN];
	int fd;

	ck_assert_int_eq(ns_gguf_writer_write_file(w, s_path("src.gguf"), err, sizeof(err)), 0);
	ns_gguf_writer_destroy(&w);
	ck_assert_int_eq(ns_gguf_open(s_path("src.gguf"), &g, err, sizeof(err)), 0);
	w2 = ns_gguf_writer_new(g->alignment);
	for (uint64_t i = 0; i < g->n_kv; i++)
		ck_assert_int_eq(ns_gguf_writer_set_value(w2, g->kv[i].key.s, &g->kv[i].value), 0);
	fd = open(s_path("src.gguf"), O_RDONLY);
	ck_assert_int_ge(fd, 0);
	for (uint64_t i = 0; i < g->n_tensors; i++) {
		const struct ns_gguf_tensor *t = &g->tensors[i];
		void *buf = malloc(t->n_bytes);
		ck_assert_int_eq(pread(fd, buf, t->n_bytes, (off_t)t->file_offset), (ssize_t)t->n_bytes);
		ck_assert_int_eq(ns_gguf_writer_add_tensor(w2, t->name.s, t->type, t->n_dims, t->ne, buf,
							   t->n_bytes), 0);
		free(buf);
	}
	close(fd);
	ck_assert_int_eq(ns_gguf_writer_write_file(w2, s_path("copy.gguf"), err, sizeof(err)), 0);
	ns_gguf_writer_destroy(&w2);
	ns_gguf_close(&g);
	ck_assert_int_eq(s_cmp_files(s_path("src.gguf"), s_path("copy.gguf")), 0);
}
END_TEST

/* Synthetic models: deterministic, and a split copy holds the same tensors and bytes. */
START_TEST(synth_split_matches_single)
{
	struct ns_synth_opts o = { .preset = "demo", .layers = 3, .seed = 7 };
	struct ns_model *one = NULL, *split = NULL;
	char err[NS_ERR_LEN];

	ck_assert_msg(ns_synth_write(&o, s_path("m.gguf"), err, sizeof(err)) == 0, "%s", err);
	ck_assert_msg(ns_synth_write(&o, s_path("m2.gguf"), err, sizeof(err)) == 0, "%s", err);
	ck_assert_int_eq(s_cmp_files(s_path("m.gguf"), s_path("m2.gguf")), 0);
	o.split = 3;
	ck_assert_msg(ns_synth_write(&o, s_path("s.gguf"), err, sizeof(err)) == 0, "%s", err);
	ck_assert_msg(ns_model_open(s_path("m.gguf"), &one, err, sizeof(err)) == 0, "%s", err);
	ck_assert_msg(ns_model_open(s_path("s-00002-of-00003.gguf"), &split, err, sizeof(err)) == 0,
		      "%s", err);
	ck_assert_uint_eq(split->n_shards, 3);
	ck_assert_uint_eq(one->n_tensors, split->n_tensors);
	for (uint64_t i = 0; i < one->n_tensors; i++) {
		const struct ns_model_tensor *a = &one->tensors[i];
		const struct ns_model_tensor *b = ns_model_find(split, a->name);
		uint8_t x[4096], y[4096];
		int fa, fb;
		ck_assert_ptr_nonnull(b);
		ck_assert_uint_eq(a->type, b->type);
		ck_assert_uint_eq(a->n_bytes, b->n_bytes);
		ck_assert_mem_eq(a->ne, b->ne, sizeof(a->ne));
		fa = open(one->shards[a->shard]->path, O_RDONLY);
		fb = open(split->shards[b->shard]->path, O_RDONLY);
		/* first and last bytes of each tensor */
		for (int end = 0; end < 2; end++) {
			uint64_t n = a->n_bytes < sizeof(x) ? a->n_bytes : sizeof(x);
			uint64_t off = end ? a->n_bytes - n : 0;
			ck_assert_int_eq(pread(fa, x, n, (off_t)(a->file_offset + off)), (ssize_t)n);
			ck_assert_int_eq(pread(fb, y, n, (off_t)(b->file_offset + off)), (ssize_t)n);
			ck_assert_mem_eq(x, y, n);
		}
		close(fa);
		close(fb);
	}
	ck_assert_uint_eq(ns_model_find(one, "blk.2.ffn_down.weight")->type, NS_TYPE_Q6_K);
	ck_assert_uint_eq(ns_model_find(one, "blk.1.ffn_down.weight")->type, NS_TYPE_Q4_K);
	ns_model_close(&one);
	ns_model_close(&split);
	/* a missing shard is named */
	ck_assert_int_eq(unlink(s_path("s-00003-of-00003.gguf")), 0);
	ck_assert_int_eq(ns_model_open(s_path("s-00001-of-00003.gguf"), &split, err, sizeof(err)), -ENOENT);
	ck_assert_ptr_nonnull(strstr(err, "missing shard 3 of 3"));
	ck_assert_ptr_null(split);
}
END_TEST

int main(void)
{
	Suite *s = suite_create("gguf_write");
	TCase *tc = tcase_create("core");
	SRunner *sr;
	int failed;

	tcase_add_checked_fixture(tc, s_setup, s_teardown);
	tcase_set_timeout(tc, 300);
	tcase_add_test(tc, roundtrip_all_types);
	tcase_add_test(tc, rewrite_is_byte_identical);
	tcase_add_test(tc, copy_through_writer);
	tcase_add_test(tc, synth_split_matches_single);
	suite_add_tcase(s, tc);
	sr = srunner_create(s);
	srunner_run_all(sr, CK_NORMAL);
	failed = srunner_ntests_failed(sr);
	srunner_free(sr);
	return failed ? 1 : 0;
}
