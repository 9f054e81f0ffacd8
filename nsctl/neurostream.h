/* neurostream.h - the engine as a library: load a model with memory budgets, generate with a
 * per-token callback, chat, free. `nsctl run` is built on exactly this API.
 *
 *   struct ns_engine *e;
 *   struct ns_engine_opts o;
 *   char err[256];
 *   ns_engine_opts_default(&o);
 *   o.mem_budget = 64ull << 20;                           // the streaming arena: 64 MiB
 *   if (ns_engine_load("model.gguf", &o, &e, err, sizeof(err)) < 0)
 *           fprintf(stderr, "%s\n", err);
 *   struct ns_gen_params g;
 *   ns_gen_params_default(&g);
 *   g.n_predict = 32;
 *   ns_engine_generate(e, "Once upon a time", &g, print_piece, NULL);
 *   ns_engine_free(&e);                                   // stops the processes, unlinks shm
 *
 * Behind the calls: a private session (runtime dir + shm segments), an nsio process streaming
 * the weights under the budget, an nsplan process publishing the residency plan, an nscompute
 * process running the forward pass and, for MoE models, an nsrouter process prefetching the
 * experts, all children of the caller. The caller owns the session: ns_engine_free (or a
 * failed load) stops every child and removes every segment and the runtime directory; if the
 * caller dies instead, a small keeper process forked at load stops the children and removes
 * the session within about a second. nsio, nsplan or nsrouter dying or stalling (opts.stall_ms)
 * is survived (restarted on the same session); nscompute dying fails the call in progress with
 * -EPIPE, stalling with -ETIMEDOUT.
 *
 * Children are found as $NS_NSIO / $NS_NSCOMPUTE / $NS_NSPLAN / $NS_NSROUTER (NS_NSROUTER=off:
 * none), else under $NS_BUILD_ROOT, else in $NS_LIBEXECDIR, else from where libneurostream.so
 * or the running executable is (installed: <prefix>/libexec/neurostream, as meson configured
 * it; build tree: ../nsio/nsio; else the same directory), else on PATH. A backend other than cpu is the executable nscompute-<backend> (build tree:
 * nscompute/nscompute-cuda), started with the same arguments and protocol (proto/ctl_msg.h).
 *
 * Threads: an engine is used by one thread at a time; ns_engine_cancel may be called from any
 * thread or a signal handler. */
#ifndef NEUROSTREAM_H
#define NEUROSTREAM_H

#include <signal.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

/* The library's version (meson.build's project version; meson checks they agree). The
 * shared library's soname carries the major number. */
#define NS_VERSION_MAJOR 0
#define NS_VERSION_MINOR 1
#define NS_VERSION_PATCH 0

