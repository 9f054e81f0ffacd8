/* Deliberately broken GGUF files: each defect is refused with one line naming the file, the
 * byte offset and the problem, and nsctl info exits 2 with that single line. */
#include <check.h>
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

#include "ggml_type.h"
#include "gguf.h"
#include "model.h"
#include "ns_util.h"

struct buf {
	uint8_t d[8192];
	size_t n;
};

static void b_raw(struct buf *b, const void *p, size_t n)
{
	ck_assert_uint_le(b->n + n, sizeof(b->d));
	memcpy(b->d + b->n, p, n);
	b->n += n;
}

static void b_u32(struct buf *b, uint32_t v)
{
	b_raw(b, &v, 4);
}

static void b_u64(struct buf *b, uint64_t v)
{
	b_raw(b, &v, 8);
}

static void b_str(struct buf *b, const char *s)
{
	b_u64(b, strlen(s));
	b_raw(b, s, strlen(s));
}

static void b_head(struct buf *b, uint64_t n_tensors, uint64_t n_kv)
{
	b->n = 0;
	b_raw(b, "GGUF", 4);
	b_u32(b, 3);
	b_u64(b, n_tensors);
	b_u64(b, n_kv);
}

static void b_kv_u32(struct buf *b, const char *key, uint32_t v)
{
	b_str(b, key);
	b_u32(b, NS_GGUF_U32);
	b_u32(b, v);
}

static void b_tensor(struct buf *b, const char *name, uint32_t n_dims, const uint64_t *ne,
		     uint32_t type, uint64_t offset)
{
	b_str(b, name);
	b_u32(b, n_dims);
	for (uint32_t i = 0; i < n_dims; i++)
		b_u64(b, ne[i]);
	b_u32(b, type);
	b_u64(b, offset);
}

static void b_pad_data(struct buf *b, size_t data_bytes)
{
	while (b->n % 32)
		b->d[b->n++] = 0;
	ck_assert_uint_le(b->n + data_bytes, sizeof(b->d));
	memset(b->d + b->n, 0x11, data_bytes);
	b->n += data_bytes;
}

static char s_file[] = "/tmp/ns-broken-XXXXXX.gguf";

static void s_write(const struct buf *b)
{
	FILE *f = fopen(s_file, "wb");

	ck_assert_ptr_nonnull(f);
	ck_assert_uint_eq(fwrite(b->d, 1, b->n, f), b->n);
	ck_assert_int_eq(fclose(f), 0);
}

/* Open must fail with an error naming the file, an offset and the expected phrase; nsctl info
 * must exit 2 with exactly that one line. */
static void s_expect(const struct buf *b, const char *phrase)
{
	struct ns_model *m = NULL;
	char err[NS_ERR_LEN], cmd[1024], line[1024];
	const char *root = getenv("NS_BUILD_ROOT");
	FILE *p;
	int ret, lines = 0, status;

	s_write(b);
	ret = ns_model_open(s_file, &m, err, sizeof(err));
	ck_assert_msg(ret < 0, "'%s' was accepted", phrase);
	ck_assert_ptr_null(m);
	ck_assert_msg(strstr(err, s_file) && strstr(err, "offset ") && strstr(err, phrase),
		      "expected '%s', got: %s", phrase, err);
	ck_assert_ptr_null(strchr(err, '\n'));
	if (!root)
		return;
	snprintf(cmd, sizeof(cmd), "%s/nsctl/nsctl info %s 2>&1", root, s_file);
	p = popen(cmd, "r");
	ck_assert_ptr_nonnull(p);
	while (fgets(line, sizeof(line), p)) {
		lines++;
		ck_assert_msg(strstr(line, phrase), "nsctl printed: %s", line);
	}
	status = pclose(p);
	ck_assert_int_eq(lines, 1);
	ck_assert(WIFEXITED(status) && WEXITSTATUS(status) == 2);
}

static void s_setup(void)
{
	int fd = mkstemps(s_file, 5);

	ck_assert_int_ge(fd, 0);
	close(fd);
}

