/* ctl_msg.h - control messages between nsctl and nscompute (one ZeroMQ PAIR socket over
 * ipc://RUNDIR/compute.sock: nsctl binds, nscompute connects).
 *
 * Wire format: one frame, little-endian, in zmsg.h's 12-byte envelope
 *   u32 magic "NSZM" | u16 version | u16 type (NS_ZMSG_CTL_*) | u32 payload bytes
 * then the payload of that type (fields in the order of the structs below, integers and
 * floats in 4 or 8 bytes, arrays of int32 at the end). Decoders check the envelope, the exact
 * length, counts against the caller's limits and every token id against n_vocab, and return
 * -EPROTO on anything malformed (the receiver counts and drops it), never reading past len.
 *
 * Conversation:
 *   compute -> ctl   HELLO  once connected and the model is loaded
 *   ctl -> compute   EVAL   tokens to append (after a reset, or after cutting the sequence to
 *                           its first `keep` positions, if asked), then generate up to
 *                           n_predict tokens (0: only fill the cache; with LOGITS_ALL the
 *                           logits of every evaluated position come back as LOGITS)
 *   compute -> ctl   TOKEN  per generated token, as soon as it is sampled
 *                    LOGITS per position (LOGITS_ALL only)
 *                    PROGRESS  during the prompt's evaluation (n_tokens >= 2), at most
 *                           ten a second: the layer the pass is in (the whole prompt goes
 *                           through each layer together, so work done is layers, not tokens)
 *                    SPEC   (EVAL with DRAFT and n_predict > 0) drafted and accepted
 *                           tokens, passes
 *                    DONE   end of this EVAL, with timings;  ERROR instead on failure
 *   ctl -> compute   IMAGES (optional, just before an EVAL that starts the sequence over) the
 *                           image files of that EVAL's prompt, in order: each maximal run of
 *                           image_id in its tokens stands for the next image (nscompute
 *                           --mmproj runs the tower over it; no reply of its own: a bad image
 *                           is the EVAL's ERROR)
 *   ctl -> compute   STOP   (during a generation) stop after the current token: DONE
 *   ctl -> compute   QUIT   exit 0
 *
 * Several sequences (nscompute --parallel N: N KV-cache slots; nsctl serve):
 *   ctl -> compute   STEP   per sequence: its slot, the cached positions it keeps, tokens to
 *                           append; evaluated together, every weight read once
 *   compute -> ctl   LOGITS per sequence that asked, pos = its index in the STEP
 *                    DONE   (n_prompt = tokens evaluated, prefill_ns = the step's time, the
 *                           nsio counters in req_prefill / dev_prefill);  ERROR instead */
#ifndef NS_PROTO_CTL_MSG_H
#define NS_PROTO_CTL_MSG_H

#include <stddef.h>
#include <stdint.h>

#include "zmsg.h"

#define NS_CMSG_HDR NS_ZMSG_HDR_BYTES
#define NS_CMSG_MAX_TOKENS (1u << 20)
#define NS_CMSG_MAX_STOP 64
#define NS_CMSG_MAX_VOCAB (1u << 22)
#define NS_CMSG_ERR_LEN 512
#define NS_CMSG_MAX_SEQ 64 /* sequences (KV-cache slots) nscompute keeps: --parallel */

enum ns_cmsg_type {
	NS_CMSG_HELLO = NS_ZMSG_CTL_HELLO,
	NS_CMSG_EVAL = NS_ZMSG_CTL_EVAL,
	NS_CMSG_TOKEN = NS_ZMSG_CTL_TOKEN,
	NS_CMSG_LOGITS = NS_ZMSG_CTL_LOGITS,
	NS_CMSG_DONE = NS_ZMSG_CTL_DONE,
	NS_CMSG_ERROR = NS_ZMSG_CTL_ERROR,
	NS_CMSG_QUIT = NS_ZMSG_CTL_QUIT,
	NS_CMSG_STOP = NS_ZMSG_CTL_STOP,
	NS_CMSG_STEP = NS_ZMSG_CTL_STEP,
	NS_CMSG_SPEC = NS_ZMSG_CTL_SPEC,
	NS_CMSG_PROGRESS = NS_ZMSG_CTL_PROGRESS,
	NS_CMSG_IMAGES = NS_ZMSG_CTL_IMAGES,
};

