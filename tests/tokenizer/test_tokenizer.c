/* test_tokenizer - tokenizer and detokenizer against the oracle goldens.
 *
 * For every vocabulary with goldens (../shared/oracle/vocab*, models/stories260K):
 *  - ids: each case's text tokenized with its add_special/parse_special must equal the
 *    model's own tokenizer's ids where the case has them (ids_hf, ids_tiktoken), else
 *    llama.cpp's ids;
 *  - detok: llama.cpp's ids detokenized (remove_special=false, unparse=parse_special) must
 *    equal detok (or detok_hex);
 *  - streaming: the ids fed one by one to the streaming detokenizer give the same bytes
 *    (for vocabularies without space clean-up).
 * Plus llama.cpp's own tokenizer test pairs (HF reference ids) where we have the vocabulary.
 * Exit 0 pass, 1 fail, 77 oracle missing. */
#include <errno.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "gguf.h"
#include "gguf_write.h"
#include "json_min.h"
#include "lcpp_cases.h"
#include "ns_test.h"
#include "ns_util.h"
#include "tokenizer.h"

struct vocab_case {
	const char *name;
	const char *gguf;
	const char *jsonl;
};

static const struct vocab_case s_vocabs[] = {
	{ "gpt-2", "vocab/ggml-vocab-gpt-2.gguf", "vocab/gpt-2.jsonl" },
	{ "llama-spm", "vocab/ggml-vocab-llama-spm.gguf", "vocab/llama-spm.jsonl" },
	{ "phi-3", "vocab/ggml-vocab-phi-3.gguf", "vocab/phi-3.jsonl" },
	{ "stories260K", "models/stories260K.gguf", "vocab/stories260K.jsonl" },
	{ "hf-qwen3", "vocab-hf/hf-qwen3-vocab.gguf", "vocab-hf/hf-qwen3.jsonl" },
	{ "hf-gptoss", "vocab-hf/hf-gptoss-vocab.gguf", "vocab-hf/hf-gptoss.jsonl" },
	{ "hf-llama3", "vocab-hf/hf-llama3-vocab.gguf", "vocab-hf/hf-llama3.jsonl" },
};

/* llama.cpp test .inp/.out pairs and the vocabulary that matches them */
static const struct vocab_case s_lcpp[] = {
	{ "gpt-2", "vocab/ggml-vocab-gpt-2.gguf", "ggml-vocab-gpt-2.gguf" },
	{ "llama-spm", "vocab/ggml-vocab-llama-spm.gguf", "ggml-vocab-llama-spm.gguf" },
	{ "phi-3", "vocab/ggml-vocab-phi-3.gguf", "ggml-vocab-phi-3.gguf" },
	{ "qwen2", "vocab-hf/hf-qwen3-vocab.gguf", "ggml-vocab-qwen2.gguf" },
	{ "llama-bpe", "vocab-hf/hf-llama3-vocab.gguf", "ggml-vocab-llama-bpe.gguf" },
	/* the Qwen3 vocabulary with the Qwen3.5 pre-tokenizer (written to a temporary copy) */
	{ "qwen35", "vocab-hf/hf-qwen3-vocab.gguf#qwen35", "ggml-vocab-qwen35.gguf" },
};

static int s_verbose;

/* Copy of GGUF src with tokenizer.ggml.pre replaced, written to dst. */
static int s_copy_with_pre(const char *src, const char *dst, const char *pre, char *err,
			   size_t errlen)
{
	struct ns_gguf *g = NULL;
	struct ns_gguf_writer *w;
	int rc;

	if ((rc = ns_gguf_open(src, &g, err, errlen)))
		return rc;
	w = ns_gguf_writer_new(g->alignment);
	for (uint64_t i = 0; w && i < g->n_kv; i++)
		if (strcmp(g->kv[i].key.s, "tokenizer.ggml.pre"))
			ns_gguf_writer_set_value(w, g->kv[i].key.s, &g->kv[i].value);
	rc = w ? ns_gguf_writer_set_str(w, "tokenizer.ggml.pre", pre) : -1;
	if (!rc)
		rc = ns_gguf_writer_write_file(w, dst, err, errlen);
	ns_gguf_writer_destroy(&w);
	ns_gguf_close(&g);
	return rc;
}

/* Load oracle file rel ("file#pre" loads a copy with tokenizer.ggml.pre = pre). */
static struct ns_tok *s_load(const char *rel, double *ms)
{
	char path[1024], err[NS_ERR_LEN], tmp[512] = "";
	struct ns_gguf *g = NULL;
	struct ns_tok *t;
	uint64_t t0 = ns_now_ns();
	const char *hash = strchr(rel, '#');

