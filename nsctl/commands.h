/* commands.h - the nsctl subcommands. Each lives in its own cmd_<name>.c and gets argv
 * starting at the subcommand's first argument. Exit codes: 0 ok, 1 runtime failure,
 * 2 bad usage or bad input (malformed model file, wrong flag). */
#ifndef NSCTL_COMMANDS_H
#define NSCTL_COMMANDS_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

int cmd_image(int argc, char **argv);
int cmd_info(int argc, char **argv);
int cmd_logits(int argc, char **argv);
int cmd_mkmodel(int argc, char **argv);
int cmd_plan(int argc, char **argv);
int cmd_tensor(int argc, char **argv);
int cmd_tokenize(int argc, char **argv);
int cmd_detokenize(int argc, char **argv);
int cmd_bench(int argc, char **argv);
int cmd_run(int argc, char **argv);
int cmd_ps(int argc, char **argv);
int cmd_pull(int argc, char **argv);
int cmd_serve(int argc, char **argv);

/* ---- budgets.c: what run and bench check before anything starts ---- */

/* The budgets a run takes when the user names some or none: what `nsctl plan` would choose for
 * the same model, context (0: the plan's default), n_seq KV caches (nsctl serve's sequences;
 * 1 otherwise), KV cache types (ctk / ctv names as nsctl_kv_set stores them, NULL: f32) and
 * given budgets (from MemAvailable and the cgroup limit, budget_defaults.h), a draft model
 * (--draft PATH, NULL: none) and a vision tower with its images' working memory (tower,
 * NULL: none) counted in the fixed set (nsctl_fixed_add_draft, nsctl_fixed_add_tower). mem / ram:
 * in: the given figures, out: the chosen ones.
 * Returns 0 (line: a description of the defaults, "" when all were given), or an exit code
 * (1 runtime, 2 impossible budgets) after one line on stderr prefixed with who, or in err
 * (errlen bytes, no prefix) when err is not NULL (the library, api_budgets.c). */
struct nsctl_tower;
int nsctl_pick_budgets(const char *who, const char *model, const char *draft,
		       const struct nsctl_tower *tower, uint32_t n_ctx,
		       uint32_t n_seq, const char *ctk, const char *ctv, bool mem_given,
		       uint64_t *mem, bool ram_given, uint64_t *ram, char *line, size_t linelen,
		       char *err, size_t errlen);

/* Budgets the user named, checked before anything starts, for each pair (mem[i], ram[i]),
 * i < n, with one read of the model's headers and of the memory available: an arena (mem, 0:
 * the engine's own) not under the smallest workable one, and the session's whole host memory
 * (nsctl_host_total: what the RAM tier can fill, the arena and the fixed set at n_ctx, 0: the
 * plan's default, KV types ctk / ctv, n_seq sequences' caches (serve --parallel) and a draft
 * model, NULL: none) within the memory available (MemAvailable, the
 * cgroup's memory.max / memory.high). Returns 0, or an exit code (2; 1 when out of memory)
 * after one line prefixed with who, naming the figures and what to lower, for the first pair
 * refused. */
int nsctl_check_budgets(const char *who, const char *model, const char *draft,
			const struct nsctl_tower *tower, uint32_t n_ctx,
			uint32_t n_seq,
			const char *ctk, const char *ctv, const uint64_t *mem, const uint64_t *ram,
			size_t n);

/* A --vram-budget for the cuda backend: 0 when it holds what the cuda pass keeps besides
 * weight windows at n_ctx with KV cache types ctk / ctv (NULL: f32) (nsplan/gpu_need.h;
 * reserve 0: exactly that, else reserve, which must cover it and fit the budget); else exit
 * code 2 after one line naming the smallest workable budget (1 when the model cannot be
 * read). */
int nsctl_check_vram(const char *who, const char *model, uint32_t n_ctx, const char *ctk,
		     const char *ctv, uint64_t vram, uint64_t reserve);

/* llama.cpp's -ngl N as a VRAM budget: the weights of layers 0..N-1 (all of them when N is at
 * least the model's layer count) and of the tensors outside the layers, plus what the cuda
 * pass keeps at n_ctx (the --reserve-vram default); one line on stderr says so. nsplan still
 * chooses which weights the budget holds. Returns 0, or an exit code (2; 1 out of memory)
 * after one line. */
int nsctl_ngl_vram(const char *who, const char *model, uint32_t n_ctx, const char *ctk,
		   const char *ctv, int64_t ngl, uint64_t *vram);

/* KV cache types (kv_opts.c): -ctk/--cache-type-k and -ctv/--cache-type-v, llama.cpp's
 * names. nsctl_kv_set stores the type's static name in *k or *v, or prints one line prefixed
 * with who and returns -EINVAL for a name other than f32, f16, q8_0. nsctl_kv_enum: the enum
 * ns_kv_type of a stored name (NULL: f32). */
bool nsctl_kv_is_flag(const char *flag);
int nsctl_kv_set(const char *who, const char *flag, const char *val, const char **k,
		 const char **v);
int nsctl_kv_enum(const char *name);

#endif