static void s_teardown(void)
{
	unlink(s_file);
	memcpy(s_file + strlen(s_file) - 11, "XXXXXX.gguf", 11);
}

START_TEST(header_defects)
{
	struct buf b;

	b.n = 0;
	s_expect(&b, "truncated");
	b_head(&b, 0, 0);
	memcpy(b.d, "GGUG", 4);
	s_expect(&b, "not a GGUF file");
	b_head(&b, 0, 0);
	b.d[4] = 1;
	s_expect(&b, "version 1 is not supported");
	b_head(&b, 0, 0);
	b.d[4] = 7;
	s_expect(&b, "unsupported GGUF version 7");
	b_head(&b, 0, 0);
	b.d[4] = 0;
	b.d[7] = 3;
	s_expect(&b, "big-endian");
	b_head(&b, 0, 1ull << 60);
	s_expect(&b, "metadata count");
	b_head(&b, 1ull << 60, 0);
	s_expect(&b, "tensor count");
	b_head(&b, 0, 0);
	b.n -= 3; /* cut inside n_kv */
	s_expect(&b, "truncated");
}
END_TEST

START_TEST(metadata_defects)
{
	struct buf b;

	b_head(&b, 0, 1);
	b_u64(&b, 1ull << 40);
	b_u64(&b, 0);
	s_expect(&b, "length");
	b_head(&b, 0, 1);
	b_str(&b, "k");
	b_u32(&b, 99);
	s_expect(&b, "unknown value type 99");
	b_head(&b, 0, 1);
	b_str(&b, "k");
	b_u32(&b, NS_GGUF_ARRAY);
	b_u32(&b, NS_GGUF_U32);
	b_u64(&b, 1ull << 61);
	s_expect(&b, "cannot fit");
	b_head(&b, 0, 1);
	b_str(&b, "k");
	b_u32(&b, NS_GGUF_ARRAY);
	b_u32(&b, 77);
	b_u64(&b, 1);
	s_expect(&b, "unknown array item type");
	b_head(&b, 0, 1);
	b_str(&b, "k");
	b_u32(&b, NS_GGUF_BOOL);
	b.d[b.n++] = 2;
	s_expect(&b, "neither 0 nor 1");
	b_head(&b, 0, 2);
	b_kv_u32(&b, "dup", 1);
	b_kv_u32(&b, "dup", 2);
	s_expect(&b, "duplicate metadata key 'dup'");
	b_head(&b, 0, 1);
	b_kv_u32(&b, "general.alignment", 48);
	s_expect(&b, "not a power of two");
	b_head(&b, 0, 1);
	b_str(&b, "general.alignment");
	b_u32(&b, NS_GGUF_STRING);
	b_str(&b, "32");
	s_expect(&b, "expected UINT32");
	b_head(&b, 0, 1);
	b_u64(&b, 3);
	b_raw(&b, "a\0b", 3);
	b_u32(&b, NS_GGUF_U8);
	b.d[b.n++] = 1;
	s_expect(&b, "NUL");
	/* arrays of arrays nested 9 deep */
	b_head(&b, 0, 1);
	b_str(&b, "deep");
	b_u32(&b, NS_GGUF_ARRAY);
	for (int i = 0; i < 9; i++) {
		b_u32(&b, NS_GGUF_ARRAY);
		b_u64(&b, 1);
	}
	b_u32(&b, NS_GGUF_U8);
	b_u64(&b, 0);
	s_expect(&b, "nested deeper");
	/* split metadata that contradicts itself */
	b_head(&b, 0, 2);
	b_kv_u32(&b, "split.count", 2);
	b_kv_u32(&b, "split.no", 5);
	s_expect(&b, "invalid split metadata");
}
END_TEST