	ns_test_oracle_path(path, sizeof(path), rel);
	if (hash) {
		const char *dir = getenv("TMPDIR");

		path[strlen(path) - strlen(hash)] = '\0';
		snprintf(tmp, sizeof(tmp), "%.400s/nstok-pre-%d.gguf", dir && *dir ? dir : "/tmp",
			 (int)getpid());
		if (s_copy_with_pre(path, tmp, hash + 1, err, sizeof(err))) {
			fprintf(stderr, "FAIL %s: %s\n", rel, err);
			unlink(tmp);
			return NULL;
		}
		snprintf(path, sizeof(path), "%s", tmp);
	}
	if (ns_gguf_open(path, &g, err, sizeof(err))) {
		if (tmp[0])
			unlink(tmp);
		fprintf(stderr, "FAIL %s: %s\n", rel, err);
		return NULL;
	}
	t = ns_tok_new(g, err, sizeof(err));
	*ms = (double)(ns_now_ns() - t0) / 1e6;
	ns_gguf_close(&g);
	if (tmp[0])
		unlink(tmp);
	if (!t)
		fprintf(stderr, "FAIL %s: %s\n", rel, err);
	return t;
}

static void s_print_ids(const char *what, const int32_t *v, size_t n)
{
	fprintf(stderr, "    %s:", what);
	for (size_t i = 0; i < n && i < 64; i++)
		fprintf(stderr, " %d", v[i]);
	fprintf(stderr, n > 64 ? " ...\n" : "\n");
}

static int s_json_ids(const struct jm *arr, int32_t **out, size_t *n)
{
	size_t i = 0;

	*out = malloc((arr->n + 1) * sizeof(**out));
	if (!*out)
		return -ENOMEM;
	for (const struct jm *k = arr->kid; k; k = k->next)
		(*out)[i++] = (int32_t)k->num;
	*n = i;
	return 0;
}

static int s_unhex(const char *hex, char **out, size_t *n)
{
	size_t l = strlen(hex) / 2;

	*out = malloc(l + 1);
	if (!*out)
		return -ENOMEM;
	for (size_t i = 0; i < l; i++) {
		unsigned v;

		if (sscanf(hex + 2 * i, "%2x", &v) != 1)
			return -EINVAL;
		(*out)[i] = (char)v;
	}
	*n = l;
	return 0;
}

