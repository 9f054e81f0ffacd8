/* nsctl pull REPO[:QUANT|/FILE] [-o DIR] [--dry-run] [--quiet]: a model from the Hugging Face
 * hub into its cache (or DIR), as `hf download` would put it there.
 *
 * 1. the repo's listing at main (commit, files, sizes, checksums)
 * 2. the files the name means (hub_select.c: a GGUF quantization with all its shards, a
 *    safetensors checkpoint, or one file)
 * 3. what is already there (reused), partly there (continued), and whether the rest fits
 * 4. each file fetched, verified against the hub's checksum, given its name
 * 5. refs/main, and the model's path on stdout (what run/info/bench open).
 * HF_ENDPOINT, HF_TOKEN (else the token file `hf auth login` writes), HF_HUB_CACHE / HF_HOME
 * and HF_HUB_OFFLINE are read as huggingface_hub reads them. */
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <sys/statvfs.h>
#include <unistd.h>

#include "cmd_opt.h"
#include "commands.h"
#include "hub.h"
#include "ns_util.h"

#define S_INDEX_MAX (64u << 20) /* a safetensors index, at most */

struct s_opts {
	const char *name, *out_dir;
	bool dry_run, quiet;
};

static void s_usage(FILE *f)
{
	fprintf(f,
		"usage: nsctl pull REPO[:QUANT|/FILE] [-o DIR] [--dry-run] [--quiet]\n"
		"  REPO:QUANT      a GGUF quantization, all shards of a split one\n"
		"                  (e.g. unsloth/Qwen3-8B-GGUF:Q4_K_M); REPO alone: Q4_K_M, else Q8_0,\n"
		"                  else the first GGUF; a repo without GGUF: its safetensors\n"
		"                  checkpoint (config, tokenizer, chat template, weights)\n"
		"  REPO/FILE       one file of the repo (a split GGUF's shard: all of them)\n"
		"  -o, --output, --local-dir DIR  files go to DIR/<path> (as hf download\n"
		"                  --local-dir) instead of\n"
		"                  the Hugging Face cache (HF_HUB_CACHE, HF_HOME/hub,\n"
		"                  ~/.cache/huggingface/hub)\n"
		"  --dry-run       list the files, their sizes and what is already there; fetch nothing\n"
		"  -q, --quiet     no progress and no per-file lines (errors still print)\n"
		"Files already there (also from hf download) are reused; an interrupted pull continues\n"
		"where it stopped; every file is checked against the hub's sha256 before it gets its\n"
		"name. HF_ENDPOINT and HF_TOKEN are honoured. stdout: the model's path.\n");
}

enum { O_HELP = 1, O_DRY_RUN, O_QUIET, O_OUT };

static const struct ns_opt s_opts[] = {
	NSCTL_OPT_HELP(O_HELP),
	{ "dry-run", NULL, NS_OPT_SWITCH, O_DRY_RUN },
	{ "quiet", "-q", NS_OPT_SWITCH, O_QUIET },
	{ "output", "-o --local-dir", NS_OPT_VALUE, O_OUT },
};

static int s_on_opt(void *user, const struct ns_opt *opt, const char *f, const char *v)
{
	struct s_opts *o = user;

	switch (opt ? opt->id : 0) {
	case O_HELP:
		s_usage(stdout);
		exit(0);
	case O_DRY_RUN:
		o->dry_run = true;
		return 0;
	case O_QUIET:
		o->quiet = true;
		return 0;
	case O_OUT:
		if (!v[0]) {
			fprintf(stderr, "nsctl pull: %s needs a directory\n", f);
			return -EINVAL;
		}
		o->out_dir = v;
		return 0;
	}
	if (o->name) {
		fprintf(stderr, "nsctl pull: one model at a time ('%s' and '%s')\n", o->name, v);
		return -EINVAL;
	}
	o->name = v;
	return 0;
}

static int s_parse(struct s_opts *o, int argc, char **argv)
{
	memset(o, 0, sizeof(*o));
	if (ns_opt_parse("nsctl pull", s_opts, NS_ARRAY_LEN(s_opts), argc, argv, s_on_opt, o))
		return -1;
	if (!o->name) {
		fprintf(stderr, "nsctl pull: no model named (nsctl pull REPO[:QUANT|/FILE])\n");
		return -1;
	}
	return 0;
}

