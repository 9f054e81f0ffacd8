/* arch_internal.h - what the architecture table (arch_table.c), its hyperparameter rules
 * (arch_rules.c) and the binding (arch_bind.c) share. Internal to libnsmodel. */
#ifndef NS_ARCH_INTERNAL_H
#define NS_ARCH_INTERNAL_H

#include "arch.h"

/* Hyperparameter rules, one per family (arch_rules.c). Each fills am->dim, then every layer's
 * kinds, window and dims (ns_arch_layers_from_model first, then what varies by layer). */
int ns_arch_rules_llama(struct ns_arch_model *am, char *err, size_t errlen);
int ns_arch_rules_qwen35(struct ns_arch_model *am, char *err, size_t errlen);
int ns_arch_rules_gemma(struct ns_arch_model *am, char *err, size_t errlen);

/* Every layer's dims = am->dim, kinds = kinds, window 0. */
void ns_arch_layers_from_model(struct ns_arch_model *am, uint32_t kinds);

/* Does a read apply to a layer of these kinds? */
static inline bool ns_arch_read_applies(const struct ns_arch_read *r, uint32_t kinds)
{
	return (kinds & r->on) == r->on && !(kinds & r->off);
}

#endif