/* Returns the number of failures of this vocabulary. */
static int s_check_vocab(const struct vocab_case *vc, double *load_ms)
{
	char path[1024], err[256];
	size_t flen = 0, n_cases = 0, n_ref = 0, n_dev = 0, n_ids_bad = 0, n_detok_bad = 0,
	       n_stream_bad = 0;
	struct ns_tok *t = s_load(vc->gguf, load_ms);
	char *buf, *line, *save = NULL;

	if (!t)
		return 1;
	buf = ns_test_read_file(ns_test_oracle_path(path, sizeof(path), vc->jsonl), &flen);
	if (!buf) {
		fprintf(stderr, "FAIL cannot read %s\n", path);
		ns_tok_destroy(&t);
		return 1;
	}
	for (line = strtok_r(buf, "\n", &save); line; line = strtok_r(NULL, "\n", &save)) {
		struct jm *c = jm_parse(line, strlen(line), err, sizeof(err));
		const struct jm *text, *ids_j, *ref_j, *detok_j, *hex_j;
		int32_t *want = NULL, *ref = NULL, *got = NULL;
		size_t nwant = 0, nref = 0, ngot = 0, dlen = 0, elen = 0;
		bool add_special, parse_special;
		char *dtext = NULL, *exp = NULL;

		if (!c) {
			fprintf(stderr, "FAIL %s: %s\n", vc->jsonl, err);
			n_ids_bad++;
			continue;
		}
		n_cases++;
		text = jm_get(c, "text");
		ids_j = jm_get(c, "ids");
		ref_j = jm_get(c, "ids_hf");
		if (!ref_j)
			ref_j = jm_get(c, "ids_tiktoken");
		add_special = jm_get(c, "add_special")->b;
		parse_special = jm_get(c, "parse_special")->b;
		s_json_ids(ids_j, &want, &nwant);
		if (ref_j && ref_j->type == JM_ARR) {
			s_json_ids(ref_j, &ref, &nref);
			n_ref++;
			if (nref != nwant || memcmp(ref, want, nref * sizeof(*ref)))
				n_dev++;
		} else {
			ref = want;
			nref = nwant;
		}
		if (ns_tok_encode(t, text->str, text->len, add_special, parse_special, &got,
				  &ngot)) {
			fprintf(stderr, "FAIL %s: encode error\n", vc->name);
			n_ids_bad++;
		} else if (ngot != nref || memcmp(got, ref, ngot * sizeof(*got))) {
			n_ids_bad++;
			if (s_verbose || n_ids_bad <= 5) {
				fprintf(stderr, "  %s ids mismatch (add_special=%d parse_special=%d): "
					"\"%.*s\"\n", vc->name, add_special, parse_special,
					(int)(text->len > 200 ? 200 : text->len), text->str);
				s_print_ids("want", ref, nref);
				s_print_ids("got ", got, ngot);
			}
		}
		/* detokenize llama.cpp's ids */
		detok_j = jm_get(c, "detok");
		hex_j = jm_get(c, "detok_hex");
		if (detok_j && detok_j->type == JM_STR) {
			exp = malloc(detok_j->len + 1);
			memcpy(exp, detok_j->str, detok_j->len);
			elen = detok_j->len;
		} else if (hex_j && hex_j->type == JM_STR) {
			s_unhex(hex_j->str, &exp, &elen);
		}
		if (ns_tok_detokenize(t, want, nwant, false, parse_special, &dtext, &dlen) ||
		    !exp || dlen != elen || memcmp(dtext, exp, dlen)) {
			n_detok_bad++;
			if (s_verbose || n_detok_bad <= 5)
				fprintf(stderr, "  %s detok mismatch: want \"%.*s\" got \"%.*s\"\n",
					vc->name, (int)elen, exp ? exp : "", (int)dlen,
					dtext ? dtext : "");
		}
		/* streaming detokenizer gives the same bytes (no clean-up pass there) */
		if (exp && strcmp(vc->name, "gpt-2") && strcmp(vc->name, "hf-llama3")) {
			struct ns_detok *d = ns_detok_new(t, parse_special, true);
			char *acc = malloc(elen + 64 * nwant + 16);
			size_t k = 0;
			const char *p;
			size_t l;

			for (size_t i = 0; d && acc && i < nwant; i++) {
				if (ns_detok_feed(d, want[i], &p, &l))
					break;
				/* every chunk ends on a character boundary unless bytes are invalid */
				memcpy(acc + k, p, l);
				k += l;
			}
			if (d && acc && !ns_detok_flush(d, &p, &l)) {
				memcpy(acc + k, p, l);
				k += l;
			}
			if (!acc || k != elen || memcmp(acc, exp, k)) {
				n_stream_bad++;
				if (s_verbose || n_stream_bad <= 3)
					fprintf(stderr, "  %s stream mismatch: \"%.*s\"\n", vc->name,
						(int)k, acc ? acc : "");
			}
			free(acc);
			ns_detok_destroy(&d);
		}
		if (ref != want)
			free(ref);
		free(want);
		free(got);
		free(dtext);
		free(exp);
		jm_free(c);
	}
	printf("%-12s %4zu cases: %zu ids mismatches, %zu detok mismatches, %zu stream mismatches;"
	       " %zu cases carry the model tokenizer's ids (%zu differ from llama.cpp, followed "
	       "the model's); load %.1f ms\n",
	       vc->name, n_cases, n_ids_bad, n_detok_bad, n_stream_bad, n_ref, n_dev, *load_ms);
	free(buf);
	ns_tok_destroy(&t);
	return n_cases == 0 || n_ids_bad || n_detok_bad || n_stream_bad;
}

