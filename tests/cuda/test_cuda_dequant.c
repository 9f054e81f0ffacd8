/* test_cuda_dequant: ns_cuda_dequant against every golden of oracle/quant, bit for bit (the
 * whole tensor and a window starting at row 1), plus random rows against ns_dequant_rows and
 * the -ENOTSUP / -EINVAL contract. Exit 77 without a GPU. */
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

static void s_gpu_dequant(uint32_t type, const uint8_t *raw, uint64_t n_cols, uint64_t n_rows,
			  uint64_t rb, float *out)
{
	void *dw = ct_upload(raw, rb * n_rows);
	float *dy = ct_dev(n_cols * n_rows * 4);

	CT_CHECK(ns_cuda_dequant(type, dw, n_cols, n_rows, dy, NULL));
	CT_CHECK(ns_cuda_sync());
	ct_download(out, dy, n_cols * n_rows * 4);
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
			s_gpu_dequant(t->type, raw, t->ne[0], t->n_rows, t->row_bytes, out);
			snprintf(what, sizeof(what), "%s/%s", ct_type_names[ti], t->name);
			s_cmp(what, out, ref, t->n_elems);
			if (t->n_rows > 1) { /* a window from row 1: its own (less aligned) start */
				s_gpu_dequant(t->type, raw + t->row_bytes, t->ne[0], t->n_rows - 1,
					      t->row_bytes, out);
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
		s_gpu_dequant(ct_types[ti], raw, nc, nr, rb, gpu);
		s_cmp(ct_type_names[ti], gpu, cpu, nc * nr);
		free(raw);
		free(cpu);
		free(gpu);
	}
	/* contract */
	float *dy = ct_dev(4096);
	void *dw = ct_dev(4096);
	if (ns_cuda_dequant(NS_TYPE_IQ2_XXS, dw, 256, 1, dy, NULL) != -ENOTSUP ||
	    ns_cuda_dequant(NS_TYPE_Q4_0, dw, 48, 1, dy, NULL) != -EINVAL ||
	    ns_cuda_dequant(NS_TYPE_Q4_K, (uint8_t *)dw + 8, 256, 1, dy, NULL) != -EINVAL ||
	    ns_cuda_dequant(NS_TYPE_Q4_0, dw, 32, 0, dy, NULL) != 0)
		CT_FAIL("contract");
	ns_cuda_free(dy);
	ns_cuda_free(dw);
	printf("%d oracle tensors bit-exact (whole and from row 1), 14 random types bit-exact\n",
	       n_tensors);
	return 0;
}
