/* batch.c - several sequences in one evaluation (forward.h, ns_fwd_eval_batch): a KV cache
 * per sequence, the rows of a chunk told which cache and position each one has.
 *
 * The architecture's eval_chunk does the work: it already treats a chunk as rows (one matmul
 * per weight for all of them; RoPE, the cache write and attention per row), so a batch is a
 * chunk whose rows belong to different sequences. Here: the checks, the chunks (of at most
 * n_batch rows, in the batch's order), each row's cache and position, the rows whose logits
 * are wanted, and every sequence's advance. */
#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "forward_impl.h"

int ns_fwd_seqs_init(struct ns_fwd *f, uint32_t n_seq, char *err, size_t errlen)
{
	const struct ns_kvcache *kv = f->kv;
	int rc = 0;

	if (f->recurrent && n_seq > 1) {
		ns_errf(err, errlen, "forward: the recurrent layers keep one sequence's state: "
			"%u sequences (--parallel) are not supported for this architecture yet",
			n_seq);
		return -EINVAL;
	}
	if (!f->rows_ok || !kv || !kv->k) {
		ns_errf(err, errlen, "forward: this pass (backend or architecture) evaluates one sequence at a time "
			"(%u sequences asked for)", n_seq);
		return -EINVAL;
	}
	if (!(f->seq_kv = calloc(n_seq, sizeof(*f->seq_kv)))) {
		ns_errf(err, errlen, "out of memory");
		return -ENOMEM;
	}
	f->seq_kv[0] = f->kv;
	for (uint32_t s = 1; s < n_seq && rc == 0; s++) {
		/* f->kv's shape and element types, its sliding layers' ring included */
		rc = ns_kvcache_new_like(kv, &f->seq_kv[s]);
		if (rc == 0)
			f->n_seq = s + 1;
	}
	if (rc < 0)
		ns_errf(err, errlen, "forward: cannot allocate the KV caches of %u sequences of "
			"%u positions: %s", n_seq, kv->n_ctx, strerror(-rc));
	return rc;
}

static struct ns_kvcache *s_kv(const struct ns_fwd *f, uint32_t seq)
{
	return seq == 0 ? f->kv : f->seq_kv[seq];
}

uint32_t ns_fwd_n_seq(const struct ns_fwd *f)
{
	return f->n_seq ? f->n_seq : 1;
}

uint32_t ns_fwd_seq_n_past(const struct ns_fwd *f, uint32_t seq)
{
	return seq < ns_fwd_n_seq(f) ? s_kv(f, seq)->n_past : 0;
}

int ns_fwd_seq_truncate(struct ns_fwd *f, uint32_t seq, uint32_t n_past)
{
	if (seq == 0) /* ns_fwd_eval's sequence: its image offset too */
		return ns_fwd_truncate(f, n_past);
	if (seq >= ns_fwd_n_seq(f) || n_past > s_kv(f, seq)->n_past ||
	    (f->recurrent && n_past && n_past != s_kv(f, seq)->n_past))
		return -EINVAL;
	if (f->arch_cut && n_past != s_kv(f, seq)->n_past) { /* a ring: -ERANGE, nothing changed */
		int rc = f->arch_cut(f, seq, n_past);

		if (rc < 0)
			return rc;
	}
	s_kv(f, seq)->n_past = n_past; /* later positions are written before they are read */
	return 0;
}