/* Bad input and refusals are the user's to fix (2); the network, the server and the disk (1). */
static int s_exit_code(int rc)
{
	return rc == -EINVAL || rc == -ENOENT || rc == -EACCES ? 2 : 1;
}

/* HF_TOKEN, else the file `hf auth login` keeps (HF_TOKEN_PATH, $HF_HOME/token,
 * ~/.cache/huggingface/token), first line. NULL when none. */
static char *s_token(void)
{
	const char *env = getenv("HF_TOKEN"), *home = getenv("HF_HOME");
	const char *tp = getenv("HF_TOKEN_PATH"), *user = getenv("HOME");
	char path[PATH_MAX], line[1024];
	FILE *f;
	size_t n;

	if (env && *env)
		return strdup(env);
	if (tp && *tp)
		snprintf(path, sizeof(path), "%s", tp);
	else if (home && *home)
		snprintf(path, sizeof(path), "%s/token", home);
	else if (user && *user)
		snprintf(path, sizeof(path), "%s/.cache/huggingface/token", user);
	else
		return NULL;
	f = fopen(path, "r");
	if (!f)
		return NULL;
	if (!fgets(line, sizeof(line), f))
		line[0] = '\0';
	fclose(f);
	n = strcspn(line, "\r\n");
	line[n] = '\0';
	return n ? strdup(line) : NULL;
}

static bool s_offline(void)
{
	const char *v = getenv("HF_HUB_OFFLINE");

	return v && (!strcasecmp(v, "1") || !strcasecmp(v, "true") || !strcasecmp(v, "yes") ||
		     !strcasecmp(v, "on"));
}

/* What the pick holds and what of it is there: one row per file. */
struct s_row {
	const struct hub_file *f;
	bool present;
	uint64_t partial;
};

struct s_pull {
	struct s_opts o;
	struct hub_ref ref;
	struct hub_client *client;
	struct hub_listing list;
	struct hub_pick pick;
	struct hub_dest dest;
	struct s_row *rows;
	uint64_t total, to_fetch;
	char root[PATH_MAX];
	char err[NS_ERR_LEN];
};

/* A safetensors checkpoint's shards come from its index (read over the network: it is small
 * and the dry run writes nothing). */
static int s_add_index_shards(struct s_pull *p)
{
	char *json = NULL;
	size_t len = 0;
	int rc;

	rc = hub_fetch_text(p->client, p->ref.repo, p->list.commit,
			    &p->list.files[p->pick.index_file], S_INDEX_MAX, &json, &len, p->err,
			    sizeof(p->err));
	if (!rc)
		rc = hub_pick_add_shards(&p->list, &p->pick, json, len, p->err, sizeof(p->err));
	free(json);
	return rc;
}

/* Which files are already there, and the bytes still to come. */
static int s_survey(struct s_pull *p)
{
	p->rows = calloc(p->pick.n, sizeof(*p->rows));
	if (!p->rows) {
		ns_errf(p->err, sizeof(p->err), "out of memory");
		return -ENOMEM;
	}
	for (size_t i = 0; i < p->pick.n; i++) {
		struct s_row *r = &p->rows[i];
		struct hub_paths paths;
		int rc;

		r->f = &p->list.files[p->pick.idx[i]];
		if (ns_add_u64_overflow(p->total, r->f->size, &p->total))
			p->total = UINT64_MAX;
		/* the listing's checksum names the blob; without one, resolve will say it */
		if (hub_oid_valid(r->f->oid)) {
			rc = hub_dest_paths(&p->dest, r->f->path, r->f->oid, &paths, p->err,
					    sizeof(p->err));
			if (!rc)
				rc = hub_dest_lookup(&p->dest, &paths, r->f->oid, r->f->size, true,
						     &r->present, &r->partial, p->err, sizeof(p->err));
			if (rc)
				return rc;
		}
		if (!r->present && r->f->size > r->partial &&
		    ns_add_u64_overflow(p->to_fetch, r->f->size - r->partial, &p->to_fetch))
			p->to_fetch = UINT64_MAX;
	}
	return 0;
}

