/* arch_bind.c - a model bound to its architecture's entry: the check of every read, the
 * steps of one token, the roles of its tensors (arch.h). */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "arch_internal.h"
#include "ggml_type.h"
#include "ns_util.h"
#include "summary.h"

void ns_arch_model_free(struct ns_arch_model **pam)
{
	struct ns_arch_model *am;

	if (!pam || !*pam)
		return;
	am = *pam;
	free(am->layer);
	free(am->tensor);
	free(am->steps);
	free(am);
	*pam = NULL;
}

/* Does t have the shape of dims at these dimension values? Every dimension is compared (past
 * the rule's, 1). On a mismatch: "forward: NAME has shape [all of the tensor's dimensions],
 * expected [the rule's]", -EINVAL. */
static int s_shape(const struct ns_model_tensor *t, const uint8_t *dims, const uint64_t *val,
		   char *err, size_t errlen)
{
	char got[160], exp[160];
	uint32_t nd = t->n_dims ? t->n_dims : 1, n_want = 0;
	size_t gl = 0, el = 0;
	bool same = true;

	while (n_want < NS_GGUF_MAX_DIMS && dims[n_want] != NS_DIM_END)
		n_want++;
	for (uint32_t i = 0; i < NS_GGUF_MAX_DIMS; i++)
		if (t->ne[i] != (i < n_want ? val[dims[i]] : 1))
			same = false;
	if (same)
		return 0;
	if (nd > NS_GGUF_MAX_DIMS)
		nd = NS_GGUF_MAX_DIMS;
	got[0] = exp[0] = '\0';
	for (uint32_t i = 0; i < nd && gl < sizeof(got); i++)
		gl += (size_t)snprintf(got + gl, sizeof(got) - gl, "%s%llu", i ? ", " : "",
				       (unsigned long long)t->ne[i]);
	for (uint32_t i = 0; i < n_want && el < sizeof(exp); i++)
		el += (size_t)snprintf(exp + el, sizeof(exp) - el, "%s%llu", i ? ", " : "",
				       (unsigned long long)val[dims[i]]);
	ns_errf(err, errlen, "forward: %s has shape [%s], expected [%s]", t->name, got, exp);
	return -EINVAL;
}

/* The tensor name of a slot at a layer (-1: global). */
static const char *s_name(char *buf, size_t len, unsigned slot, int32_t layer)
{
	const struct ns_slot_info *si = ns_slot_info(slot);

	if (layer < 0)
		snprintf(buf, len, "%s", si->name);
	else
		snprintf(buf, len, "blk.%d.%s", layer, si->name);
	return buf;
}

static void s_step(struct ns_arch_model *am, uint32_t tensor, int32_t layer, unsigned slot,
		   unsigned role)
{
	am->steps[am->n_steps++] = (struct ns_arch_step){ .tensor = tensor, .layer = layer,
							  .slot = (uint8_t)slot,
							  .role = (uint8_t)role };
}

/* Resolve read r at a layer (-1: global): present, shape, type; a step for it. */
static int s_read(struct ns_arch_model *am, const struct ns_arch_read *r, int32_t layer,
		  char *err, size_t errlen)
{
	const uint64_t *val = layer < 0 ? am->dim : am->layer[layer].dim;
	int64_t *slot = &am->tensor[(uint64_t)(layer < 0 ? am->n_layer : (uint32_t)layer) *
				    NS_SLOT_COUNT + r->slot];
	char name[128], tb[32];
	int64_t i = ns_model_find_index(am->m, s_name(name, sizeof(name), r->slot, layer));
	const struct ns_model_tensor *t;

	if (i < 0 && r->need == NS_NEED_OR_EMBD) { /* tied: the embedding is the head */
		i = ns_arch_tensor(am, -1, NS_T_TOKEN_EMBD);
		if (i < 0)
			return 0; /* token_embd itself is missing: its own read said so */
	} else if (i < 0) {
		if (r->need == NS_NEED_OPTIONAL)
			return 0;
		ns_errf(err, errlen, "forward: tensor %s is missing", name);
		return -EINVAL;
	}
	t = &am->m->tensors[i];
	if (s_shape(t, r->dims, val, err, errlen))
		return -EINVAL;
	if (!ns_type_computable(t->type)) {
		ns_errf(err, errlen, "forward: %s has type %s, which we cannot compute", t->name,
			ns_type_name(t->type, tb, sizeof(tb)));
		return -EINVAL;
	}
	*slot = i;
	s_step(am, (uint32_t)i, layer, r->slot, r->role);
	return 0;
}

