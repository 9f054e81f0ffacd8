/* compute_eval.h - the nscompute process state and its handling of control messages. */
#ifndef NS_COMPUTE_EVAL_H
#define NS_COMPUTE_EVAL_H

#include <signal.h>
#include <stdbool.h>
#include <stdint.h>

struct ns_model;
struct ns_client;
struct ns_weights;
struct ns_fwd;
struct nsc_dmodel;
struct nsc_tower;
struct nsc_images;

/* One process, one struct: owns everything below (nsc_proc_free). */
struct nsc_proc {
	const char *session, *model_path, *endpoint; /* argv strings or endpoint_buf */
	char endpoint_buf[4200];
	int threads;               /* 0: online CPUs */
	uint64_t block_rows;       /* 0: whole windows, shrunk to fit the arena */
	uint32_t lookahead;
	bool lookahead_given;
	uint32_t n_ctx;
	uint32_t n_seq;            /* --parallel: KV-cache slots for STEP (0: 1) */
	bool cuda;                 /* --backend cuda (nscompute-cuda only) */
	bool act_q8;               /* --act q8: int8 activations in the CPU kernels (gemv.h) */
	int kv_k, kv_v;            /* --cache-type-k/-v: enum ns_kv_type (kvcache.h), 0 = f32 */
	uint64_t vram_budget;      /* --vram-budget: the device arena; 0 = exactly what is needed */
	const void *arena_pinned;  /* cuda: the arena mapping, page-locked; NULL when not */
	const void *ram_pinned;    /* cuda: nsio's RAM tier mapping, page-locked; NULL when not */
	struct ns_model *m;
	struct ns_client *c;
	struct ns_weights *w;
	struct ns_fwd *f;
	const char *draft_path;    /* --draft-model: the drafter of NS_DRAFT_MODEL (cpu only) */
	struct nsc_dmodel *dm;     /* its resident model (compute_draft_model.h), or NULL */
	bool draft_mtp;            /* --draft-mtp: the model's MTP block opened beside the pass
				    * (ns_fwd_mtp_open), the drafter of NS_DRAFT_MTP */
	const char *mmproj_path;   /* --mmproj: the vision tower (compute_image.h, cpu only) */
	uint64_t img_max_tokens, img_min_pixels, img_max_pixels; /* --max-patches, --min-pixels,
				    * --max-pixels: the largest image (0s: the processor's) */
	uint64_t tower_vram;       /* cuda: the tower's arena, out of --vram-budget (cuda_attach.c)
				    * and its cap */
	struct nsc_tower *tower;   /* its resident tower, or NULL */
	struct nsc_images *img;    /* IMAGES for the next EVAL, or NULL */
	void *zctx, *sock;
	void *route_sock;           /* PUB of router decisions (route_pub.c), or NULL */
	uint64_t route_sent, route_dropped;
	bool moe_predict;           /* --moe-predict on */
	/* the last predicted routing (route_pub.c), scored against the real one of its layer */
	uint32_t pred_layer, pred_pos0, pred_n;
	bool pred_valid;
	uint8_t pred[256];          /* (NS_ZMSG_MAX_EXPERTS) 1: the prediction named it */
	volatile sig_atomic_t *stop; /* set by signals: abandon the generation */
	uint64_t rejected;         /* malformed messages dropped */
	bool quit;                 /* QUIT arrived during a generation */
	int32_t *tokens;           /* (NS_CMSG_MAX_TOKENS) decode buffer */
	float *logits;             /* (n_tok or 1, n_vocab), page-aligned */
	uint64_t logits_cap;       /* floats */
	const void *logits_pinned; /* cuda: p->logits, page-locked; NULL when not */
	/* the prompt's pass, reported as PROGRESS (nsc_on_window): layers are "blk.N." */
	uint32_t n_layers;         /* 0: no layers named so, no reports */
	bool pf_on;                /* a prompt of >= 2 tokens is being evaluated */
	uint32_t pf_tokens, pf_done;
	uint64_t pf_t0, pf_last;
};