#ifdef __cplusplus
extern "C" {
#endif

struct ns_engine;

enum ns_engine_proc {
	NS_PROC_NSIO = 0,
	NS_PROC_NSCOMPUTE = 1,
	NS_PROC_NSPLAN = 2,
	NS_PROC_NSROUTER = 3,  /* MoE models only */
	NS_PROC_COUNT = 4,
};

/* A budget the library chooses as `nsctl run` chooses one not named (what `nsctl plan`
 * prints: from MemAvailable and the cgroup limit, the model and the context); what
 * ns_engine_opts_default sets. With no_plan: the arena as for 0, no RAM cache. */
#define NS_BUDGET_AUTO UINT64_MAX

/* Progress for a progress line (ns_engine_opts.progress). NS_PROGRESS_PREFILL: called with
 * done 0 when a prompt of total >= 2 tokens is sent to nscompute, with 0 < done < total as
 * nscompute reports its pass over the layers (done: tokens' worth of the work, total x layers
 * finished / layers: the whole prompt goes through each layer together), and once with
 * done == total when the prompt's evaluation ends (the first token, the end of the call or
 * its failure). NS_PROGRESS_RAM_FILL: about ten times a second while nsio fills the RAM
 * cache (ram_budget), which ns_engine_load waits for (and, for later plan generations, a
 * prompt's evaluation): done of total bytes of the plan's RAM windows loaded (done == total
 * once, at the end). elapsed_s: since the load or the prompt began. From ns_engine_load,
 * ns_engine_generate, ns_engine_chat and ns_engine_eval, on the calling thread. */
enum ns_progress_kind {
	NS_PROGRESS_PREFILL = 0,
	NS_PROGRESS_RAM_FILL = 1,
};
typedef void (*ns_progress_fn)(enum ns_progress_kind kind, uint64_t done, uint64_t total,
			       double elapsed_s, void *user);

struct ns_engine_opts {
	uint64_t mem_budget;   /* streaming arena bytes; 0: the model's bytes + 16 MiB, at
				* most 512 MiB; NS_BUDGET_AUTO: as nsctl run */
	uint64_t ram_budget;   /* RAM cache bytes: nsplan places weights, nsio loads them;
				* 0: none; NS_BUDGET_AUTO: as nsctl run */
	uint64_t vram_budget;  /* GPU bytes (cuda backend only): weights nsplan places in VRAM
				* plus reserve_vram */
	uint64_t reserve_vram; /* part of vram_budget kept for KV, scratch, staging; 0: exactly
				* what the cuda pass needs (nsplan/gpu_need.h) */
	const char *backend;   /* "cpu" (NULL = cpu) runs nscompute; "cuda" runs
				* nscompute-cuda ($NS_NSCOMPUTE_CUDA), refused when not built */
	uint32_t n_ctx;        /* context positions; 0: 4096 */
	uint32_t n_seq;        /* sequences nscompute keeps a KV cache of n_ctx positions for
				* (ns_engine_step's slots, cpu backend); 0 or 1: one */
	uint64_t block_rows;   /* rows per streamed block; 0: whole tensors (shrunk to fit) */
	int32_t lookahead;     /* blocks in flight after the current one; < 0:
				* NS_DEFAULT_LOOKAHEAD (4), as nsctl info assumes */
	int threads;           /* compute threads; 0: online CPUs */
	bool act_q8;           /* cpu backend: quantize activations to int8 per 32 for the dot
				* products, as llama.cpp does (faster 4-bit kernels; error bound in
				* nscompute/kernels/gemv.h); default: exact float activations */
	const char *cache_type_k; /* KV cache element types (llama.cpp's -ctk / -ctv): "f32"
				   * (NULL: exact, the default), "f16" or "q8_0" (head sizes
				   * multiples of 32); an unknown name fails the load (-EINVAL) */
	const char *cache_type_v;
	bool no_plan;          /* do not start nsplan */
	int run_ahead;         /* nsio reads ahead along the per-token order of the matrices
				* (blocks cut as nscompute cuts them, each tensor after its
				* RAM-resident rows, so a later request is a hit): 1 on, 0 off,
				* < 0 (ns_engine_opts_default): on for dense models (an MoE
				* model's experts are nsrouter's; its arena is kept for them) */
	bool moe_predict;      /* MoE: publish predicted routings one layer early so their
				* experts are prefetched during attention (nscompute --moe-predict
				* on); default off, docs/decisions.md "MoE expert prediction" */
	bool verbose;          /* let the children print their informational lines */
	uint32_t stall_ms;     /* a child whose heartbeat does not move for this long is taken
				* for stopped or stuck: nsio, nsplan and nsrouter are killed and
				* restarted (said on stderr), a stalled nscompute ends the call
				* in progress with -ETIMEDOUT; 0: 10000 (10 s). Idle processes
				* beat every 100 ms, nscompute at every weight block, token and
				* wait, so only a single product running longer than this would
				* be mistaken for a hang */
	bool thinking;                /* chat templates that think only when asked: Gemma 4
				       * (<|think|> in the system turn) and Qwen3.5 (the prompt
				       * opens the think block; without it the block is closed
				       * empty, though the template's own default would think) */
	const char *reasoning_effort; /* harmony (gpt-oss) chat template: "low", "medium" or
				       * "high" on the system message's "Reasoning:" line; NULL:
				       * medium. Any other value, or a model whose chat template is
				       * not harmony, fails the load with -EINVAL */
	/* Chat template family by name (chat.h's names: "chatml", "llama2", "qwen3", ...) used
	 * instead of the one the model's tokenizer.chat_template names; an unknown name fails
	 * the load (-EINVAL). NULL: the model's. */
	const char *chat_template;
	/* Expert hit statistics file (nsplan's stats format, plan_stats.h), MoE models only:
	 * nsrouter keeps it up to date with every token's routing; nsplan plans from
	 * "<expert_stats>.plan" (written by ns_engine_warmup; created empty at start). The
	 * caller keeps the string. NULL: no statistics. */
	const char *expert_stats;
	/* Per process, a command line to run it under ("strace -f -c", "perf record -o F --"):
	 * split on spaces (no quoting), placed before the executable. NULL: none. */
	const char *wrap[NS_PROC_COUNT];
	/* Checked while waiting; when it becomes non-zero the call in progress returns
	 * -ECANCELED (e.g. a flag a SIGINT handler sets). May be NULL. */
	volatile sig_atomic_t *cancel;
	/* Speculative decoding's draft model (ns_gen_params.draft = NS_GEN_DRAFT_MODEL): a GGUF
	 * with the model's vocabulary, read wholly into nscompute's RAM at load with its own KV
	 * cache of n_ctx positions; the budgets the library picks leave room for it
	 * (NS_BUDGET_AUTO). Its pass is the cpu one on either backend (with cuda, beside the
	 * CUDA pass that verifies its drafts); a file that does not open or runs no pass, or
	 * another vocabulary size, fails the load (-EINVAL). NULL: none. */
	const char *draft_model;
	/* Images in prompts (ns_engine_set_images): the vision tower, an mmproj GGUF (Qwen3-VL /
	 * Qwen3.5, "qwen3vl_merger") whose projection_dim is the model's n_embd, for a model
	 * with M-RoPE (qwen3vl, qwen3vlmoe, qwen35, qwen35moe). Its matrices stream through
	 * nsio beside the model's (read once per image); nscompute holds only its small tensors,
	 * and the budgets the library picks count them and the images' working memory
	 * (NS_BUDGET_AUTO). The tower runs on the CPU with either backend; with "cuda" its
	 * output goes up to the GPU's pass. A file that is not a tower, or a mismatch, fails the
	 * load (-EINVAL). NULL: none (images refused). */
	const char *mmproj;
	uint32_t max_image_tokens; /* an image becomes at most this many tokens (nsctl
				    * --max-patches); 0: no cap beyond the processor's */
	uint64_t min_image_pixels, max_image_pixels; /* the processor's resize bounds (nsctl
				    * --min-pixels / --max-pixels); 0: its defaults */
	int32_t image_token;       /* the image placeholder's id; < 0 (the default): the
				    * vocabulary's "<|image_pad|>" (Qwen-VL) */
	/* Told of the RAM cache's fill and each prompt's evaluation (above). May be NULL. */
	ns_progress_fn progress;
	void *progress_user;
	/* Speculative decoding's MTP drafter (ns_gen_params.draft = NS_GEN_DRAFT_MTP): the
	 * model's multi-token-prediction block (Qwen3.5 checkpoints carry one; qwen35 and
	 * qwen35moe, either backend: it runs on the host, the cuda pass hands it its hidden rows)
	 * read into nscompute's RAM at load beside the pass; a model without one fails
	 * the load (-EINVAL). false: none. */
	bool draft_mtp;
};

void ns_engine_opts_default(struct ns_engine_opts *o);

/* Returns 0 with *out, or a negative errno with one line in err: -EINVAL for a model or
 * option we cannot use (exit code 2 material), -ENOSPC for a budget below the smallest that
 * works (the line names it), others for runtime failures. Nothing is left running or mapped
 * on failure. */
int ns_engine_load(const char *model, const struct ns_engine_opts *o, struct ns_engine **out,
		   char *err, size_t errlen);

/* Stops every child, removes the session's segments and runtime directory, frees, nulls *e.
 * Safe on NULL. */
void ns_engine_free(struct ns_engine **e);

struct ns_gen_params {
	int32_t n_predict;     /* tokens to generate at most; < 0: until the context is full */
	float temperature;     /* <= 0: greedy */
	int32_t top_k;         /* <= 0: off */
	float top_p;           /* >= 1: off */
	float min_p;           /* <= 0: off */
	float repeat_penalty;  /* 1: off */
	int32_t repeat_last_n;
	uint64_t seed;
	bool no_stop;          /* do not stop at end-of-generation tokens */
	/* Speculative decoding (a model with a recurrent state, qwen35, rolls it back past a
	 * rejected draft on either backend): the pending token and up to draft_max drafted ones are evaluated as one
	 * pass over the weights and the agreeing prefix kept; greedy output is unchanged, sampled
	 * output has the same distribution. The draft length adapts to the measured acceptance
	 * and pass costs within [draft_min, draft_max]; a drafter with fewer than draft_min
	 * proposals drafts none. */
	enum ns_gen_draft {
		NS_GEN_DRAFT_NONE = 0,
		NS_GEN_DRAFT_NGRAM = 1,  /* prompt lookup: the latest longest n-gram match in the
					  * request's tokens and the generated ones proposes what
					  * followed it */
		NS_GEN_DRAFT_ORACLE = 2, /* tests and benchmarks only: generated token i is
					  * proposed as draft_oracle[i] (acceptance controlled) */
		NS_GEN_DRAFT_MODEL = 3,  /* the engine's draft model (ns_engine_opts.draft_model):
					  * its greedy continuation; -EINVAL without one */
		NS_GEN_DRAFT_MTP = 4,    /* the model's MTP block (ns_engine_opts.draft_mtp,
					  * Qwen3.5): drafts chained from the pass's last hidden
					  * state; -EINVAL without it */
	} draft;
	uint32_t draft_max;    /* 1..64; 0: 16 */
	uint32_t draft_min;    /* 1..draft_max; 0: 1 */
	const int32_t *draft_oracle; /* NS_GEN_DRAFT_ORACLE: (n_draft_oracle) token ids */
	uint32_t n_draft_oracle;
};

/* llama.cpp's defaults: n_predict -1, temp 0.8, top_k 40, top_p 0.95, min_p 0.05,
 * repeat_penalty 1.0 over 64, seed 0; no drafter. */
void ns_gen_params_default(struct ns_gen_params *g);

/* The sampler chain as its own object, for a caller that evaluates with ns_engine_step or
 * ns_engine_logits and chooses tokens itself: the chain ns_engine_generate and nsctl serve
 * run (repetition penalty over the last repeat_last_n accepted tokens, top-k, top-p, min-p,
 * temperature, then a draw from a generator seeded with g->seed; the most likely token at
 * temperature <= 0), from g's sampling fields (n_predict and no_stop are not its business).
 * Not tied to an engine. Threads: one thread at a time per chain.
 *   new:    0, -EINVAL (n_vocab 0, negative repeat_last_n, a NaN), -ENOMEM
 *   sample: a token id for logits (n_vocab floats, not modified); it is not accepted
 *   accept: record a token in the penalty history (the prompt's and the chosen ones) */
struct ns_sampler_chain;

int ns_sampler_chain_new(const struct ns_gen_params *g, uint32_t n_vocab,
			 struct ns_sampler_chain **out);
int32_t ns_sampler_chain_sample(struct ns_sampler_chain *s, const float *logits);
void ns_sampler_chain_accept(struct ns_sampler_chain *s, int32_t token);
/* Safe on NULL; nulls *s. */
void ns_sampler_chain_free(struct ns_sampler_chain **s);

/* Called once per generated token with the text it completes (whole UTF-8 characters; may be
 * empty), in order. A non-zero return stops the generation (the call returns 0). */
typedef int (*ns_token_fn)(const char *piece, size_t len, int32_t id, void *user);

/* Tokenize prompt (adding BOS as the vocabulary asks), evaluate it from an empty context and
 * generate. Returns 0 (stopped by n_predict, end of generation, a full context or the
 * callback), -ECANCELED, -EPIPE (nscompute died), -EINVAL (prompt too long, ...) with the
 * reason in ns_engine_error. */
int ns_engine_generate(struct ns_engine *e, const char *prompt, const struct ns_gen_params *g,
		       ns_token_fn cb, void *user);

/* As ns_engine_generate, from token ids (n >= 1, no BOS added, each < n_vocab) instead of a
 * text: benchmarks generate after the same ids in every configuration. */
int ns_engine_generate_ids(struct ns_engine *e, const int32_t *ids, uint32_t n,
			   const struct ns_gen_params *g, ns_token_fn cb, void *user);

struct ns_engine_msg {
	const char *role;    /* "system", "user", "assistant" */
	const char *content;
};

/* Render the conversation with the model's chat template (add_generation_prompt), evaluate
 * what is not already in the context (the longest common prefix with the previous call is
 * kept), generate the assistant's reply. Returns as ns_engine_generate; -EINVAL when the
 * model has no chat template we know. */
int ns_engine_chat(struct ns_engine *e, const struct ns_engine_msg *msgs, size_t n,
		   const struct ns_gen_params *g, ns_token_fn cb, void *user);

/* Incremental evaluation (llama_decode's use): a context that persists across calls.
 * ns_engine_eval appends ids to the context ns_engine_chat keeps (ns_engine_generate,
 * ns_engine_logits, ns_engine_reset and a step of slot 0 empty it) and writes the logits
 * after its last token (logits: n_vocab floats), or of every one of its tokens with all
 * (n x n_vocab); logits may be NULL. Logits are bit-identical to evaluating the whole context
 * in one call. ns_engine_rollback keeps the first n_keep positions (<= ns_engine_n_past; a
 * recurrent model: 0 or all), so the next eval continues from there as if the rest had never
 * been evaluated. Return 0 or -EINVAL (context full, ids out of range, a rollback it cannot
 * make), -ENOMEM, -EPIPE, -ECANCELED, with the line in ns_engine_error; after a failed eval
 * the context is empty. */
int ns_engine_eval(struct ns_engine *e, const int32_t *ids, uint32_t n, float *logits,
		   bool all);
int ns_engine_rollback(struct ns_engine *e, uint32_t n_keep);
uint32_t ns_engine_n_past(const struct ns_engine *e);

/* One step of several sequences for a caller that samples for itself (nsctl serve): each
 * sequence names its slot (< opts.n_seq; slot 0 is the context of the calls above), the
 * positions of that slot's cache it keeps (<= what the slot holds: the caller keeps count;
 * 0 forgets it), and tokens to append; all are evaluated together, every weight read once,
 * and each sequence's logits after its last token (if it gives a buffer of n_vocab floats)
 * are bit-identical to evaluating it alone. Returns 0, -EINVAL (a slot twice or out of
 * range, keep past what the slot holds, the context full, an id out of range), -EPIPE,
 * -ECANCELED; after an error the slots of the step are empty. Statistics: n_prompt = the
 * tokens, prefill_s = the step's time, req_prefill / dev_prefill = nsio's bytes. */
struct ns_engine_seq {
	uint32_t slot, keep;
	const int32_t *tokens;
	uint32_t n;            /* >= 1 */
	float *logits;         /* (n_vocab) or NULL */
};

int ns_engine_step(struct ns_engine *e, const struct ns_engine_seq *seqs, uint32_t n);

/* Check the children now, as every waiting call does (a dead nsio, nsplan or nsrouter is
 * restarted): for a caller idle between calls. Returns 0, -EPIPE (nscompute is gone; the
 * reason in ns_engine_error) or -ECANCELED. */
int ns_engine_poll(struct ns_engine *e);

/* Context positions nscompute holds (-c). */
uint32_t ns_engine_n_ctx(const struct ns_engine *e);

/* Whether the model carries a recurrent state (Qwen3.5's linear-attention layers): such a
 * context goes back only to its start, so a cached prefix serves a new prompt only when it is
 * everything the context holds (ns_engine_step's keep: 0 or all of it; ns_engine_generate
 * and ns_engine_chat evaluate a changed prompt whole by themselves). */
bool ns_engine_is_recurrent(const struct ns_engine *e);

/* Forget the context (next chat call evaluates everything). */
void ns_engine_reset(struct ns_engine *e);

/* The text ns_engine_chat would evaluate for msgs (the whole rendered conversation), into
 * *out (malloc'd, NUL-terminated; the caller frees). Returns 0 or -EINVAL / -ENOMEM with the
 * reason in ns_engine_error. */
int ns_engine_chat_prompt(struct ns_engine *e, const struct ns_engine_msg *msgs, size_t n,
			  char **out);

/* Family of the model's chat template ("gptoss" for harmony, "qwen3", "llama3", "llama31",
 * "llama32", "gemma", "gemma4"), or NULL when it has none we know. */
const char *ns_engine_chat_template(const struct ns_engine *e);

/* Evaluate exactly ids (no BOS added) from an empty context and store the logits of every
 * position in out: (n, n_vocab) float32. Returns 0 or negative errno. */
int ns_engine_logits(struct ns_engine *e, const int32_t *ids, uint32_t n, float *out);

/* Teacher forcing: evaluate prompt (n_prompt >= 1, no BOS added) from an empty context as
 * prefill, then decode cont token by token exactly as generation would (each a timed decode
 * step streaming every weight), feeding cont[i] instead of a sampled token; cb (may be NULL)
 * sees each cont token. logits: NULL, or (n_prompt + n_cont, n_vocab) float32 receiving the
 * logits of every position (the prompt's from prefill, then one row per decode step).
 * Benchmarks use it so every configuration decodes the same tokens. Returns as
 * ns_engine_generate; stats as for generation (n_decode = n_cont). */
int ns_engine_decode_forced(struct ns_engine *e, const int32_t *prompt, uint32_t n_prompt,
			    const int32_t *cont, uint32_t n_cont, float *logits, ns_token_fn cb,
			    void *user);

/* Text <-> ids with the model's tokenizer. ids: malloc'd, caller frees. */
int ns_engine_tokenize(struct ns_engine *e, const char *text, bool add_special, int32_t **ids,
		       size_t *n);

uint32_t ns_engine_n_vocab(const struct ns_engine *e);
const char *ns_engine_session(const struct ns_engine *e);
/* pid of a child (its wrapper's when wrapped), 0 if not running. */
int ns_engine_pid(const struct ns_engine *e, enum ns_engine_proc p);

/* Figures of the last generate / chat / logits call. */
struct ns_engine_stats {
	uint32_t n_prompt, n_gen, n_decode;
	double prefill_s, decode_s;
	double prefill_tok_s, decode_tok_s;  /* 0 when nothing was timed */
	uint64_t req_prefill, req_decode;    /* weight bytes requested from nsio per phase */
	uint64_t dev_prefill, dev_decode;    /* bytes read from the device per phase */
	double gb_per_token, dev_gb_per_token; /* decode: req_decode / n_decode (1e9 bytes) */
	double stall_ms_per_token;           /* nsio's stall counter over the call / tokens */
	uint64_t arena_peak, arena_bytes;    /* peak reservation since start; the budget */
	uint64_t requests, cache_hits;       /* over the call */
	double cache_hit_rate;               /* cache_hits / requests (0..1) */
	/* MoE prediction over the call: experts the real router chose in layers that had a
	 * prediction, how many of them it named, the ratio (0..1; 0 with none) */
	uint64_t predict_experts, predict_hits;
	double predict_hit_rate;
	/* nsio's side over the call: predicted windows read into spare arena; READs they served
	 * before a real plan asked for them (kept out of cache_hits); windows promoted */
	uint64_t predict_reads, predict_claims, predict_promoted;
	uint64_t nsio_restarts;              /* restarts of nsio during the engine's life */
	uint32_t stop_reason;                /* 0 prompt only, 1 length, 2 end of generation,
					      * 3 context full, 4 callback */
	/* speculative decoding (ns_gen_params.draft); then n_decode and decode_s count every
	 * decode pass, and decode_tok_s, gb_per_token and dev_gb_per_token are per token the
	 * decode passes yielded (n_gen - 1: the first comes from the prompt's pass) */
	bool draft;
	uint32_t drafted, accepted;          /* drafted tokens evaluated; of them, kept */
	uint32_t draft_passes;               /* decode passes that carried drafts */
	uint32_t draft_k;                    /* the adaptive draft length at the end */
	double accept_rate;                  /* accepted / drafted */
	double passes_per_token;             /* n_decode / (n_gen - 1) */
	/* images (ns_engine_set_images): their tokens in the prompt, and the vision tower's
	 * time (decoding, preprocessing, tower; part of prefill_s) */
	uint32_t n_image_tokens;
	double tower_s;
	uint64_t req_tower;                  /* of req_prefill, the vision tower's weight bytes
					      * (streamed through nsio as the model's) */
};

void ns_engine_stats(const struct ns_engine *e, struct ns_engine_stats *out);

/* Images of the next ns_engine_generate, ns_engine_chat, ns_engine_logits or ns_engine_eval
 * call (which then starts the context over), in order; they are forgotten after it, taken or
 * refused. Each file is checked here from its header (PNG, JPEG or WebP; not cut short, not
 * 0x0, at most 64 Mpx, aspect ratio at most 200, at most opts.max_image_tokens tokens, all
 * of them within the context), nothing decoded and no weight read: -EINVAL with one line
 * otherwise, or when the engine has no vision tower (opts.mmproj). n 0 forgets them.
 * In the call: generate and chat put each image where Qwen-VL's processor does: every
 * "<|image_pad|>" of the prompt text (chat: when no message holds one, the images open the
 * last user message, each as NS_ENGINE_IMAGE_MARK; a conversation whose messages hold the
 * marks, e.g. images of earlier turns, is taken as is; generate: the text is taken as is, so
 * write the markers) becomes the next image's tokens; for logits and eval the caller writes the
 * ids, each maximal run of the placeholder (ns_engine_image_token) as long as its image's
 * token count (ns_engine_image_tokens), else -EINVAL with one line naming the count. */
#define NS_ENGINE_MAX_IMAGES 64
/* An image part as Qwen-VL's chat templates write it in a message's text. */
#define NS_ENGINE_IMAGE_MARK "<|vision_start|><|image_pad|><|vision_end|>"
int ns_engine_set_images(struct ns_engine *e, const char *const *paths, uint32_t n);
/* Tokens image i of the pending set becomes (0 when there is no such image). */
uint32_t ns_engine_image_tokens(const struct ns_engine *e, uint32_t i);
/* The image placeholder id (opts.image_token or the vocabulary's); -1 when none. */
int32_t ns_engine_image_token(const struct ns_engine *e);

/* MoE expert cache warm-up (needs opts.expert_stats, nsplan and nsrouter): evaluate text
 * from an empty context (as one user message with the model's chat template when chat, after
 * system when not NULL; plain text otherwise), take the expert hits of exactly that
 * evaluation from nsrouter's statistics file, write them to "<expert_stats>.plan" (the file
 * nsplan plans from), have nsplan re-plan (SIGHUP: the most-hit experts pinned in the RAM
 * budget, a new plan generation) and wait until nsio has loaded that generation's RAM
 * windows. The context is forgotten afterwards. nsrouter subscribes to the router decisions
 * a moment after the engine starts: an evaluation it did not count whole is repeated (at
 * most 3 passes). Returns 0 with *out filled, -EINVAL (no statistics file, nsplan or nsrouter:
 * a dense model), -ETIMEDOUT (nothing counted / no new generation / not loaded within
 * timeout_ms), -ECANCELED, or an evaluation's error. */
struct ns_warmup_report {
	uint32_t n_tokens;    /* tokens of the warm-up prompt */
	uint32_t passes;      /* evaluations it took until nsrouter counted one whole */
	uint32_t generation;  /* plan generation nsio loaded */
	uint64_t hits;        /* expert selections counted (n_tokens x n_used x MoE layers) */
};

int ns_engine_warmup(struct ns_engine *e, const char *text, bool chat, const char *system,
		     uint64_t timeout_ms, struct ns_warmup_report *out);

/* Ask the call in progress to stop (async-signal-safe): it returns -ECANCELED. */
void ns_engine_cancel(struct ns_engine *e);

/* One line about the last failure. */
const char *ns_engine_error(const struct ns_engine *e);

/* ---- Version, logging, vocabulary, metadata (for embedders) ----
 * Threads: ns_version and ns_log_set may be called from any thread at any time; the
 * accessors below only read what the load fixed, so they may be called from any thread while
 * the engine lives, also during a generate call on another thread. */

/* "MAJOR.MINOR.PATCH" of the library actually loaded (the macros above are the header's). */
const char *ns_version(void);

enum ns_log_level {
	NS_LOG_INFO = 0,
	NS_LOG_WARN = 1,   /* a helper process restarted or given up on */
	NS_LOG_ERROR = 2,
};

/* One line (no newline, no prefix) the library would otherwise print on stderr as
 * "neurostream: LINE". Called on the thread of the engine call that noticed it. */
typedef void (*ns_log_fn)(enum ns_log_level level, const char *line, void *user);

/* Route the library's lines to fn (NULL: back to stderr), for every engine of the process.
 * The child processes keep writing their own lines on stderr. */
void ns_log_set(ns_log_fn fn, void *user);

/* Special tokens, -1 when the vocabulary has none. */
int32_t ns_engine_token_bos(const struct ns_engine *e);
int32_t ns_engine_token_eos(const struct ns_engine *e);
int32_t ns_engine_token_eot(const struct ns_engine *e);    /* end of turn */
/* Does id end a generation (EOS, EOT and the template's other stop tokens)? */
bool ns_engine_token_is_eog(const struct ns_engine *e, int32_t id);

/* The bytes token id stands for in text (special: CONTROL tokens as their text, e.g.
 * "<|im_end|>", instead of nothing). *piece stays valid while e lives; not NUL-terminated.
 * Returns 0 or -EINVAL (id out of range). */
int ns_engine_token_piece(const struct ns_engine *e, int32_t id, bool special,
			  const char **piece, size_t *len);

/* The token's raw vocabulary entry ("\u0120the", "<|im_end|>"), or NULL out of range. */
const char *ns_engine_token_text(const struct ns_engine *e, int32_t id);

/* Ids to text as llama_detokenize: pieces joined, SentencePiece's leading space removed.
 * remove_special: drop BOS/EOS; unparse_special: render CONTROL tokens as text. *out is
 * malloc'd and NUL-terminated (the caller frees; *len counts bytes, which may include NULs).
 * Returns 0, -EINVAL (an id out of range) or -ENOMEM. */
int ns_engine_detokenize(const struct ns_engine *e, const int32_t *ids, size_t n,
			 bool remove_special, bool unparse_special, char **out, size_t *len);

/* Model metadata (the GGUF's key/value pairs; a Hugging Face checkpoint's mapped ones):
 * the number of keys, the i-th key (NULL out of range), and a key's value as text into buf
 * (strings as they are, numbers in decimal, booleans true/false, arrays as
 * "[array of N TYPE]"). ns_engine_meta_str returns the length of the whole text (as snprintf:
 * buf may have been too short), or -ENOENT when the key is absent. */
uint64_t ns_engine_meta_count(const struct ns_engine *e);
const char *ns_engine_meta_key(const struct ns_engine *e, uint64_t i);
int ns_engine_meta_str(const struct ns_engine *e, const char *key, char *buf, size_t len);

/* Chat templates with a thinking switch (Qwen3's and Qwen3.5's enable_thinking, Gemma 4's
 * <|think|>): off makes ns_engine_chat and ns_engine_chat_prompt render the empty think
 * block, so the model answers directly; on lets it think first. Until it is called: on for
 * Qwen3 (its template's default), opts.thinking for Qwen3.5 and Gemma 4. */
void ns_engine_set_thinking(struct ns_engine *e, bool on);

/* Parse a size as nsctl's options do ("512MB", "6GB", "1.5GiB", "4096"; binary units: 1MB =
 * 1 MiB). Returns 0 with *out, -EINVAL (not a size) or -ERANGE (too large). */
int ns_parse_size(const char *text, uint64_t *out);

/* sizeof(struct ns_engine_opts), sizeof(struct ns_gen_params), sizeof(struct
 * ns_engine_stats) of the library as built, so bindings that mirror the structs (ctypes) can
 * refuse a library they do not match. */
size_t ns_engine_opts_size(void);
size_t ns_gen_params_size(void);
size_t ns_engine_stats_size(void);

/* The options the engine runs with, defaults resolved (budgets, n_ctx, backend, lookahead;
 * string members point into e). */
void ns_engine_get_opts(const struct ns_engine *e, struct ns_engine_opts *out);

#ifdef __cplusplus
}
#endif

#endif