static void s_print_dry_run(const struct s_pull *p)
{
	char a[32], b[32];

	printf("%s @ %s -> %s\n", p->ref.repo, p->list.commit, p->dest.dir);
	for (size_t i = 0; i < p->pick.n; i++) {
		const struct s_row *r = &p->rows[i];

		printf("  %-56s %12s  %15llu bytes  ", r->f->path,
		       r->f->has_size ? ns_format_bytes(r->f->size, a, sizeof(a)) : "?",
		       (unsigned long long)r->f->size);
		if (r->present)
			printf("there\n");
		else if (r->partial)
			printf("partial: %s there, to continue\n",
			       ns_format_bytes(r->partial, b, sizeof(b)));
		else
			printf("to fetch\n");
	}
	printf("%zu file%s, %s; %s to fetch\n", p->pick.n, p->pick.n == 1 ? "" : "s",
	       ns_format_bytes(p->total, a, sizeof(a)), ns_format_bytes(p->to_fetch, b, sizeof(b)));
}

/* Refused before a byte is written when the rest cannot fit (the destination exists by now). */
static int s_check_space(struct s_pull *p)
{
	uint64_t avail = 0;
	char need[32], have[32];
	struct statvfs vfs;

	if (statvfs(p->dest.dir, &vfs)) {
		int rc = -errno;

		ns_errf(p->err, sizeof(p->err), "cannot see the free space of %s: %s", p->dest.dir,
			strerror(errno));
		return rc;
	}
	if (ns_mul_u64_overflow(vfs.f_bavail, vfs.f_frsize, &avail))
		avail = UINT64_MAX;
	if (avail >= p->to_fetch)
		return 0;
	ns_errf(p->err, sizeof(p->err), "%s needs %s more in %s, which has %s free",
		p->o.name, ns_format_bytes(p->to_fetch, need, sizeof(need)), p->dest.dir,
		ns_format_bytes(avail, have, sizeof(have)));
	return -ENOSPC;
}

/* Where the files go exists and takes files: made now, so a bad -o fails before the
 * network is asked anything large. */
static int s_prepare_dest(struct s_pull *p)
{
	char probe[sizeof(p->dest.dir) + 32];
	int rc, fd;

	if ((rc = hub_mkdirs(p->dest.dir))) {
		ns_errf(p->err, sizeof(p->err), "cannot make %s: %s", p->dest.dir, strerror(-rc));
		return rc == -ENOENT || rc == -ENOTDIR || rc == -EACCES || rc == -EROFS ||
				       rc == -EPERM ? -EINVAL : rc;
	}
	snprintf(probe, sizeof(probe), "%s/.nsctl-pull-XXXXXX", p->dest.dir);
	fd = mkstemp(probe);
	if (fd < 0) {
		rc = -errno;
		ns_errf(p->err, sizeof(p->err), "cannot write in %s: %s", p->dest.dir,
			strerror(errno));
		return rc == -EACCES || rc == -EROFS || rc == -EPERM ? -EINVAL : rc;
	}
	close(fd);
	unlink(probe);
	return 0;
}

static int s_fetch_all(struct s_pull *p, char *model, size_t modellen)
{
	bool progress = !p->o.quiet && isatty(STDERR_FILENO);
	char a[32], b[32];

	/* what is about to happen, above the progress lines (a terminal only: scripts reading
	 * stderr get the per-file results and the errors) */
	if (progress)
		fprintf(stderr, "nsctl pull: %s @ %.12s: %zu file%s, %s (%s to fetch) into %s\n",
			p->ref.repo, p->list.commit, p->pick.n, p->pick.n == 1 ? "" : "s",
			ns_format_bytes(p->total, a, sizeof(a)),
			ns_format_bytes(p->to_fetch, b, sizeof(b)), p->dest.dir);
	for (size_t i = 0; i < p->pick.n; i++) {
		const struct hub_file *f = p->rows[i].f;
		char final[4096], rate[32];
		enum hub_fetched how;
		uint64_t fetched = 0, t0 = ns_now_ns();
		double secs;
		int rc;

		rc = hub_fetch_file(p->client, &p->dest, p->ref.repo, f, progress, &how, &fetched,
				    final, sizeof(final), p->err, sizeof(p->err));
		if (rc)
			return rc;
		if (p->pick.idx[i] == p->pick.primary)
			snprintf(model, modellen, "%s", final);
		if (p->o.quiet)
			continue;
		secs = (double)(ns_now_ns() - t0) / 1e9;
		ns_format_bytes(secs > 0 ? (uint64_t)((double)fetched / secs) : 0, rate, sizeof(rate));
		if (how == HUB_REUSED)
			fprintf(stderr, "  %s: there already (%s)\n", f->path,
				ns_format_bytes(f->size, a, sizeof(a)));
		else
			fprintf(stderr, "  %s: %s%s (%s in %.1f s, %s/s), sha256 checked\n", f->path,
				how == HUB_RESUMED ? "continued to " : "",
				ns_format_bytes(f->size, a, sizeof(a)),
				ns_format_bytes(fetched, b, sizeof(b)), secs, rate);
	}
	return 0;
}

