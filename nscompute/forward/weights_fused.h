/* weights_fused.h - weight provider over resident quantized bytes and the fused kernels.
 *
 * At creation every tensor's raw bytes are read once into RAM (the model must fit); matmul
 * then runs ns_gemm_ex (gemv.h) straight on the quantized rows with float activations
 * (NS_ACT_F32: each weight dequantized exactly, summed in float with FMA), and get_rows
 * dequantizes with ns_dequant_rows. This is the provider the RAM cache tier will use; the
 * streamed provider will run the same kernels on blocks from nsio.
 *
 * Ownership as in weights.h; the provider owns its copies of the bytes and its thread pool. */
#ifndef NS_WEIGHTS_FUSED_H
#define NS_WEIGHTS_FUSED_H

#include <stddef.h>

#include "weights.h"

struct ns_weights_fused_opts {
	int n_threads; /* kernel threads including the caller; <= 0: 1 */
	int kpath;     /* enum ns_kpath; 0 = AUTO */
	int act;       /* enum ns_act: 0 = NS_ACT_F32 (exact weights), NS_ACT_Q8 (activations
			* quantized per 32 as llama.cpp, faster; bound in gemv.h) */
	void (*beat)(void *user); /* called as the load reads (ns_model_read_tensor_sliced),
				   * a heartbeat for the process's supervisor; NULL: none */
	void *beat_user;
};

/* opts may be NULL (1 thread, AUTO path). Returns 0 or a negative errno with one line in err
 * (-ENOMEM when the model does not fit in RAM, I/O errors as -errno). */
int ns_weights_fused_new(const struct ns_model *m, const struct ns_weights_fused_opts *opts,
			 struct ns_weights **out, char *err, size_t errlen);

#endif
