/* ns_util.h - checked arithmetic, size strings and error buffers shared by every module.
 *
 * Everything here is header-only or in ns_util.c; nothing holds state. */
#ifndef NS_UTIL_H
#define NS_UTIL_H

#include <stdarg.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#define NS_ARRAY_LEN(a) (sizeof(a) / sizeof((a)[0]))

/* One-line error messages travel in caller-owned buffers of this size. */
#define NS_ERR_LEN 512

/* Overflow-checked size arithmetic: return true on overflow (out is then undefined). */
static inline bool ns_mul_u64_overflow(uint64_t a, uint64_t b, uint64_t *out)
{
	return __builtin_mul_overflow(a, b, out);
}

static inline bool ns_add_u64_overflow(uint64_t a, uint64_t b, uint64_t *out)
{
	return __builtin_add_overflow(a, b, out);
}

static inline uint64_t ns_align_up_u64(uint64_t v, uint64_t align)
{
	return (v + align - 1) / align * align; /* caller checks v + align cannot overflow */
}

/* Streaming geometry shared by nsio, the planner and nsctl info. */
#define NS_DIRECT_ALIGN 4096u   /* O_DIRECT offset/length alignment we assume (logical block) */
#define NS_DEFAULT_LOOKAHEAD 4u /* blocks in flight beside the one being multiplied */

/* Arena bytes one block of `bytes` can occupy: an O_DIRECT read of an unaligned range reads the
 * enclosing aligned range, at most one alignment unit more than the rounded-up length. */
static inline uint64_t ns_stream_slot_bytes(uint64_t bytes)
{
	return ns_align_up_u64(bytes, NS_DIRECT_ALIGN) + NS_DIRECT_ALIGN;
}

/* Smallest arena that holds lookahead + 1 blocks of one row of row_bytes each. */
static inline uint64_t ns_stream_min_budget(uint64_t row_bytes, uint32_t lookahead)
{
	return (uint64_t)(lookahead + 1) * ns_stream_slot_bytes(row_bytes);
}

/* Format into err (NS_ERR_LEN bytes or errlen), never overflowing, with control characters
 * replaced by '?' so the message stays one printable line; returns err. */
char *ns_errf(char *err, size_t errlen, const char *fmt, ...)
	__attribute__((format(printf, 3, 4)));

/* Parse a byte count: "4096", "512K", "512KB", "512KiB", "64MB", "6GB", "1.5GB", "2TB".
 * Units are binary (1 KB = 1024 B) as users of the seed expect. Decimal digits, an optional
 * fraction (rounded down to whole bytes; refused without a unit) and an optional unit; whole
 * numbers are exact up to 2^64-1. No sign, leading space, hex, exponent, nan or inf. Returns
 * 0, or -EINVAL for malformed text, -ERANGE when the value does not fit in uint64_t. */
int ns_parse_bytes(const char *text, uint64_t *out);

/* Parse a count for a command-line option: decimal digits only (no sign, space, fraction,
 * exponent or hex: "1.5", "1e3", " -1" are not counts), in lo..hi. Returns 0 with *out set,
 * or -EINVAL (not a count, or outside lo..hi) leaving *out alone; callers word the error. */
int ns_parse_count(const char *text, uint64_t lo, uint64_t hi, uint64_t *out);

/* Human-readable binary size ("1.50 GiB", "512.00 MiB", "17 B") into buf. Returns buf. */
char *ns_format_bytes(uint64_t bytes, char *buf, size_t buflen);

/* Open path (flags: O_RDONLY and the like, O_CLOEXEC added) only if it is a regular file:
 * the open itself is non-blocking, so a FIFO, a device or a socket named as a model is
 * refused at once instead of blocking the caller until a writer appears (O_NONBLOCK is then
 * cleared). Returns the fd, or -errno with one line in err ("PATH: not a regular file (a
 * FIFO)"; -EISDIR for a directory). */
int ns_open_regular(const char *path, int flags, char *err, size_t errlen);

/* Monotonic clock in nanoseconds. */
uint64_t ns_now_ns(void);

#endif