#define NS_CMSG_MAX_IMAGES 64
#define NS_CMSG_MAX_PATH 4095

enum ns_eval_flags {
	NS_EVAL_RESET = 1u << 0,      /* forget the sequence first */
	NS_EVAL_LOGITS_ALL = 1u << 1, /* send the logits of every evaluated prompt position */
	NS_EVAL_FORCED = 1u << 2,     /* teacher forcing: the last n_predict of the tokens are
				       * not prompt but the continuation, evaluated one at a time
				       * as decode steps (no sampling; each is reported as TOKEN,
				       * and its logits as LOGITS with LOGITS_ALL); needs
				       * 1 <= n_predict < n_tokens */
	NS_EVAL_KEEP = 1u << 4,       /* keep only the first `keep` positions of the sequence
				       * (keep <= its length; a cached prefix shared with the
				       * new tokens), then append: RESET is KEEP 0 */
	NS_EVAL_DRAFT = 1u << 5,      /* speculative generation: the message ends with a draft
				       * block (struct ns_cmsg_draft); SPEC comes before DONE.
				       * Not with LOGITS_ALL or FORCED */
};

/* How nscompute drafts tokens that one pass over the weights then verifies (compute_spec.c). */
enum ns_draft_kind {
	NS_DRAFT_NGRAM = 1,   /* prompt lookup: the continuation of the context's latest match */
	NS_DRAFT_ORACLE = 2,  /* test and benchmark only: generated token i is proposed as
			       * oracle[i] (a sequence the caller made, e.g. a perturbed greedy
			       * pass), so acceptance is controlled */
	NS_DRAFT_MODEL = 3,   /* the draft model nscompute was started with (--draft-model PATH,
			       * resident in its RAM): greedy proposals from its own KV cache;
			       * an ERROR when it was started without one */
	NS_DRAFT_MTP = 4,     /* the model's MTP block (nscompute --draft-mtp, Qwen3.5): greedy
			       * drafts chained from the pass's last hidden state; an ERROR when
			       * it was started without it */
};

#define NS_CMSG_MAX_DRAFT 64  /* draft tokens per pass at most (--draft-max) */

enum ns_done_reason {
	NS_DONE_PROMPT = 0,   /* n_predict was 0 */
	NS_DONE_LENGTH = 1,   /* n_predict tokens generated */
	NS_DONE_STOP = 2,     /* a stop token was generated (it is the last TOKEN) */
	NS_DONE_CONTEXT = 3,  /* the context is full */
	NS_DONE_STOPPED = 4,  /* nsctl sent STOP */
};

struct ns_cmsg_hello {
	uint32_t n_vocab, n_ctx;
	int32_t pid;
};

struct ns_cmsg_sampling {
	float temperature;      /* <= 0: greedy */
	int32_t top_k;
	float top_p, min_p, repeat_penalty;
	int32_t repeat_last_n;  /* >= 0 */
	uint64_t seed;
};

/* The draft block of an EVAL with NS_EVAL_DRAFT: u32 kind, max, min, n_oracle, then n_oracle
 * token ids (NS_DRAFT_ORACLE only; 0 otherwise). 1 <= min <= max <= NS_CMSG_MAX_DRAFT. */
struct ns_cmsg_draft {
	uint32_t kind;          /* enum ns_draft_kind */
	uint32_t max, min;      /* tokens drafted per pass: at most max; fewer than min: none */
	uint32_t n_oracle;
	const int32_t *oracle;  /* (n_oracle) */
};

/* tokens and stop point into the decoded buffer (decode) or the caller's arrays (encode). */
struct ns_cmsg_eval {
	uint32_t flags;         /* enum ns_eval_flags */
	uint32_t n_predict;
	uint32_t keep;          /* NS_EVAL_KEEP: positions kept (else 0) */
	struct ns_cmsg_sampling sampling;
	uint32_t n_tokens;      /* 1..NS_CMSG_MAX_TOKENS */
	uint32_t n_stop;        /* <= NS_CMSG_MAX_STOP */
	const int32_t *tokens;
	const int32_t *stop;
	struct ns_cmsg_draft draft; /* NS_EVAL_DRAFT only (else zero) */
};