static int s_check(struct ns_fwd *f, const struct ns_fwd_batch *b, uint32_t *count)
{
	const uint32_t n_seq = ns_fwd_n_seq(f);

	if (!b->n || (b->n_out && !b->logits)) {
		ns_errf(f->err, sizeof(f->err), "forward: a batch of %u tokens, %u logits rows",
			b->n, b->n_out);
		return -EINVAL;
	}
	if (f->mm_end) { /* its M-RoPE offset is ns_fwd_eval's alone */
		ns_errf(f->err, sizeof(f->err), "forward: sequence 0 holds an image: a batch does "
			"not continue it (cut it back to 0 first)");
		return -EINVAL;
	}
	for (uint32_t t = 0; t < b->n; t++) {
		if (b->tokens[t] < 0 || (uint64_t)b->tokens[t] >= f->n_tok_rows ||
		    b->seq[t] >= n_seq) {
			ns_errf(f->err, sizeof(f->err), "forward: batch token %u: id %d / sequence "
				"%u out of range [0, %llu) / [0, %u)", t, b->tokens[t], b->seq[t],
				(unsigned long long)f->n_tok_rows, n_seq);
			return -EINVAL;
		}
		count[b->seq[t]]++;
	}
	for (uint32_t k = 0; k < b->n_out; k++)
		if (b->out_rows[k] >= b->n || (k && b->out_rows[k] <= b->out_rows[k - 1])) {
			ns_errf(f->err, sizeof(f->err), "forward: logits rows must ascend below %u",
				b->n);
			return -EINVAL;
		}
	for (uint32_t s = 0; s < n_seq; s++)
		if ((uint64_t)s_kv(f, s)->n_past + count[s] > f->n_ctx) {
			ns_errf(f->err, sizeof(f->err), "forward: context of sequence %u full: %u "
				"positions used + %u new > n_ctx %u", s, s_kv(f, s)->n_past,
				count[s], f->n_ctx);
			return -ENOSPC;
		}
	return 0;
}

/* A backend whose chunks are one sequence's consecutive positions (cuda): a batch of
 * sequence 0 alone, its last row's logits at most. */
static int s_one_sequence(struct ns_fwd *f, const struct ns_fwd_batch *b)
{
	if (ns_fwd_n_seq(f) != 1 || b->n_out > 1 || (b->n_out && b->out_rows[0] != b->n - 1)) {
		ns_errf(f->err, sizeof(f->err), "forward: this backend evaluates one sequence at "
			"a time, the last row's logits only");
		return -EINVAL;
	}
	return ns_fwd_eval(f, b->tokens, b->n, b->n_out ? b->logits : NULL, false);
}

int ns_fwd_eval_batch(struct ns_fwd *f, const struct ns_fwd_batch *b)
{
	const uint32_t n_seq = ns_fwd_n_seq(f);
	uint32_t *count = calloc(n_seq * 2, sizeof(uint32_t)), *adv = count + n_seq;
	uint32_t *local = malloc((size_t)f->n_batch * sizeof(uint32_t));
	uint32_t k_out = 0;
	int rc;

	if (!count || !local) {
		free(count);
		free(local);
		ns_errf(f->err, sizeof(f->err), "out of memory");
		return -ENOMEM;
	}
	ns_fwd_unmark(f); /* a rollback mark covers ns_fwd_eval's calls only */
	rc = s_check(f, b, count);
	if (rc == 0 && !f->rows_ok) {
		rc = s_one_sequence(f, b);
		goto out;
	}
	for (uint32_t i0 = 0; rc == 0 && i0 < b->n; i0 += f->n_batch) {
		const uint32_t nb = b->n - i0 < f->n_batch ? b->n - i0 : f->n_batch;
		const uint32_t k0 = k_out;

		memset(adv, 0, n_seq * sizeof(*adv));
		for (uint32_t t = 0; t < nb; t++) {
			const uint32_t s = b->seq[i0 + t];

			f->row_kv[t] = s_kv(f, s);
			f->row_pos[t] = f->row_kv[t]->n_past + adv[s]++;
		}
		while (k_out < b->n_out && b->out_rows[k_out] < i0 + nb) {
			local[k_out - k0] = b->out_rows[k_out] - i0;
			k_out++;
		}
		f->out_rows = local;
		f->n_out_rows = k_out - k0;
		rc = f->eval_chunk(f, b->tokens + i0, nb, f->n_out_rows ?
				   b->logits + (uint64_t)k0 * f->n_vocab : NULL, false);
		if (rc < 0)
			break;
		for (uint32_t s = 0; s < n_seq; s++)
			s_kv(f, s)->n_past += adv[s];
	}
out:
	f->out_rows = NULL;
	f->n_out_rows = 0;
	free(count);
	free(local);
	return rc;
}
