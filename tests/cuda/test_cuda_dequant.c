/* test_cuda_dequant: ns_cuda_dequant against every golden of oracle/quant, bit for bit (the
 * whole tensor and a window starting at row 1), plus random rows against ns_dequant_rows
 * (F32, F16 and BF16 also with rows of 33, 172 and 4100 columns: a partial last unit of 32,
 * whole and from rows 1 and 3, so windows only 2-byte aligned for F16/BF16) and the
 * -ENOTSUP / -EINVAL contract. Exit 77 without a GPU. */
#include <errno.h>
#include <string.h>

#include "cuda_test.h"
#include "dequant.h"
#include "ggml_type.h"
#include "kt_util.h"

static void s_cmp(const char *what, const float *got, const float *want, uint64_t n)
{
	if (memcmp(got, want, n * 4) == 0)
		return;
	for (uint64_t i = 0; i < n; i++)
		if (memcmp(&got[i], &want[i], 4))
			CT_FAIL("%s: element %llu: got %.9g want %.9g", what, (unsigned long long)i,
				got[i], want[i]);
}

/* out = rows first .. n_rows - 1 of raw, dequantized on the device as a window that starts at
 * row first of the uploaded whole (so with that row's alignment). */
static void s_gpu_dequant(uint32_t type, const uint8_t *raw, uint64_t n_cols, uint64_t n_rows,
			  uint64_t rb, uint64_t first, float *out)
{
	uint8_t *dw = ct_upload(raw, rb * n_rows);
	float *dy = ct_dev(n_cols * n_rows * 4);

	CT_CHECK(ns_cuda_dequant(type, dw + first * rb, n_cols, n_rows - first, dy, NULL));
	CT_CHECK(ns_cuda_sync());
	ct_download(out, dy, n_cols * (n_rows - first) * 4);
	ns_cuda_free(dw);
	ns_cuda_free(dy);
}

int main(void)
{
	int n_tensors = 0;

	ct_init("cuda_dequant");
	ns_test_require_oracle();
	for (int ti = 0; ti < 14; ti++) {
		char path[1024], err[512];
		struct ns_model *m = NULL;

		snprintf(path, sizeof(path), "%s/quant/%s.gguf", ns_test_oracle_dir(),
			 ct_type_names[ti]);
		if (ns_model_open(path, &m, err, sizeof(err)))
			CT_FAIL("%s", err);
		for (uint64_t k = 0; k < m->n_tensors; k++) {
			const struct ns_model_tensor *t = &m->tensors[k];
			size_t len = 0;
			char what[300];
			float *ref, *out;
			uint8_t *raw;

			snprintf(path, sizeof(path), "%s/quant/%s/%s.f32", ns_test_oracle_dir(),
				 ct_type_names[ti], t->name);
			ref = ns_test_read_file(path, &len);
			if (!ref || len != t->n_elems * 4)
				CT_FAIL("bad reference %s", path);
			raw = kt_read_rows(m, t, 0, t->n_rows);
			out = malloc(len + 4);
			s_gpu_dequant(t->type, raw, t->ne[0], t->n_rows, t->row_bytes, 0, out);
			snprintf(what, sizeof(what), "%s/%s", ct_type_names[ti], t->name);
			s_cmp(what, out, ref, t->n_elems);
			if (t->n_rows > 1) { /* a window from row 1: its own (less aligned) start */
				s_gpu_dequant(t->type, raw, t->ne[0], t->n_rows, t->row_bytes, 1,
					      out);
				s_cmp(what, out, ref + t->ne[0], t->n_elems - t->ne[0]);
			}
			free(raw);
			free(out);
			free(ref);
			n_tensors++;
		}
		ns_model_close(&m);
	}
	/* random rows, larger than the goldens, against the CPU */
	uint64_t seed = 42;
	for (int ti = 0; ti < 14; ti++) {
		const uint64_t nc = 4096, nr = 33;
		uint64_t rb;
		uint8_t *raw = ct_random_rows(ct_types[ti], nc, nr, &seed, &rb);
		float *cpu = malloc(nc * nr * 4), *gpu = malloc(nc * nr * 4);

		if (ns_dequant_rows(ct_types[ti], raw, nc, nr, cpu))
			CT_FAIL("cpu dequant");
		s_gpu_dequant(ct_types[ti], raw, nc, nr, rb, 0, gpu);
		s_cmp(ct_type_names[ti], gpu, cpu, nc * nr);
		free(raw);
		free(cpu);
		free(gpu);
	}
	/* float rows ending in a partial unit: whole, and windows from rows 1 and 3 */
	for (int ti = 0; ti < 3; ti++) {
		static const uint64_t ncs[3] = { 33, 172, 4100 };

		for (int k = 0; k < 3; k++) {
			const uint64_t nc = ncs[k], nr = 33;
			uint64_t rb;
			uint8_t *raw = ct_random_rows(ct_types[ti], nc, nr, &seed, &rb);
			float *cpu = malloc(nc * nr * 4), *gpu = malloc(nc * nr * 4);
			char what[64];

			if (!cpu || !gpu || ns_dequant_rows(ct_types[ti], raw, nc, nr, cpu))
				CT_FAIL("cpu dequant");
			snprintf(what, sizeof(what), "%s %llu columns", ct_type_names[ti],
				 (unsigned long long)nc);
			s_gpu_dequant(ct_types[ti], raw, nc, nr, rb, 0, gpu);
			s_cmp(what, gpu, cpu, nc * nr);
			for (uint64_t a = 1; a <= 3; a += 2) {
				s_gpu_dequant(ct_types[ti], raw, nc, nr, rb, a, gpu);
				s_cmp(what, gpu, cpu + a * nc, nc * (nr - a));
			}
			free(raw);
			free(cpu);
			free(gpu);
		}
	}
	/* contract */
	float *dy = ct_dev(4096);
	void *dw = ct_dev(4096);
	if (ns_cuda_dequant(NS_TYPE_IQ2_XXS, dw, 256, 1, dy, NULL) != -ENOTSUP ||
	    ns_cuda_dequant(NS_TYPE_Q4_0, dw, 48, 1, dy, NULL) != -EINVAL ||
	    ns_cuda_dequant(NS_TYPE_Q4_K, (uint8_t *)dw + 8, 256, 1, dy, NULL) != -EINVAL ||
	    ns_cuda_dequant(NS_TYPE_Q4_0, dw, 32, 0, dy, NULL) != 0 ||
	    ns_cuda_dequant(NS_TYPE_F16, (uint8_t *)dw + 1, 33, 1, dy, NULL) != -EINVAL ||
	    ns_cuda_dequant(NS_TYPE_F32, (uint8_t *)dw + 2, 33, 1, dy, NULL) != -EINVAL)
		CT_FAIL("contract");
	ns_cuda_free(dy);
	ns_cuda_free(dw);
	printf("%d oracle tensors bit-exact (whole and from row 1), 14 random types bit-exact, "
	       "F32/F16/BF16 rows of 33/172/4100 columns bit-exact (whole, from rows 1 and 3)\n",
	       n_tensors);
	return 0;
}