/* llama.cpp's test-tokenizer-0 pairs (lcpp_cases.h). */
static int s_check_lcpp(const struct vocab_case *vc)
{
	char path[1024];
	size_t n_cases = 0, n_bad = 0, tl, nwant;
	double ms;
	struct ns_tok *t = s_load(vc->gguf, &ms);
	struct lcpp_cases lc;
	int32_t want[4096];
	const char *ip;

	if (!t)
		return 1;
	if (!lcpp_cases_open(&lc, vc->jsonl, path, sizeof(path))) {
		fprintf(stderr, "FAIL cannot read %s\n", path);
		ns_tok_destroy(&t);
		return 1;
	}
	while (lcpp_cases_next(&lc, &ip, &tl, want, &nwant, 4096)) {
		int32_t *got = NULL;
		size_t ngot = 0;

		n_cases++;
		if (ns_tok_encode(t, ip, tl, false, false, &got, &ngot) || ngot != nwant ||
		    memcmp(got, want, ngot * sizeof(*got))) {
			n_bad++;
			fprintf(stderr, "  %s (llama.cpp test) mismatch: \"%.*s\"\n", vc->name,
				(int)tl, ip);
			s_print_ids("want", want, nwant);
			s_print_ids("got ", got, ngot);
		}
		free(got);
	}
	printf("%-12s %4zu llama.cpp test cases (HF reference ids): %zu mismatches\n", vc->name,
	       n_cases, n_bad);
	lcpp_cases_close(&lc);
	ns_tok_destroy(&t);
	return n_bad != 0 || n_cases == 0;
}

/* End-of-turn and end-of-generation tokens as llama.cpp derives them at load
 * (vocab-hf/README.md, from llama-tokenize's logs). */
static int s_check_eog(void)
{
	static const struct {
		const char *gguf;
		int32_t bos, eos, eot;
		int32_t eog[8];
	} want[] = {
		{ "vocab-hf/hf-qwen3-vocab.gguf", 151643, 151645, 151645,
		  { 128247, 151643, 151645, 151662, 151663, 151664, -1 } },
		{ "vocab-hf/hf-gptoss-vocab.gguf", 199998, 200002, 199999,
		  { 199999, 200002, 200012, -1 } },
		{ "vocab-hf/hf-llama3-vocab.gguf", 128000, 128001, 128009, { 128001, 128009, -1 } },
	};
	int fails = 0;

	for (size_t i = 0; i < NS_ARRAY_LEN(want); i++) {
		double ms;
		struct ns_tok *t = s_load(want[i].gguf, &ms);
		size_t n_eog = 0, n_want = 0;
		bool ok;

		if (!t) {
			fails++;
			continue;
		}
		ok = ns_tok_bos(t) == want[i].bos && ns_tok_eos(t) == want[i].eos &&
		     ns_tok_eot(t) == want[i].eot;
		for (size_t k = 0; want[i].eog[k] >= 0; k++, n_want++)
			ok = ok && ns_tok_is_eog(t, want[i].eog[k]);
		for (size_t id = 0; id < ns_tok_n_vocab(t); id++)
			n_eog += ns_tok_is_eog(t, (int32_t)id);
		ok = ok && n_eog == n_want;
		printf("%-12s bos/eos/eot %d/%d/%d, %zu EOG tokens: %s\n", want[i].gguf + 9,
		       ns_tok_bos(t), ns_tok_eos(t), ns_tok_eot(t), n_eog, ok ? "ok" : "MISMATCH");
		fails += !ok;
		ns_tok_destroy(&t);
	}
	return fails;
}

/* golden/stories260K__*.json: prompt_text -> tokens (BOS + llama_tokenize), token_pieces, and
 * greedy_text = the pieces of the generated greedy_tokens as a stream continuing the prompt. */
static int s_check_golden(void)
{
	static const char *const seqs[] = { "once", "park", "long" };
	int fails = 0;
	double ms;
	struct ns_tok *t = s_load("models/stories260K.gguf", &ms);

	for (size_t i = 0; t && i < NS_ARRAY_LEN(seqs); i++) {
		char rel[128], path[1024], err[256], acc[4096];
		size_t len = 0, ngot = 0, nwant = 0, ngen = 0, k = 0, pi = 0;
		char *buf;
		struct jm *g;
		int32_t *got = NULL, *want = NULL, *gen = NULL;
		const struct jm *text, *pieces, *gtext;
		struct ns_detok *d;
		const char *p;
		size_t l;
		bool ok = true;

		snprintf(rel, sizeof(rel), "golden/stories260K__%s.json", seqs[i]);
		buf = ns_test_read_file(ns_test_oracle_path(path, sizeof(path), rel), &len);
		g = buf ? jm_parse(buf, len, err, sizeof(err)) : NULL;
		if (!g) {
			fprintf(stderr, "FAIL cannot read %s\n", path);
			free(buf);
			fails++;
			continue;
		}
		text = jm_get(g, "prompt_text");
		pieces = jm_get(g, "token_pieces");
		gtext = jm_get(g, "greedy_text");
		s_json_ids(jm_get(g, "tokens"), &want, &nwant);
		s_json_ids(jm_get(g, "greedy_tokens"), &gen, &ngen);
		if (ns_tok_encode(t, text->str, text->len, true, false, &got, &ngot) ||
		    ngot != nwant || memcmp(got, want, ngot * sizeof(*got)))
			ok = false;
		for (const struct jm *pc = pieces->kid; ok && pc; pc = pc->next, pi++) {
			if (ns_tok_piece(t, want[pi], true, &p, &l) || l != pc->len ||
			    memcmp(p, pc->str, l))
				ok = false;
		}
		d = ns_detok_new(t, false, false);
		for (size_t j = 0; d && j < ngen && ok; j++) {
			if (ns_detok_feed(d, gen[j], &p, &l) || k + l > sizeof(acc)) {
				ok = false;
			} else {
				memcpy(acc + k, p, l);
				k += l;
			}
		}
		ok = ok && d && k == gtext->len && !memcmp(acc, gtext->str, k);
		printf("%-12s golden %-4s: prompt ids, pieces and streamed greedy text: %s\n",
		       "stories260K", seqs[i], ok ? "ok" : "MISMATCH");
		fails += !ok;
		ns_detok_destroy(&d);
		free(got);
		free(want);
		free(gen);
		jm_free(g);
		free(buf);
	}
	ns_tok_destroy(&t);
	return fails;
}

