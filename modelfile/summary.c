/* summary.c - see summary.h. */
#include "summary.h"

#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "arch.h"
#include "ns_util.h"

int64_t ns_tensor_layer(const char *name)
{
	int64_t v = 0;
	const char *p;

	if (strncmp(name, "blk.", 4))
		return -1;
	p = name + 4;
	if (*p < '0' || *p > '9')
		return -1;
	while (*p >= '0' && *p <= '9') {
		v = v * 10 + (*p++ - '0');
		if (v > 1000000)
			return -1;
	}
	return *p == '.' ? v : -1;
}

bool ns_tensor_is_expert(const char *name)
{
	return strstr(name, "_exps") != NULL;
}

void ns_summary_free(struct ns_summary *s)
{
	free(s->layers);
	s->layers = NULL;
}

int ns_summary_compute(const struct ns_model *m, const struct ns_hparams *hp,
		       struct ns_summary *s)
{
	uint32_t n_layers = hp->n_layer;

	memset(s, 0, sizeof(*s));
	s->max_row_tensor = -1;
	s->first_uncomputable = -1;
	for (uint64_t i = 0; i < m->n_tensors; i++) {
		int64_t l = ns_tensor_layer(m->tensors[i].name);
		if (l >= 0 && (uint64_t)l + 1 > n_layers)
			n_layers = (uint32_t)l + 1;
	}
	s->n_layers = n_layers;
	s->layers = calloc(n_layers ? n_layers : 1, sizeof(*s->layers));
	if (!s->layers)
		return -ENOMEM;
	for (uint64_t i = 0; i < m->n_tensors; i++) {
		const struct ns_model_tensor *t = &m->tensors[i];
		const enum ns_role role = ns_arch_role(hp, t);
		int64_t l = ns_tensor_layer(t->name);
		bool expert = ns_tensor_is_expert(t->name);
		uint64_t touched = role == NS_ROLE_UNUSED ? 0 : t->n_bytes;

		s->n_params += t->n_elems;
		if (t->type < NS_TYPE_COUNT) {
			s->bytes_by_type[t->type] += t->n_bytes;
			s->n_tensors_by_type[t->type]++;
		}
		if (!ns_type_computable(t->type)) {
			if (s->first_uncomputable < 0)
				s->first_uncomputable = (int64_t)i;
			s->n_uncomputable++;
		}
		if (t->row_bytes > s->max_row_bytes) {
			s->max_row_bytes = t->row_bytes;
			s->max_row_tensor = (int64_t)i;
		}
		if (expert) {
			s->expert_bytes += t->n_bytes;
			/* experts are the outermost dimension: each one is n_bytes / n_expert */
			uint64_t n_exp = t->ne[t->n_dims - 1];
			if (hp->n_expert && n_exp == hp->n_expert && hp->n_expert_used && touched)
				touched = t->n_bytes / n_exp * hp->n_expert_used;
		} else if (role == NS_ROLE_ROWS) {
			touched = t->row_bytes; /* an embedding table is read by row */
		}
		s->bytes_per_token += touched;
		if (l >= 0) {
			struct ns_layer_summary *ls = &s->layers[l];
			ls->n_tensors++;
			ls->bytes += t->n_bytes;
			ls->params += t->n_elems;
			if (expert)
				ls->expert_bytes += t->n_bytes;
		} else {
			s->nonlayer_bytes += t->n_bytes;
		}
	}
	s->min_mem_budget = s->max_row_bytes ? ns_stream_min_budget(s->max_row_bytes,
								    NS_DEFAULT_LOOKAHEAD) : 0;
	return 0;
}
