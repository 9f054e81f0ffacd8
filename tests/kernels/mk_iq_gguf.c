/* mk_iq_gguf OUT: writes a small GGUF holding tensors of types neurostream cannot compute
 * (IQ2_XXS, TQ1_0, NVFP4) and one Q8_0 tensor, for the `nsctl tensor` refusal test. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "ggml_type.h"
#include "gguf_write.h"

int main(int argc, char **argv)
{
	static uint8_t zero[4096];
	static const struct {
		const char *name;
		uint32_t type;
		uint64_t n;
	} t[] = { { "iq2", NS_TYPE_IQ2_XXS, 256 }, { "tq1", NS_TYPE_TQ1_0, 256 },
		  { "nvfp4", NS_TYPE_NVFP4, 64 }, { "q8", NS_TYPE_Q8_0, 64 } };
	struct ns_gguf_writer *w;
	char err[512];

	if (argc != 2) {
		fprintf(stderr, "usage: mk_iq_gguf OUT\n");
		return 2;
	}
	w = ns_gguf_writer_new(32);
	if (!w || ns_gguf_writer_set_str(w, "general.architecture", "oracle"))
		return 1;
	for (size_t i = 0; i < sizeof(t) / sizeof(t[0]); i++) {
		uint64_t ne[2] = { t[i].n, 2 }, rb;

		if (ns_type_row_bytes(t[i].type, t[i].n, &rb) ||
		    ns_gguf_writer_add_tensor(w, t[i].name, t[i].type, 2, ne, zero, (size_t)(2 * rb))) {
			fprintf(stderr, "mk_iq_gguf: cannot add %s\n", t[i].name);
			return 1;
		}
	}
	if (ns_gguf_writer_write_file(w, argv[1], err, sizeof(err))) {
		fprintf(stderr, "mk_iq_gguf: %s\n", err);
		return 1;
	}
	ns_gguf_writer_destroy(&w);
	return 0;
}