/* hf/tokenizer/tokenizer_tests.json: ids from Hugging Face tokenizers (tokenizer.json of the
 * tiny HF models) against the same vocabulary as converted into hf/qwen3_5's GGUF. */
static int s_check_hf_tiny(void)
{
	char path[1024], err[256];
	size_t len = 0, n_cases = 0, n_bad = 0;
	double ms;
	struct ns_tok *t = s_load("hf/qwen3_5/gguf/qwen3_5-f32.gguf", &ms);
	char *buf = ns_test_read_file(ns_test_oracle_path(path, sizeof(path),
							  "hf/tokenizer/tokenizer_tests.json"), &len);
	struct jm *root = buf ? jm_parse(buf, len, err, sizeof(err)) : NULL;
	const struct jm *cases = jm_get(root, "cases");

	for (const struct jm *c = cases ? cases->kid : NULL; t && c; c = c->next) {
		const struct jm *text = jm_get(c, "text"), *dec = jm_get(c, "decoded");
		int32_t *want = NULL, *got = NULL;
		size_t nwant = 0, ngot = 0, dlen = 0;
		char *d = NULL;

		n_cases++;
		s_json_ids(jm_get(c, "ids"), &want, &nwant);
		if (ns_tok_encode(t, text->str, text->len, false, false, &got, &ngot) ||
		    ngot != nwant || memcmp(got, want, ngot * sizeof(*got)) ||
		    ns_tok_detokenize(t, want, nwant, false, false, &d, &dlen) ||
		    dlen != dec->len || memcmp(d, dec->str, dlen)) {
			n_bad++;
			fprintf(stderr, "  hf-tiny mismatch: \"%s\"\n", text->str);
			s_print_ids("want", want, nwant);
			s_print_ids("got ", got, ngot);
		}
		free(want);
		free(got);
		free(d);
	}
	printf("%-12s %4zu HF tokenizers cases (tokenizer_tests.json): %zu mismatches\n", "hf-tiny",
	       n_cases, n_bad);
	jm_free(root);
	free(buf);
	ns_tok_destroy(&t);
	return n_bad != 0 || n_cases == 0; /* no cases: the vocabulary or file failed to load */
}

int main(int argc, char **argv)
{
	int fails = 0;
	double ms, max_ms = 0;
	const char *max_name = "";

	s_verbose = argc > 1 && !strcmp(argv[1], "-v");
	ns_test_require_oracle();
	for (size_t i = 0; i < NS_ARRAY_LEN(s_vocabs); i++) {
		ms = 0;
		fails += s_check_vocab(&s_vocabs[i], &ms);
		if (ms > max_ms) {
			max_ms = ms;
			max_name = s_vocabs[i].name;
		}
	}
	for (size_t i = 0; i < NS_ARRAY_LEN(s_lcpp); i++)
		fails += s_check_lcpp(&s_lcpp[i]);
	fails += s_check_hf_tiny();
	fails += s_check_eog();
	fails += s_check_golden();
	printf("slowest load: %s %.1f ms (GGUF parse + tokenizer build)\n", max_name, max_ms);
	printf("%s\n", fails ? "FAIL" : "PASS");
	return fails ? 1 : 0;
}