struct ns_cmsg_token {
	int32_t id;
	uint32_t n_past;
};

struct ns_cmsg_logits {
	uint32_t pos, n_vocab;
	const float *logits; /* (n_vocab); inside the message buffer (may be unaligned: copy) */
};

struct ns_cmsg_done {
	uint32_t reason;      /* enum ns_done_reason */
	uint32_t n_prompt, n_gen, n_past;
	uint64_t prefill_ns, decode_ns;
	uint32_t n_decode;    /* single-token evaluations (decode steps) in decode_ns */
	uint64_t wait_ns;     /* of prefill + decode, waiting for weight blocks */
	uint64_t blocks, block_bytes;
	/* nsio's counters over the phases (bytes requested; read from the device) */
	uint64_t req_prefill, req_decode, dev_prefill, dev_decode;
	/* the prompt's images (IMAGES): their tokens, and the vision tower's time (decoding,
	 * preprocessing and the tower; in prefill_ns too) */
	uint32_t n_image_tokens;
	uint64_t tower_ns;
	uint64_t tower_req;   /* of req_prefill, the bytes the tower's matrices, grid and held
			       * tensors requested (streamed through nsio as the model's) */
};

/* IMAGES: image files (paths nscompute can open: absolute) of the next EVAL's prompt.
 * 1 <= n_images <= NS_CMSG_MAX_IMAGES, each path 1..NS_CMSG_MAX_PATH bytes without NUL;
 * image_id < n_vocab; max_tokens: the tokens an image may become (0: no cap). Wire: u32
 * image_id, max_tokens, n_images, u64 min_pixels, max_pixels, then per image u32 length and
 * the bytes. */
struct ns_cmsg_images {
	uint32_t image_id, max_tokens, n_images;
	uint64_t min_pixels, max_pixels; /* the processor's resize bounds (0: its defaults) */
	const char *path[NS_CMSG_MAX_IMAGES]; /* decode: NUL-terminated copies in the caller's
					       * buffer */
};

/* STEP: seq[i]'s tokens are tokens[sum of n_tokens before i ..], in order. */
struct ns_cmsg_step_seq {
	uint32_t slot;         /* < the slots nscompute keeps; each slot at most once */
	uint32_t keep;         /* cached positions of the slot kept (<= what it holds) */
	uint32_t n_tokens;     /* >= 1 */
	uint32_t want_logits;  /* 1: LOGITS after the last token; 0: none */
};

struct ns_cmsg_step {
	uint32_t n_seq;        /* 1..NS_CMSG_MAX_SEQ */
	struct ns_cmsg_step_seq seq[NS_CMSG_MAX_SEQ];
	const int32_t *tokens; /* (sum of n_tokens <= NS_CMSG_MAX_TOKENS) */
};

/* SPEC: what speculative generation did in an EVAL (sent before its DONE). The DONE's n_decode
 * and decode_ns then count every decode pass, one-token and drafted chunks alike. */
struct ns_cmsg_spec {
	uint32_t drafted;      /* draft tokens evaluated */
	uint32_t accepted;     /* of them, accepted */
	uint32_t draft_passes; /* decode passes that carried drafts (the rest were one-token) */
	uint32_t k_last;       /* the adaptive draft length at the end */
	uint64_t one_ns, chunk_ns; /* measured time of the one-token and the drafted passes */
};

/* PROGRESS: the prompt's pass has finished layers_done of n_layers (1..NS_CMSG_MAX_LAYERS)
 * over n_tokens prompt tokens; elapsed_ns since the prompt's evaluation began. */
#define NS_CMSG_MAX_LAYERS 4096
struct ns_cmsg_progress {
	uint32_t n_tokens, layers_done, n_layers;
	uint64_t elapsed_ns;
};

struct ns_cmsg_error {
	int32_t code;         /* negative errno */
	char text[NS_CMSG_ERR_LEN];
};

/* Type of a control message after the envelope check, or -EPROTO (also for any other zmsg). */
int ns_cmsg_type(const void *buf, size_t len);

/* Encoders: bytes written into buf (cap), or -ENOSPC / -EINVAL (counts over the limits).
 * ns_cmsg_size_* give the exact size to allocate. */
