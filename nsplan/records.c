/* records.c - the published form of a plan: header + fixed-size entries (see plan.h). */
#include <errno.h>
#include <inttypes.h>
#include <string.h>

#include "ns_util.h"
#include "plan.h"

size_t nsplan_records_bytes(const struct nsplan *p)
{
	return sizeof(struct nsplan_header) + (size_t)p->hdr.n_entries * sizeof(struct nsplan_entry);
}

void nsplan_records_write(const struct nsplan *p, void *buf)
{
	memcpy(buf, &p->hdr, sizeof(p->hdr));
	memcpy((uint8_t *)buf + sizeof(p->hdr), p->entries,
	       (size_t)p->hdr.n_entries * sizeof(struct nsplan_entry));
}

int nsplan_records_check(const void *buf, size_t len, uint64_t n_tensors,
			 uint64_t (*n_rows)(void *ctx, uint64_t tensor), void *ctx,
			 char *err, size_t errlen)
{
	struct nsplan_header h;
	const uint8_t *base = buf;
	uint64_t want, next_row = 0;
	int64_t cur = -1;

	if (len < sizeof(h)) {
		ns_errf(err, errlen, "plan: %zu bytes, shorter than its header", len);
		return -EPROTO;
	}
	memcpy(&h, buf, sizeof(h));
	if (h.magic != NSPLAN_MAGIC || h.version != NSPLAN_VERSION ||
	    h.entry_bytes != sizeof(struct nsplan_entry)) {
		ns_errf(err, errlen, "plan: bad header (magic %#" PRIx64 ", version %u, entry %u bytes;"
			" want version %u, %zu bytes)", h.magic, h.version, h.entry_bytes,
			NSPLAN_VERSION, sizeof(struct nsplan_entry));
		return -EPROTO;
	}
	if (h.n_tensors != n_tensors) {
		ns_errf(err, errlen, "plan: written for %" PRIu64 " tensors, model has %" PRIu64,
			h.n_tensors, n_tensors);
		return -EPROTO;
	}
	if (ns_mul_u64_overflow(h.n_entries, sizeof(struct nsplan_entry), &want) ||
	    ns_add_u64_overflow(want, sizeof(h), &want) || want != len) {
		ns_errf(err, errlen, "plan: %" PRIu64 " entries do not fill %zu bytes", h.n_entries,
			len);
		return -EPROTO;
	}
	for (uint64_t i = 0; i < h.n_entries; i++) {
		struct nsplan_entry e;

		memcpy(&e, base + sizeof(h) + i * sizeof(e), sizeof(e));
		if (e.tier >= NSPLAN_TIER_COUNT || e.kind >= NSPLAN_KIND_COUNT ||
		    e.tensor >= n_tensors || e.row_end < e.row_begin ||
		    e.generation != h.generation) {
			ns_errf(err, errlen, "plan: entry %" PRIu64 " invalid (tensor %u, tier %u, "
				"rows %" PRIu64 "..%" PRIu64 ", generation %u of %u)", i, e.tensor,
				e.tier, e.row_begin, e.row_end, e.generation, h.generation);
			return -EPROTO;
		}
		if ((int64_t)e.tensor != cur) {
			if ((int64_t)e.tensor != cur + 1) {
				ns_errf(err, errlen, "plan: entry %" PRIu64 ": tensor %" PRId64
					" has no window", i, cur + 1);
				return -EPROTO;
			}
			if (cur >= 0 && n_rows && next_row != n_rows(ctx, (uint64_t)cur)) {
				ns_errf(err, errlen, "plan: tensor %" PRId64 " covered up to row %"
					PRIu64 " of %" PRIu64, cur, next_row, n_rows(ctx, (uint64_t)cur));
				return -EPROTO;
			}
			cur = e.tensor;
			next_row = 0;
		}
		if (e.row_begin != next_row) {
			ns_errf(err, errlen, "plan: entry %" PRIu64 " (tensor %u) starts at row %" PRIu64
				", expected %" PRIu64, i, e.tensor, e.row_begin, next_row);
			return -EPROTO;
		}
		next_row = e.row_end;
	}
	if ((uint64_t)(cur + 1) != n_tensors) {
		ns_errf(err, errlen, "plan: tensor %" PRId64 " has no window", cur + 1);
		return -EPROTO;
	}
	if (cur >= 0 && n_rows && next_row != n_rows(ctx, (uint64_t)cur)) {
		ns_errf(err, errlen, "plan: tensor %" PRId64 " covered up to row %" PRIu64 " of %"
			PRIu64, cur, next_row, n_rows(ctx, (uint64_t)cur));
		return -EPROTO;
	}
	return 0;
}