/* A tensor the table names where its read does not apply (a layer whose kinds, or a model
 * whose layers, do not read it): refused, so that what is placed and predicted is exactly
 * what the pass reads. */
static int s_unread(struct ns_arch_model *am, const struct ns_arch_read *r, int32_t layer,
		    char *err, size_t errlen)
{
	char name[128];

	if (ns_model_find_index(am->m, s_name(name, sizeof(name), r->slot, layer)) < 0)
		return 0;
	ns_errf(err, errlen, "forward: %s is in the file, but %s of %s (layer kinds 0x%x) "
		"does not read it", name, layer < 0 ? "a model" : "this layer", am->hp.arch,
		layer < 0 ? am->kinds : am->layer[layer].kinds);
	return -EINVAL;
}

/* Read r at a layer (-1: global, where the layers together have its `on` kinds). */
static int s_read_at(struct ns_arch_model *am, const struct ns_arch_read *r, int32_t layer,
		     char *err, size_t errlen)
{
	const bool applies = layer < 0 ? (am->kinds & r->on) == r->on :
				       ns_arch_read_applies(r, am->layer[layer].kinds);

	return applies ? s_read(am, r, layer, err, errlen) : s_unread(am, r, layer, err, errlen);
}

/* Global reads before the first per-layer one, the layers, the other global reads. */
static int s_resolve(struct ns_arch_model *am, char *err, size_t errlen)
{
	const struct ns_arch *a = am->arch;
	uint32_t first = 0;
	int rc;

	while (first < a->n_reads && !ns_slot_info(a->reads[first].slot)->per_layer)
		first++;
	for (uint32_t k = 0; k < first; k++)
		if ((rc = s_read_at(am, &a->reads[k], -1, err, errlen)))
			return rc;
	for (uint32_t l = 0; l < am->n_layer; l++)
		for (uint32_t k = first; k < a->n_reads; k++)
			if (ns_slot_info(a->reads[k].slot)->per_layer &&
			    (rc = s_read_at(am, &a->reads[k], (int32_t)l, err, errlen)))
				return rc;
	for (uint32_t k = first; k < a->n_reads; k++)
		if (!ns_slot_info(a->reads[k].slot)->per_layer &&
		    (rc = s_read_at(am, &a->reads[k], -1, err, errlen)))
			return rc;
	return 0;
}

/* One line for an architecture without a builder in `backends` (or not in the table). */
static int s_not_computed(const struct ns_hparams *hp, const struct ns_arch *a,
			  unsigned backends, char *err, size_t errlen)
{
	char list[256];

	ns_arch_computed_list(backends, list, sizeof(list));
	ns_errf(err, errlen, "forward: architecture '%s' %s (computed: %s)", hp->arch,
		!a ? "is not supported" : a->builder == NS_BUILD_NONE ?
		"is described but not computed yet" : a->backends & NS_BACKEND_CPU ?
		"is computed by the cpu backend only so far (--backend cpu)" :
		"is not computed by this backend", list);
	return -EINVAL;
}

int ns_arch_bind(const struct ns_model *m, struct ns_arch_model **out, char *err,
		 size_t errlen)
{
	struct ns_arch_model *am;
	uint64_t n_slots, n_steps;
	int rc;

	*out = NULL;
	am = calloc(1, sizeof(*am));
	if (!am) {
		ns_errf(err, errlen, "out of memory");
		return -ENOMEM;
	}
	am->m = m;
	rc = ns_hparams_load(m, &am->hp, err, errlen);
	if (rc < 0)
		goto out;
	am->arch = ns_arch_find(am->hp.arch);
	if (!am->arch) {
		rc = s_not_computed(&am->hp, NULL, NS_BACKEND_CPU | NS_BACKEND_CUDA, err, errlen);
		goto out;
	}
	/* a layer holds at least one tensor: more layers than tensors cannot bind (and a
	 * hostile block_count must not size an allocation) */
	if (am->hp.n_layer > m->n_tensors) {
		ns_errf(err, errlen, "forward: %s.block_count %u exceeds the file's %llu tensors",
			am->hp.arch, am->hp.n_layer, (unsigned long long)m->n_tensors);
		rc = -EINVAL;
		goto out;
	}
	am->n_layer = am->hp.n_layer;
	n_slots = ((uint64_t)am->n_layer + 1) * NS_SLOT_COUNT;
	n_steps = ((uint64_t)am->n_layer + 1) * am->arch->n_reads;
	am->layer = calloc(am->n_layer ? am->n_layer : 1, sizeof(*am->layer));
	am->tensor = malloc(n_slots * sizeof(*am->tensor));
	am->steps = calloc(n_steps, sizeof(*am->steps));
	if (!am->layer || !am->tensor || !am->steps) {
		ns_errf(err, errlen, "out of memory");
		rc = -ENOMEM;
		goto out;
	}
	for (uint64_t i = 0; i < n_slots; i++)
		am->tensor[i] = -1;
	/* the vocabulary is whatever the token embedding holds */
	{
		const struct ns_model_tensor *te = ns_model_find(m, "token_embd.weight");

		am->dim[NS_DIM_VOCAB] = te ? te->ne[1] : 0;
	}
	rc = am->arch->rules(am, err, errlen);
	if (rc < 0)
		goto out;
	for (uint32_t l = 0; l < am->n_layer; l++)
		am->kinds |= am->layer[l].kinds;
	rc = s_resolve(am, err, errlen);
out:
	if (rc < 0)
		ns_arch_model_free(&am);
	*out = am;
	return rc;
}

