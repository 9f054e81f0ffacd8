/* test_tok_bad - hostile and degenerate vocabularies, and random input.
 *
 * Writes small GGUFs with broken tokenizer metadata and checks each is refused with an error
 * line (never a crash); a minimal byte-level vocabulary with odd merges loads; random byte
 * strings round-trip through encode/detokenize on it (byte-level BPE is lossless) and through
 * the streaming detokenizer, whose chunks must end on character boundaries.
 * Exit 0 pass, 1 fail. */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "gguf.h"
#include "gguf_write.h"
#include "ns_util.h"
#include "tokenizer.h"

static char s_dir[256];
static int s_fails;

/* The 256 byte-level tokens (GPT-2 alphabet), then extra texts. */
static char **s_byte_tokens(size_t extra, size_t *n)
{
	char **v = calloc(256 + extra, sizeof(*v));
	unsigned k = 0;

	for (unsigned b = 0; b < 256; b++) {
		bool pr = (b >= 0x21 && b <= 0x7e) || (b >= 0xa1 && b <= 0xac) || b >= 0xae;
		unsigned cp = pr ? b : 0x100 + k++;

		v[b] = calloc(4, 1);
		if (cp < 0x80) {
			v[b][0] = (char)cp;
		} else {
			v[b][0] = (char)(0xc0 | (cp >> 6));
			v[b][1] = (char)(0x80 | (cp & 0x3f));
		}
	}
	*n = 256 + extra;
	return v;
}

static void s_free_tokens(char **v, size_t n)
{
	for (size_t i = 0; i < n; i++)
		free(v[i]);
	free(v);
}

typedef void (*s_setup_fn)(struct ns_gguf_writer *w);

/* Write a GGUF set up by fn and try to build a tokenizer; want_ok says which outcome. */
static struct ns_tok *s_try(const char *name, s_setup_fn fn, bool want_ok)
{
	char path[512], err[NS_ERR_LEN] = "";
	struct ns_gguf_writer *w = ns_gguf_writer_new(32);
	struct ns_gguf *g = NULL;
	struct ns_tok *t = NULL;

	snprintf(path, sizeof(path), "%s/%s.gguf", s_dir, name);
	fn(w);
	if (ns_gguf_writer_write_file(w, path, err, sizeof(err)) ||
	    ns_gguf_open(path, &g, err, sizeof(err))) {
		fprintf(stderr, "FAIL %s: cannot write/read the test file: %s\n", name, err);
		s_fails++;
		ns_gguf_writer_destroy(&w);
		return NULL;
	}
	ns_gguf_writer_destroy(&w);
	t = ns_tok_new(g, err, sizeof(err));
	ns_gguf_close(&g);
	unlink(path);
	if (!!t != want_ok || (!t && !err[0])) {
		fprintf(stderr, "FAIL %s: %s (%s)\n", name, t ? "loaded" : "refused", err);
		s_fails++;
	} else {
		printf("ok   %-22s %s%s\n", name, t ? "loads" : "refused: ", t ? "" : err);
	}
	return t;
}

static void s_bytes_vocab(struct ns_gguf_writer *w, const char *pre, bool with_merges)
{
	size_t n;
	char **v = s_byte_tokens(4, &n);
	static const char *const merges[] = {
		"a b", "ab c", "nospace", "", " x", "a b c", "zz yy", "\xc4\xa0 a",
	};

	v[256] = strdup("ab");
	v[257] = strdup("abc");
	v[258] = strdup("");     /* empty token text */
	v[259] = strdup("ab");   /* duplicate */
	ns_gguf_writer_set_str(w, "tokenizer.ggml.model", "gpt2");
	if (pre)
		ns_gguf_writer_set_str(w, "tokenizer.ggml.pre", pre);
	ns_gguf_writer_set_arr_str(w, "tokenizer.ggml.tokens", (const char *const *)v, n);
	if (with_merges)
		ns_gguf_writer_set_arr_str(w, "tokenizer.ggml.merges", merges, 8);
	ns_gguf_writer_set_u32(w, "tokenizer.ggml.eos_token_id", 4294967295u);
	s_free_tokens(v, n);
}

static void s_no_model(struct ns_gguf_writer *w) { ns_gguf_writer_set_str(w, "general.name", "x"); }
static void s_bert(struct ns_gguf_writer *w)
{
	ns_gguf_writer_set_str(w, "tokenizer.ggml.model", "bert");
}
static void s_no_merges(struct ns_gguf_writer *w) { s_bytes_vocab(w, "gpt-2", false); }
static void s_bad_pre(struct ns_gguf_writer *w) { s_bytes_vocab(w, "no-such-pre", true); }
static void s_good(struct ns_gguf_writer *w) { s_bytes_vocab(w, "gpt-4o", true); }
static void s_tokens_not_str(struct ns_gguf_writer *w)
{
	int32_t v[3] = { 1, 2, 3 };

	ns_gguf_writer_set_str(w, "tokenizer.ggml.model", "llama");
	ns_gguf_writer_set_arr(w, "tokenizer.ggml.tokens", NS_GGUF_I32, v, 3);
}
static void s_empty_tokens(struct ns_gguf_writer *w)
{
	ns_gguf_writer_set_str(w, "tokenizer.ggml.model", "llama");
	ns_gguf_writer_set_arr_str(w, "tokenizer.ggml.tokens", NULL, 0);
}
static void s_short_scores(struct ns_gguf_writer *w)
{
	static const char *const tok[] = { "<unk>", "<s>", "</s>", "a" };
	float sc[2] = { 0, 0 };

	ns_gguf_writer_set_str(w, "tokenizer.ggml.model", "llama");
	ns_gguf_writer_set_arr_str(w, "tokenizer.ggml.tokens", tok, 4);
	ns_gguf_writer_set_arr(w, "tokenizer.ggml.scores", NS_GGUF_F32, sc, 2);
}
static void s_bad_types(struct ns_gguf_writer *w)
{
	static const char *const tok[] = { "<unk>", "<s>", "</s>", "a" };
	float ty[4] = { 1, 1, 1, 1 };

	ns_gguf_writer_set_str(w, "tokenizer.ggml.model", "llama");
	ns_gguf_writer_set_arr_str(w, "tokenizer.ggml.tokens", tok, 4);
	ns_gguf_writer_set_arr(w, "tokenizer.ggml.token_type", NS_GGUF_F32, ty, 4);
}
static void s_spm_no_bos(struct ns_gguf_writer *w)
{
	static const char *const tok[] = { "<unk>" }; /* default BOS 1 is out of range */

	ns_gguf_writer_set_str(w, "tokenizer.ggml.model", "llama");
	ns_gguf_writer_set_arr_str(w, "tokenizer.ggml.tokens", tok, 1);
}