int nsc_send_hello(struct nsc_proc *p);

/* What compute_eval.c's generation loop and compute_spec.c's share. */
struct ns_cmsg_eval;
struct ns_cmsg_done;
struct ns_sampler;
/* Send n bytes of buf (an encoder's result: negative is returned as is); 0 or -EPIPE. */
int nsc_send(struct nsc_proc *p, const void *buf, int n);

/* The weights provider's window hook (ns_weights_stream_opts.on_window, ctx p): during a
 * prompt's evaluation, a PROGRESS when the pass entered a later layer, at most ten a second.
 * nsc_layers: the model's layer count from its tensor names ("blk.N."), for p->n_layers. */
void nsc_on_window(void *ctx, uint32_t tensor);
uint32_t nsc_layers(const struct ns_model *m);
/* ERROR with code and text; 0 or -EPIPE. */
int nsc_send_error(struct nsc_proc *p, int code, const char *text);
/* Room for rows of logits in p->logits (contents not kept); 0 or -ENOMEM. */
int nsc_logits_room(struct nsc_proc *p, uint64_t rows);
/* STOP or QUIT waiting: 1, none: 0, -EPROTO (out of step), -EPIPE (receive failed). */
int nsc_poll_stop(struct nsc_proc *p);
/* After nsc_poll_stop failed with err: ERROR for -EPROTO (0 or -EPIPE), else err. */
int nsc_stream_broken(struct nsc_proc *p, int err);
bool nsc_is_stop(const struct ns_cmsg_eval *e, int32_t id);

/* compute_spec.c: the generation of an EVAL with NS_EVAL_DRAFT after its prompt, whose last
 * logits are `last`: drafted tokens verified in one pass each, then SPEC. Fills d's n_gen,
 * reason, n_decode, decode_ns and n_past. Returns 0 (the caller sends DONE), 0 with *failed
 * (ERROR sent) or -EPIPE. */
int nsc_spec_generate(struct nsc_proc *p, const struct ns_cmsg_eval *e, struct ns_sampler *smp,
		      const float *last, struct ns_cmsg_done *d, bool *failed);
/* Handle one received message. Returns 0 to go on, 1 on QUIT, negative errno to exit (the
 * control socket failed). Evaluation failures are reported to nsctl as ERROR, not returned. */
int nsc_handle(struct nsc_proc *p, const void *buf, size_t len);
void nsc_proc_free(struct nsc_proc *p);

/* route_pub.c: PUB socket for router decisions (on p->zctx), the forward's on_route. */
struct ns_fwd_route;
int nsc_route_open(struct nsc_proc *p);
void nsc_route_close(struct nsc_proc *p);
int nsc_route_cb(void *user, const struct ns_fwd_route *r);

/* cuda_attach.c (nscompute-cuda only): p->f = the CUDA forward pass over p->w, with the VRAM
 * windows of the published plan when p->vram_budget is set. */
int nsc_cuda_attach(struct nsc_proc *p, char *err, size_t errlen);
/* Frees the CUDA pass and unlocks the arena (before the client unmaps it). */
void nsc_cuda_detach(struct nsc_proc *p);
/* Page-locks p->logits (when it is small enough: the decode steps' buffer, not a prompt's
 * worth of logits) so the device copies a step's logits by DMA; unpin before it is freed.
 * A failure only leaves it pageable (said once on stderr). */
void nsc_cuda_logits_pin(struct nsc_proc *p);
void nsc_cuda_logits_unpin(struct nsc_proc *p);
/* The stream provider's on_ram_map (weights_stream.h), ctx = p: page-locks nsio's RAM tier
 * mapping when the provider starts using it, unlocks it before it is unmapped. */
void nsc_cuda_ram_map(void *ctx, const void *base, size_t bytes, bool mapped);

#endif
