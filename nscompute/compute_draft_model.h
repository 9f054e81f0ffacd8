/* compute_draft_model.h - the model drafter of speculative generation (--draft MODEL): a small
 * model with the target's vocabulary, wholly resident in nscompute's RAM (its tensors read once
 * into memory, weights_fused.h) with its own forward pass and KV cache, proposing k tokens
 * greedily from its own state.
 *
 * It keeps its state in step with the target's sequence: `seq` is what it knows of the
 * target's tokens (the accepted ones, the pending one last), `kv` the tokens its own KV cache
 * holds (the sequence so far plus its last proposals). Before each proposal its cache is cut
 * back to the prefix both share (ns_fwd_truncate: the rejected proposals go) and the rest of
 * the sequence is evaluated. A wrong cache costs acceptance, never output: every draft is
 * verified by the target (compute_spec.c). */
#ifndef NS_COMPUTE_DRAFT_MODEL_H
#define NS_COMPUTE_DRAFT_MODEL_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

struct nsc_dmodel;

/* Opens the GGUF at path, reads all its tensors into RAM, builds its pass with a KV cache of
 * n_ctx positions (threads kernel threads, act_q8 as nscompute's --act). Its vocabulary must
 * have n_vocab entries. 0, or a negative errno with one line in err (-EINVAL: a model we
 * cannot run or another vocabulary size, -ENOMEM). beat(beat_user), when not NULL, as the
 * tensors are read: the process's heartbeat through a long read (weights_fused.h). */
int nsc_dmodel_open(const char *path, uint32_t n_ctx, int threads, bool act_q8,
		    void (*beat)(void *user), void *beat_user,
		    uint32_t n_vocab, struct nsc_dmodel **out, char *err, size_t errlen);
void nsc_dmodel_free(struct nsc_dmodel **d);

/* A request of the target: its sequence is `keep` positions it held before, then tokens (n).
 * The drafter's own record of those keep positions is used when it has one (it was given
 * every request and emitted token since the sequence started: compute_eval.c does); otherwise
 * its record starts at tokens (a context lost, acceptance may suffer). */
void nsc_dmodel_begin(struct nsc_dmodel *d, uint32_t keep, const int32_t *tokens, uint32_t n);

/* The target emitted id (accepted draft, or its own token): it follows the sequence. */
void nsc_dmodel_accept(struct nsc_dmodel *d, int32_t id);

/* Up to k greedy proposals for the tokens after the sequence into out. Returns how many
 * (0: none, e.g. no room in its context), or a negative errno with its pass's error in err. */
int nsc_dmodel_propose(struct nsc_dmodel *d, uint32_t k, int32_t *out, char *err,
		       size_t errlen);

#endif