static bool s_valid_utf8(const char *s, size_t n)
{
	for (size_t i = 0; i < n;) {
		uint8_t c = (uint8_t)s[i];
		size_t l = c < 0x80 ? 1 : (c & 0xe0) == 0xc0 ? 2 : (c & 0xf0) == 0xe0 ? 3 :
			   (c & 0xf8) == 0xf0 ? 4 : 0;

		if (!l || i + l > n)
			return false;
		for (size_t k = 1; k < l; k++)
			if (((uint8_t)s[i + k] & 0xc0) != 0x80)
				return false;
		i += l;
	}
	return true;
}

static void s_roundtrip(const struct ns_tok *t)
{
	uint64_t x = 0x9e3779b97f4a7c15ull;
	size_t bad = 0, bad_chunks = 0;

	for (int iter = 0; iter < 2000; iter++) {
		char text[64], *back = NULL;
		size_t len = (size_t)(iter % 64), n = 0, blen = 0, k = 0;
		int32_t *ids = NULL;
		struct ns_detok *d = ns_detok_new(t, false, true);
		char acc[256];

		for (size_t i = 0; i < len; i++) {
			x ^= x << 13;
			x ^= x >> 7;
			x ^= x << 17;
			/* mix ASCII, UTF-8 lead/continuation bytes and a few whole characters */
			static const char mix[] = "ab c\xc3\xa9\xe2\x82\xac\xf0\x9f\x98\x80 \n\t1";

			text[i] = iter & 1 ? (char)(x & 0xff) : mix[x % 16];
		}
		if (ns_tok_encode(t, text, len, false, false, &ids, &n) ||
		    ns_tok_detokenize(t, ids, n, false, false, &back, &blen) || blen != len ||
		    memcmp(back, text, len)) {
			bad++;
		}
		for (size_t i = 0; d && i < n; i++) {
			const char *p;
			size_t l;

			ns_detok_feed(d, ids[i], &p, &l);
			if (s_valid_utf8(text, len) && !s_valid_utf8(p, l))
				bad_chunks++;
			memcpy(acc + k, p, l);
			k += l;
		}
		if (d) {
			const char *p;
			size_t l;

			ns_detok_flush(d, &p, &l);
			memcpy(acc + k, p, l);
			k += l;
		}
		if (!d || k != len || memcmp(acc, text, len))
			bad++;
		ns_detok_destroy(&d);
		free(ids);
		free(back);
	}
	if (bad || bad_chunks) {
		fprintf(stderr, "FAIL random round trip: %zu bad strings, %zu split characters\n",
			bad, bad_chunks);
		s_fails++;
	} else {
		printf("ok   2000 random byte strings round-trip (whole and streamed)\n");
	}
}

int main(void)
{
	struct ns_tok *t;
	const char *tmp = getenv("TMPDIR");

	snprintf(s_dir, sizeof(s_dir), "%s/nstok-XXXXXX", tmp && *tmp ? tmp : "/tmp");
	if (!mkdtemp(s_dir)) {
		perror("mkdtemp");
		return 1;
	}
	s_try("no-model", s_no_model, false);
	s_try("bert", s_bert, false);
	s_try("gpt2-no-merges", s_no_merges, false);
	s_try("unknown-pre", s_bad_pre, false);
	s_try("tokens-not-strings", s_tokens_not_str, false);
	s_try("no-tokens", s_empty_tokens, false);
	s_try("short-scores", s_short_scores, false);
	s_try("float-token-types", s_bad_types, false);
	s_try("spm-bos-out-of-range", s_spm_no_bos, false);
	t = s_try("odd-merges", s_good, true);
	if (t) {
		int32_t *ids = NULL;
		size_t n = 0;

		/* "abc" merges a+b then ab+c; eos id out of range is ignored */
		if (ns_tok_encode(t, "abc", 3, true, false, &ids, &n) || n != 1 || ids[0] != 257 ||
		    ns_tok_eos(t) != -1) {
			fprintf(stderr, "FAIL odd-merges: \"abc\" -> %zu ids\n", n);
			s_fails++;
		}
		free(ids);
		s_roundtrip(t);
		ns_tok_destroy(&t);
	}
	rmdir(s_dir);
	printf("%s\n", s_fails ? "FAIL" : "PASS");
	return s_fails ? 1 : 0;
}
