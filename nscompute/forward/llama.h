/* llama.h - the decoder state llama.c builds from a model bound to the architecture table
 * (f->am, arch.h): the tensor of every weight matrix by its slot, the small vectors (norms,
 * biases, sinks: pointers into f->held, copied at setup), RoPE and the MoE tables. Internal
 * to nscompute: the CPU forward pass (llama.c) runs it; the CUDA backend
 * (nscompute/cuda/cfwd*.c) reads the same description so both run the same model code, then
 * uploads what it needs.
 *
 * Ownership: f->arch of a forward pass set up by ns_llama_init/ns_llama_setup; freed with the
 * forward pass (ns_fwd_destroy). Read-only for everyone but llama.c. */
#ifndef NS_LLAMA_H
#define NS_LLAMA_H

#include <stdbool.h>
#include <stdint.h>

#include "forward_impl.h"
#include "rope.h"

struct ns_attn_ws;

struct ns_llama_layer {
	uint32_t wq;      /* attn_q.weight      (n_head * dk rows, n_embd cols) */
	uint32_t wk;      /* attn_k.weight      (n_head_kv * dk, n_embd) */
	uint32_t wv;      /* attn_v.weight      (n_head_kv * dv, n_embd) */
	uint32_t wo;      /* attn_output.weight (n_embd, n_head * dv) */
	uint32_t w_gate;  /* ffn_gate.weight    (n_ff, n_embd) */
	uint32_t w_up;    /* ffn_up.weight      (n_ff, n_embd) */
	uint32_t w_down;  /* ffn_down.weight    (n_embd, n_ff) */
	const float *attn_norm; /* (n_embd) */
	const float *ffn_norm;  /* (n_embd) ffn_norm, or post_attention_norm (gpt-oss) */
	const float *q_norm;    /* (dk) qwen3 only, else NULL */
	const float *k_norm;    /* (dk) qwen3 only, else NULL */
	const float *bq;        /* (n_head * dk) or NULL */
	const float *bk;        /* (n_head_kv * dk) or NULL */
	const float *bv;        /* (n_head_kv * dv) or NULL */
	const float *bo;        /* (n_embd) or NULL */
	const float *sinks;     /* (n_head) attention sink logits (gpt-oss) or NULL */
	uint32_t window;  /* sliding window in positions, 0 = full causal attention */
	bool recurrent;   /* a linear-attention layer (deltanet.h): no q/k/v, no KV cache */
	uint32_t kv_slot; /* attention layers: the layer's index in the KV cache, or in its
			   * ring (kv->swa) when in_ring */
	bool in_ring;     /* a sliding layer of a cpu pass whose sliding layers keep a ring */
};

struct ns_llama {
	uint32_t n_embd, n_layer, n_head, n_head_kv, dk, dv, n_ff, n_vocab, n_ctx;
	float eps;
	float attn_scale;
	struct ns_rope rope;
	uint32_t tok_embd;  /* token_embd.weight (n_tok_rows, n_embd) */
	uint32_t output;    /* output.weight, or token_embd.weight when tied (n_vocab, n_embd) */
	const float *output_norm; /* (n_embd) */
	const float *rope_freqs;  /* (rope.n_dims / 2) llama3 frequency divisors, or NULL */
	struct ns_llama_layer *layers; /* (n_layer) */
	struct ns_moe *moe; /* MoE FFN of every layer, or NULL for dense */
	struct ns_dnet *dnet; /* the recurrent layers' mixer and state (qwen35), or NULL */
	bool gated_attn;    /* attn_q gives per head [q | gate]; output * sigmoid(gate) */
	uint32_t n_kv_layer; /* layers with a KV cache (all but the recurrent ones) */
	uint32_t n_ring_layer; /* of which sliding ones in each sequence's ring (kvcache.h
				* swa: R = ns_kv_ring_positions(ring_window, n_batch, n_ctx)
				* positions), 0 when the cache holds every layer whole (the
				* CUDA pass, no sliding layer, or R = n_ctx) */
	uint32_t ring_window; /* the widest sliding window: what the ring serves */
	uint32_t ffn_rows;  /* neurons per phase-1 window */
	/* scratch, sized for n_batch tokens */
	int64_t *ids; /* (n_batch) token ids as embedding rows */
	float *x;     /* (n_batch, n_embd) residual stream */
	float *xb;    /* (n_batch, n_embd) normed input of a sublayer */
	float *xb2;   /* (n_batch, n_embd) sublayer output */
	float *q;     /* (n_batch, n_head * dk) */
	float *qg;    /* gated attention: (n_batch, n_head, 2, dk) attn_q's [q | gate] per head,
		       * then the gates (n_batch, n_head * dk); else NULL */
	float *k;     /* (n_batch, n_head_kv * dk) */
	float *v;     /* (n_batch, n_head_kv * dv) */
	float *ao;    /* (n_batch, n_head * dv) attention output */
	float *hb;    /* (n_batch, n_ff) FFN activation */
	float *hu;    /* (n_batch, ffn_rows) up projection of one window */
	float *cs;    /* (rope.n_dims) angles of one position */
	struct ns_attn_ws *attn_ws; /* attention scratch for the provider's threads (attn.h) */
};

/* ns_llama_init without the host KV cache and scratch when host_state is false (a backend
 * that computes elsewhere): f->arch is a struct ns_llama with every tensor index, vector,
 * RoPE setting and (MoE) the ns_moe tables; f->kv is then an empty cache that only counts
 * n_past. Other fields of f as ns_llama_init sets them. f->am must be bound (ns_fwd_alloc). */
int ns_llama_setup(struct ns_fwd *f, uint32_t ffn_rows, bool host_state, char *err,
		   size_t errlen);

#endif
