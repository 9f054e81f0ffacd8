/* compute_image.h - images in a prompt (nscompute --mmproj PATH; proto IMAGES before an EVAL).
 *
 * The vision tower's weights stream through nsio under the session's budgets as the text
 * model's do: nsio serves the mmproj beside the model (nsio --mmproj: its tensors after the
 * model's in one table), and the tower runs over a streaming provider (weights_stream.h) of
 * its own, so each matrix is read through the arena in blocks of rows once per image (per
 * chunk of patches), the position grid once per image, and only the small tensors (biases,
 * norms, the patch kernel as float: ns_vision_held_bytes) are held in this process, counted
 * in the fixed set (nsplan/fixed_mem.h tower_bytes). No RAM tier for the tower. The text
 * model's weights: an image's tokens go through them in the prompt's chunks of n_batch
 * (512) rows, so each text weight is read once per chunk, not once per image token.
 *
 * nsctl sends IMAGES (the files, in order, the placeholder id) just before an EVAL that starts
 * the sequence over; nscompute keeps them for that EVAL, which decodes, preprocesses and runs
 * the tower over each image, gives every row its M-RoPE position (ns_fwd_mm_positions: each
 * maximal run of the placeholder is the next image, of exactly its token count) and evaluates
 * the prompt with ns_fwd_eval_mm. */
#ifndef NS_COMPUTE_IMAGE_H
#define NS_COMPUTE_IMAGE_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

struct nsc_proc;
struct nsc_tower;
struct ns_model;

/* Opens the mmproj at path, checks it is a vision tower whose output width is the text model
 * m's n_embd, builds the tower over a streaming provider on client c (wo: the text
 * provider's options; threads, block rows and lookahead are taken, not its RAM tier) and
 * reads its held tensors; its passes beat c's heartbeat at each matmul, so a large image is
 * not taken for a stall. 0, or -EINVAL (not a tower, a mismatch, a tensor the tower cannot
 * use, nsio not serving the mmproj), -ENOMEM, or the stream's error, with one line in err. */
struct ns_client;
struct ns_weights_stream_opts;
int nsc_tower_open(const char *path, const struct ns_model *m,
		   const struct ns_weights_stream_opts *wo, struct ns_client *c,
		   struct nsc_tower **out, char *err, size_t errlen);

#ifdef NS_WITH_CUDA
/* --backend cuda: the tower's forward pass on the device (nscompute/cuda/ctower.h) from now
 * on, an arena per image released after it. arena: the largest image's (cuda_attach.c,
 * vision_vram.h ns_vision_vram_largest); firm (a --vram-budget): it is the tower's share of
 * the budget, taken out of the pass's, and every image runs in exactly that many bytes (one
 * needing more is refused in one line); else each image takes its own need. An image the
 * device cannot hold is refused in one line. Says so on stderr with the figure. */
int nsc_tower_cuda(struct nsc_tower *t, uint64_t arena, bool firm, struct ns_client *c,
		   char *err, size_t errlen);
#endif
void nsc_tower_free(struct nsc_tower **t);

/* IMAGES received: kept for the next EVAL (a malformed one makes that EVAL an ERROR).
 * Always 0. */
int nsc_images_set(struct nsc_proc *p, const void *buf, size_t len);
bool nsc_images_pending(const struct nsc_proc *p);
void nsc_images_clear(struct nsc_proc *p);

/* The EVAL's prompt (tokens, n, starting at position 0) with the pending images: the tower over
 * each, then ns_fwd_eval_mm into logits (all: every row). *image_tokens and *tower_ns say what
 * the images took, *tower_req the weight bytes the tower requested from nsio. Clears the
 * pending images. 0, or a negative errno with one line in err
 * (the sequence must be reset after it). */
int nsc_images_eval(struct nsc_proc *p, const int32_t *tokens, uint32_t n, float *logits,
		    bool all, uint32_t *image_tokens, uint64_t *tower_ns, uint64_t *tower_req,
		    char *err, size_t errlen);

#endif
