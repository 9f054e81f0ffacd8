/* compute_draft_model.h - the model drafter of speculative generation (--draft MODEL): a small
 * model with the target's vocabulary, wholly resident with its own forward pass and KV cache,
 * proposing k tokens greedily from its own state. On the cpu backend its tensors are read once
 * into nscompute's RAM (weights_fused.h, nsc_dmodel_open); on the cuda backend they are read
 * once, in slices, straight into VRAM and its pass is a CUDA one (nsc_dmodel_open_cuda, built
 * into nscompute-cuda only; nsplan counts it in VRAM, not in RAM).
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

struct ns_model;
struct ns_weights;
struct ns_fwd;

/* The drafter over a pass already built (another backend's: compute_draft_cuda.c), or the
 * end of a failed build: rc is the build's result so far, and with rc < 0 whatever of m, w
 * and f exists (each may be NULL) is freed and rc returned. It owns m, w and f from the call
 * on, also when it fails (they are freed then). Its pass must have n_vocab logits (-EINVAL
 * with one line otherwise), -ENOMEM. */
int nsc_dmodel_adopt(int rc, struct ns_model *m, struct ns_weights *w, struct ns_fwd *f,
		     uint32_t n_vocab, struct nsc_dmodel **out, char *err, size_t errlen);

/* The draft file opened without its vocabulary (the target's is used): 0, or -EINVAL for a
 * file missing, unreadable or malformed (bad input), -ENOMEM, with one line in err. */
int nsc_dmodel_open_model(const char *path, struct ns_model **m, char *err, size_t errlen);

/* Its pass (counters of the cuda one: ns_cfwd_stats; a test's logits). */
struct ns_fwd *nsc_dmodel_fwd(struct nsc_dmodel *d);

/* The VRAM the cuda draft pass of the GGUF at path takes with n_ctx positions: its every
 * weight matrix, its KV cache, scratch, vectors and staging, as allocated
 * (nsplan_gpu_resident_need: the figure nsctl counts). 0 or -errno with one line in err. */
int nsc_dmodel_vram_need(const char *path, uint32_t n_ctx, uint64_t *bytes, char *err,
			 size_t errlen);

/* nsc_dmodel_open on the cuda backend (nscompute-cuda only): the GGUF's weight matrices read
 * in slices (weights_ref.c's visit) into a device arena of at most vram_cap bytes (0: exactly
 * what it needs), every one whole there, with a CUDA pass (cfwd.h) and its KV cache of n_ctx
 * positions in the same arena; beat(beat_user) (may be NULL) after every slice (at most 1 MiB,
 * weights_ref.c), the process's heartbeat as nsc_dmodel_open's. No RAM copy of the
 * tensors is kept: the file stays open for the few rows the pass reads on the host. Errors as
 * nsc_dmodel_open, and the CUDA pass's (-ENOMEM with figures when vram_cap is too small). */
int nsc_dmodel_open_cuda(const char *path, uint32_t n_ctx, bool act_q8, uint32_t n_vocab,
			 uint64_t vram_cap, void (*beat)(void *user), void *beat_user,
			 struct nsc_dmodel **out, char *err, size_t errlen);

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
