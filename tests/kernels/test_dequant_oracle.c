/* test_dequant_oracle: ns_dequant_rows against every golden of oracle/quant, byte for byte,
 * for whole tensors and for row windows starting and ending mid-tensor (incl. zero rows).
 * Tensors come through ns_model (the project's GGUF reader); the list is the directory of
 * .f32 dumps of each type. Also checks the -ENOTSUP / -EINVAL contract. */
#include <errno.h>

#include "dequant.h"
#include "ggml_type.h"
#include "kt_util.h"

static const char *s_types[] = { "f32", "f16", "bf16", "q4_0", "q4_1", "q5_0", "q5_1", "q8_0",
				 "q2_k", "q3_k", "q4_k", "q5_k", "q6_k", "mxfp4" };

static int s_check_tensor(const struct ns_model *m, const char *dir, const char *name)
{
	char path[1024];
	size_t ref_len = 0;
	const struct ns_model_tensor *t = ns_model_find(m, name);
	float *ref, *out;
	uint8_t *raw;
	int rc;

	if (!t)
		KT_FAIL("%s: tensor %s missing from the gguf", dir, name);
	snprintf(path, sizeof(path), "%s/quant/%s/%s.f32", ns_test_oracle_dir(), dir, name);
	ref = ns_test_read_file(path, &ref_len);
	if (!ref || ref_len != t->n_elems * 4)
		KT_FAIL("%s: bad reference %s", dir, path);
	raw = kt_read_rows(m, t, 0, t->n_rows);
	out = malloc(ref_len + 4);
	rc = ns_dequant_rows(t->type, raw, t->ne[0], t->n_rows, out);
	if (rc)
		KT_FAIL("%s/%s: ns_dequant_rows = %d", dir, name, rc);
	if (memcmp(out, ref, ref_len)) {
		for (uint64_t i = 0; i < t->n_elems; i++)
			if (memcmp(&out[i], &ref[i], 4))
				KT_FAIL("%s/%s: element %llu (row %llu col %llu): got %.9g want %.9g",
					dir, name, (unsigned long long)i,
					(unsigned long long)(i / t->ne[0]),
					(unsigned long long)(i % t->ne[0]), out[i], ref[i]);
	}
	/* windows: zero rows, single rows, mid-tensor starts and ends */
	uint64_t n = t->n_rows;
	uint64_t win[][2] = { { 0, 0 }, { n / 2, n / 2 }, { 0, 1 }, { n - 1, n }, { 1, n },
			      { n / 3, n - n / 3 }, { n / 2, n / 2 + 1 }, { 1, n > 2 ? n - 1 : n } };
	for (size_t w = 0; w < sizeof(win) / sizeof(win[0]); w++) {
		uint64_t a = win[w][0], b = win[w][1];
		uint8_t *wr = kt_read_rows(m, t, a, b);
		float *wo = malloc((b - a) * t->ne[0] * 4 + 4);

		memset(wo, 0xA5, (b - a) * t->ne[0] * 4 + 4);
		rc = ns_dequant_rows(t->type, wr, t->ne[0], b - a, wo);
		if (rc || memcmp(wo, ref + a * t->ne[0], (b - a) * t->ne[0] * 4))
			KT_FAIL("%s/%s: window [%llu,%llu) differs (rc %d)", dir, name,
				(unsigned long long)a, (unsigned long long)b, rc);
		if (((uint8_t *)wo)[(b - a) * t->ne[0] * 4] != 0xA5)
			KT_FAIL("%s/%s: window [%llu,%llu) wrote past its end", dir, name,
				(unsigned long long)a, (unsigned long long)b);
		free(wr);
		free(wo);
	}
	free(raw);
	free(out);
	free(ref);
	return 0;
}

int main(void)
{
	int n_checked = 0;

	ns_test_require_oracle();
	for (size_t i = 0; i < sizeof(s_types) / sizeof(s_types[0]); i++) {
		char path[1024], err[512];
		struct ns_model *m = NULL;
		struct dirent *de;
		DIR *d;
		int n_type = 0;

		snprintf(path, sizeof(path), "%s/quant/%s.gguf", ns_test_oracle_dir(), s_types[i]);
		if (ns_model_open(path, &m, err, sizeof(err)))
			KT_FAIL("%s", err);
		snprintf(path, sizeof(path), "%s/quant/%s", ns_test_oracle_dir(), s_types[i]);
		d = opendir(path);
		if (!d)
			KT_FAIL("no directory %s", path);
		while ((de = readdir(d))) {
			size_t l = strlen(de->d_name);
			char name[256];

			if (l < 5 || l >= sizeof(name) || strcmp(de->d_name + l - 4, ".f32"))
				continue;
			memcpy(name, de->d_name, l - 4);
			name[l - 4] = '\0';
			s_check_tensor(m, s_types[i], name);
			n_type++;
		}
		closedir(d);
		if (n_type < 8)
			KT_FAIL("%s: only %d tensors found", s_types[i], n_type);
		n_checked += n_type;
		printf("%-6s %2d tensors bit-exact (whole and 8 windows each)\n", s_types[i], n_type);
		ns_model_close(&m);
	}

	/* contract: unsupported types and partial blocks */
	float out[64];
	uint8_t zero[256] = { 0 };
	uint32_t unsup[] = { NS_TYPE_IQ2_XXS, NS_TYPE_IQ4_NL, NS_TYPE_TQ1_0, NS_TYPE_NVFP4,
			     NS_TYPE_Q8_K, NS_TYPE_I8, 31, 1000 };
	for (size_t i = 0; i < sizeof(unsup) / sizeof(unsup[0]); i++)
		if (ns_dequant_rows(unsup[i], zero, 256, 1, out) != -ENOTSUP)
			KT_FAIL("type %u not refused with -ENOTSUP", unsup[i]);
	if (ns_dequant_rows(NS_TYPE_Q4_0, zero, 48, 1, out) != -EINVAL)
		KT_FAIL("Q4_0 with 48 columns accepted");
	if (ns_dequant_rows(NS_TYPE_Q4_K, zero, 32, 1, out) != -EINVAL)
		KT_FAIL("Q4_K with 32 columns accepted");
	if (ns_dequant_rows(NS_TYPE_Q4_0, zero, 32, 0, out) != 0)
		KT_FAIL("zero rows refused");
	printf("%d tensors ok\n", n_checked);
	return 0;
}