static int s_run(struct s_pull *p)
{
	const char *endpoint = getenv("HF_ENDPOINT");
	char model[sizeof(p->dest.dir) + 64] = "";
	char *token = s_token();
	int rc;

	if (!endpoint || !*endpoint)
		endpoint = "https://huggingface.co";
	rc = hub_client_new(&p->client, endpoint, token, p->err, sizeof(p->err));
	free(token);
	if (rc)
		return rc;
	if ((rc = hub_list_repo(p->client, p->ref.repo, "main", &p->list, p->err, sizeof(p->err))))
		return rc;
	if ((rc = hub_pick_files(&p->list, &p->ref, &p->pick, p->err, sizeof(p->err))) ||
	    (p->pick.needs_index && (rc = s_add_index_shards(p))))
		return rc;
	rc = p->o.out_dir ?
		     hub_dest_local(&p->dest, p->o.out_dir, p->list.commit, p->err, sizeof(p->err)) :
		     hub_dest_cache(&p->dest, p->root, p->ref.repo, p->list.commit, p->err,
				    sizeof(p->err));
	if (rc || (rc = s_survey(p)))
		return rc;
	if (p->o.dry_run) {
		s_print_dry_run(p);
		return 0;
	}
	if ((rc = s_prepare_dest(p)) || (rc = s_check_space(p)) ||
	    (rc = s_fetch_all(p, model, sizeof(model))))
		return rc;
	if (!p->dest.local &&
	    (rc = hub_cache_write_ref(p->dest.dir, "main", p->list.commit, p->err, sizeof(p->err))))
		return rc;
	if (p->pick.kind == HUB_KIND_SAFETENSORS) /* a checkpoint opens as its folder */
		snprintf(model, sizeof(model), "%s%s%s", p->dest.dir, p->dest.local ? "" :
			 "/snapshots/", p->dest.local ? "" : p->list.commit);
	printf("%s\n", model);
	return 0;
}

int cmd_pull(int argc, char **argv)
{
	struct s_pull p;
	int rc;

	memset(&p, 0, sizeof(p));
	rc = s_parse(&p.o, argc, argv);
	if (rc)
		return rc > 0 ? 0 : 2;
	if (hub_ref_parse(p.o.name, &p.ref, p.err, sizeof(p.err))) {
		fprintf(stderr, "nsctl pull: %s\n", p.err);
		return 2;
	}
	if (s_offline()) {
		fprintf(stderr, "nsctl pull: HF_HUB_OFFLINE is set: nothing can be fetched\n");
		return 2;
	}
	if (!p.o.out_dir && (rc = hub_cache_root(p.root, sizeof(p.root), p.err, sizeof(p.err)))) {
		fprintf(stderr, "nsctl pull: %s\n", p.err);
		return 2;
	}
	rc = s_run(&p);
	if (rc)
		fprintf(stderr, "nsctl pull: %s\n", p.err);
	free(p.rows);
	hub_pick_free(&p.pick);
	hub_listing_free(&p.list);
	hub_client_free(&p.client);
	if (!rc && fflush(stdout)) {
		fprintf(stderr, "nsctl pull: cannot write output: %s\n", strerror(errno));
		return 1;
	}
	return rc ? s_exit_code(rc) : 0;
}