START_TEST(tensor_defects)
{
	uint64_t ne2[2] = { 32, 2 }, big[2] = { 1ull << 40, 1ull << 40 }, odd[1] = { 33 };
	uint64_t ne5[5] = { 1, 1, 1, 1, 1 };
	struct buf b;

	b_head(&b, 1, 0);
	b_tensor(&b, "t", 5, ne5, NS_TYPE_F32, 0);
	s_expect(&b, "5 dimensions");
	b_head(&b, 1, 0);
	b_tensor(&b, "t", 2, big, NS_TYPE_F32, 0);
	s_expect(&b, "overflow");
	b_head(&b, 1, 0);
	b_tensor(&b, "t", 2, ne2, 31, 0);
	s_expect(&b, "unknown ggml type id 31");
	b_head(&b, 1, 0);
	b_tensor(&b, "t", 1, odd, NS_TYPE_Q8_0, 0);
	s_expect(&b, "not a multiple of the Q8_0 block size");
	b_head(&b, 2, 0);
	b_tensor(&b, "t", 2, ne2, NS_TYPE_F32, 0);
	b_tensor(&b, "t", 2, ne2, NS_TYPE_F32, 256);
	b_pad_data(&b, 512);
	s_expect(&b, "duplicate tensor name 't'");
	b_head(&b, 1, 0);
	b_tensor(&b, "t", 2, ne2, NS_TYPE_F32, 4);
	b_pad_data(&b, 260);
	s_expect(&b, "not aligned");
	b_head(&b, 1, 0);
	b_tensor(&b, "t", 2, ne2, NS_TYPE_F32, 0);
	b_pad_data(&b, 255);
	s_expect(&b, "truncated: tensor 't'");
	/* the offset itself past the data, near and far (data_len - offset must not wrap) */
	b_head(&b, 1, 0);
	b_tensor(&b, "t", 2, ne2, NS_TYPE_F32, 512);
	b_pad_data(&b, 256);
	s_expect(&b, "tensor 't': data offset 512 lies past the end of the data (256 bytes)");
	b_head(&b, 1, 0);
	b_tensor(&b, "t", 2, ne2, NS_TYPE_F32, UINT64_MAX - 31);
	b_pad_data(&b, 256);
	s_expect(&b, "tensor 't': data offset 18446744073709551584 lies past the end of the data");
	b_head(&b, 2, 0);
	b_tensor(&b, "a", 2, ne2, NS_TYPE_F32, 0);
	b_tensor(&b, "b", 2, ne2, NS_TYPE_F32, 128);
	b_pad_data(&b, 512);
	s_expect(&b, "overlap");
	b_head(&b, 1, 0);
	b_tensor(&b, "", 2, ne2, NS_TYPE_F32, 0);
	s_expect(&b, "empty");
	b_head(&b, 1, 0);
	b_tensor(&b, "t", 2, ne2, NS_TYPE_F32, 0);
	s_expect(&b, "data section");
}
END_TEST

/* Types we know but cannot compute still open: they are refused only when computed. */
START_TEST(uncomputable_type_opens)
{
	uint64_t ne[2] = { 256, 2 };
	struct ns_model *m = NULL;
	char err[NS_ERR_LEN];
	struct buf b;

	b_head(&b, 1, 0);
	b_tensor(&b, "iq", 2, ne, NS_TYPE_IQ2_XXS, 0);
	b_pad_data(&b, 2 * 66);
	s_write(&b);
	ck_assert_msg(ns_model_open(s_file, &m, err, sizeof(err)) == 0, "%s", err);
	ck_assert_uint_eq(m->tensors[0].n_bytes, 132);
	ck_assert(!ns_type_computable(m->tensors[0].type));
	ns_model_close(&m);
}
END_TEST

int main(void)
{
	Suite *s = suite_create("gguf_broken");
	TCase *tc = tcase_create("core");
	SRunner *sr;
	int failed;

	tcase_add_checked_fixture(tc, s_setup, s_teardown);
	tcase_add_test(tc, header_defects);
	tcase_add_test(tc, metadata_defects);
	tcase_add_test(tc, tensor_defects);
	tcase_add_test(tc, uncomputable_type_opens);
	suite_add_tcase(s, tc);
	sr = srunner_create(s);
	srunner_run_all(sr, CK_NORMAL);
	failed = srunner_ntests_failed(sr);
	srunner_free(sr);
	return failed ? 1 : 0;
}
