/* mmproj_beside.h - the vision tower found beside a model without --mmproj.
 *
 * The rule (docs/decisions.md, "The tower beside the model"): the candidates are the files of
 * the model's directory (MODEL's own when MODEL is a checkpoint directory) whose name contains
 * "mmproj" and ends in ".gguf", as llama-server's --models-dir takes a model's projector. A
 * candidate is the model's tower when it is an mmproj GGUF with a vision encoder whose
 * projection_dim is the model's n_embd and whose DeepStack layers are as many as the model
 * takes (the checks --mmproj gets). Exactly one such file: it is taken. None: no tower (the
 * other candidates are named in why). Several: refused in one line naming two of them, since
 * guessing between an F16 and a Q8_0 tower, say, is the user's call (--mmproj F, or
 * --no-mmproj). */
#ifndef NSCTL_MMPROJ_BESIDE_H
#define NSCTL_MMPROJ_BESIDE_H

#include <stddef.h>
#include <stdint.h>

/* Look beside model (a GGUF file, a shard, or a checkpoint directory) for the tower of a text
 * model of width n_embd taking n_deepstack DeepStack features. Returns 1 with its path in out,
 * 0 when none fits (why: the first file passed over and the reason, or "" when there was no
 * candidate), -EEXIST when several fit (err names two), or -errno when the directory cannot
 * be read (err). */
int nsctl_mmproj_beside(const char *model, uint32_t n_embd, uint32_t n_deepstack, char *out,
			size_t outlen, char *why, size_t whylen, char *err, size_t errlen);

#endif
