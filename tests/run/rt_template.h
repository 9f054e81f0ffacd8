/* rt_template.h - a copy of an oracle model with a chat template (the oracle's tiny models
 * carry none). Header-only; needs nsmodel (gguf.h, gguf_write.h) and run_testlib.h. */
#ifndef NS_RT_TEMPLATE_H
#define NS_RT_TEMPLATE_H

#include "gguf.h"
#include "gguf_write.h"
#include "run_testlib.h"

/* A Qwen3-style (ChatML) template: the library renders it as the qwen3 family. */
#define RT_QWEN3_TEMPLATE "{%- for m in messages %}<|im_start|>{{ m.role }}\n{{ m.content }}" \
	"<|im_end|>\n{%- endfor %}<|im_start|>assistant\n<think>\n\n</think>\n\n"

/* Copy src to dst with tokenizer.chat_template set to tpl. Exits 1 on failure. */
static inline void rt_copy_with_template(const char *src, const char *dst, const char *tpl)
{
	struct ns_gguf *g = NULL;
	struct ns_gguf_writer *w = ns_gguf_writer_new(32);
	char err[512];
	FILE *f;

	RT_CHECK(w && ns_gguf_open(src, &g, err, sizeof(err)) == 0, "open %s: %s", src, err);
	for (uint64_t i = 0; i < g->n_kv; i++)
		RT_CHECK(ns_gguf_writer_set_value(w, g->kv[i].key.s, &g->kv[i].value) == 0, "kv");
	RT_CHECK(ns_gguf_writer_set_str(w, "tokenizer.chat_template", tpl) == 0, "tpl");
	f = fopen(src, "rb");
	RT_CHECK(f, "reopen %s", src);
	for (uint64_t i = 0; i < g->n_tensors; i++) {
		const struct ns_gguf_tensor *t = &g->tensors[i];
		void *buf = malloc(t->n_bytes ? t->n_bytes : 1);

		RT_CHECK(buf && fseek(f, (long)t->file_offset, SEEK_SET) == 0 &&
			 fread(buf, 1, t->n_bytes, f) == t->n_bytes, "read %s", t->name.s);
		RT_CHECK(ns_gguf_writer_add_tensor(w, t->name.s, t->type, t->n_dims, t->ne, buf,
						   t->n_bytes) == 0, "add %s", t->name.s);
		free(buf);
	}
	fclose(f);
	RT_CHECK(ns_gguf_writer_write_file(w, dst, err, sizeof(err)) == 0, "write: %s", err);
	ns_gguf_writer_destroy(&w);
	ns_gguf_close(&g);
}

#endif