size_t ns_cmsg_size_eval(uint32_t n_tokens, uint32_t n_stop);
/* The size of m's encoding, its draft block included. */
size_t ns_cmsg_size_eval_msg(const struct ns_cmsg_eval *m);
size_t ns_cmsg_size_logits(uint32_t n_vocab);
int ns_cmsg_enc_hello(const struct ns_cmsg_hello *m, void *buf, size_t cap);
int ns_cmsg_enc_eval(const struct ns_cmsg_eval *m, void *buf, size_t cap);
int ns_cmsg_enc_token(const struct ns_cmsg_token *m, void *buf, size_t cap);
int ns_cmsg_enc_logits(const struct ns_cmsg_logits *m, void *buf, size_t cap);
int ns_cmsg_enc_done(const struct ns_cmsg_done *m, void *buf, size_t cap);
int ns_cmsg_enc_error(const struct ns_cmsg_error *m, void *buf, size_t cap);
int ns_cmsg_enc_quit(void *buf, size_t cap);
int ns_cmsg_enc_stop(void *buf, size_t cap);
int ns_cmsg_enc_spec(const struct ns_cmsg_spec *m, void *buf, size_t cap);
int ns_cmsg_enc_progress(const struct ns_cmsg_progress *m, void *buf, size_t cap);
/* IMAGES: ns_cmsg_size_images(m) bytes (0 when over the limits). */
size_t ns_cmsg_size_images(const struct ns_cmsg_images *m);
int ns_cmsg_enc_images(const struct ns_cmsg_images *m, void *buf, size_t cap);
/* STEP: ns_cmsg_size_step(n_seq, total tokens) bytes; -EINVAL for counts over the limits. */
size_t ns_cmsg_size_step(uint32_t n_seq, uint64_t n_tokens);
int ns_cmsg_enc_step(const struct ns_cmsg_step *m, void *buf, size_t cap);

/* Decoders: 0 or -EPROTO. n_vocab bounds every token id (ids must be < n_vocab). The eval's
 * token and stop arrays are copied into caller storage of n_tokens_cap / NS_CMSG_MAX_STOP
 * entries (tokens_out, stop_out); more tokens than n_tokens_cap is -EPROTO. A draft block's
 * oracle ids follow the tokens in tokens_out (n_tokens + n_oracle <= n_tokens_cap). */
int ns_cmsg_dec_hello(const void *buf, size_t len, struct ns_cmsg_hello *m);
int ns_cmsg_dec_eval(const void *buf, size_t len, uint32_t n_vocab, int32_t *tokens_out,
		     uint32_t n_tokens_cap, int32_t *stop_out, struct ns_cmsg_eval *m);
int ns_cmsg_dec_token(const void *buf, size_t len, uint32_t n_vocab, struct ns_cmsg_token *m);
/* logits into out (n_vocab floats); the message must carry exactly n_vocab of them. */
int ns_cmsg_dec_logits(const void *buf, size_t len, uint32_t n_vocab, uint32_t *pos,
		       float *out);
int ns_cmsg_dec_done(const void *buf, size_t len, struct ns_cmsg_done *m);
/* STEP: slots below n_slots and distinct, token ids below n_vocab, at most tokens_cap tokens
 * (copied into tokens_out). */
int ns_cmsg_dec_step(const void *buf, size_t len, uint32_t n_vocab, uint32_t n_slots,
		     int32_t *tokens_out, uint32_t tokens_cap, struct ns_cmsg_step *m);
int ns_cmsg_dec_error(const void *buf, size_t len, struct ns_cmsg_error *m);
int ns_cmsg_dec_spec(const void *buf, size_t len, struct ns_cmsg_spec *m);
/* PROGRESS: 1 <= n_layers <= NS_CMSG_MAX_LAYERS, layers_done <= n_layers, n_tokens
 * <= NS_CMSG_MAX_TOKENS. */
int ns_cmsg_dec_progress(const void *buf, size_t len, struct ns_cmsg_progress *m);
/* IMAGES: the paths are copied NUL-terminated into strbuf (cap bytes: len is enough). */
int ns_cmsg_dec_images(const void *buf, size_t len, uint32_t n_vocab, char *strbuf, size_t cap,
		       struct ns_cmsg_images *m);

#endif