int ns_arch_bind_computed(const struct ns_model *m, unsigned backends,
			  struct ns_arch_model **out, char *err, size_t errlen)
{
	struct ns_hparams hp;
	const struct ns_arch *a;
	int rc = ns_hparams_load(m, &hp, err, errlen);

	*out = NULL;
	if (rc < 0)
		return rc;
	a = ns_arch_find(hp.arch);
	if (!a || a->builder == NS_BUILD_NONE || !(a->backends & backends))
		return s_not_computed(&hp, a, backends, err, errlen);
	return ns_arch_bind(m, out, err, errlen);
}

int ns_arch_check(const struct ns_model *m, unsigned backends, char *err, size_t errlen)
{
	struct ns_arch_model *am = NULL;
	int rc = ns_arch_bind_computed(m, backends, &am, err, errlen);

	ns_arch_model_free(&am);
	return rc;
}

int ns_arch_check_described(const struct ns_model *m, char *err, size_t errlen)
{
	struct ns_hparams hp;
	struct ns_arch_model *am = NULL;
	int rc = ns_hparams_load(m, &hp, err, errlen);

	if (rc < 0 || !ns_arch_find(hp.arch))
		return rc;
	rc = ns_arch_bind(m, &am, err, errlen);
	ns_arch_model_free(&am);
	return rc;
}

/* ---------------------------------------------------------------- roles ---------------- */

/* The shape rule for an architecture the table does not know (what nsplan assumed before
 * the table): one row held, expert stacks by name, the embedding by row. */
static enum ns_role s_role_by_shape(const struct ns_hparams *hp, const struct ns_model_tensor *t)
{
	if (!strcmp(t->name, "token_embd.weight"))
		return hp->tied_embeddings ? NS_ROLE_ROWS_MATRIX : NS_ROLE_ROWS;
	if (t->n_rows == 1 || (ns_tensor_is_expert(t->name) && strstr(t->name, ".bias")))
		return NS_ROLE_HELD;
	return ns_tensor_is_expert(t->name) ? NS_ROLE_EXPERT : NS_ROLE_MATRIX;
}

enum ns_role ns_arch_role(const struct ns_hparams *hp, const struct ns_model_tensor *t)
{
	const struct ns_arch *a = ns_arch_find(hp->arch);
	const int64_t layer = ns_tensor_layer(t->name);
	const char *suffix = t->name;
	unsigned role = NS_ROLE_UNUSED;

	if (!a)
		return s_role_by_shape(hp, t);
	if (layer >= 0) {
		if ((uint64_t)layer >= hp->n_layer)
			return NS_ROLE_UNUSED;
		suffix = strchr(t->name + 4, '.') + 1; /* past "blk.N." */
	}
	for (uint32_t k = 0; k < a->n_reads; k++) {
		const struct ns_arch_read *r = &a->reads[k];
		const struct ns_slot_info *si = ns_slot_info(r->slot);

		if (si->per_layer == (layer >= 0) && !strcmp(si->name, suffix)) {
			role = r->role;
			break;
		}
	}
	if (role == NS_ROLE_ROWS && layer < 0 && !strcmp(suffix, "token_embd.weight") &&
	    hp->tied_embeddings) {
		for (uint32_t k = 0; k < a->n_reads; k++)
			if (a->reads[k].need == NS_NEED_OR_EMBD)
				return NS_ROLE_ROWS_MATRIX;
	}
	return (enum ns_role)role;
}
