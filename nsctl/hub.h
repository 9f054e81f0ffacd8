/* hub.h - models from the Hugging Face hub: what `nsctl pull` fetches and what `run`, `info`
 * and `bench` resolve REPO:QUANT to.
 *
 *   hub_ref.c      "org/name[:QUANT|/FILE]" parsed and checked
 *   hub_list.c     a repo's files: the hub's listing API, and the list it fills
 *   hub_select.c   which files of a repo make the model (llama.cpp's -hf selection rules)
 *   hub_cache.c    huggingface_hub's cache layout (models--ORG--NAME/{blobs,snapshots,refs})
 *                  and its --local-dir layout (-o DIR), the cache's directory from the env
 *   hub_hash.c     the hub's checksums: sha256 (LFS files) and git blob ids (small files)
 *   hub_http.c     libcurl: small answers, resolve's metadata (HEAD), ranged GETs
 *   hub_fetch.c    one file: reuse, resume, verify, give it its final name
 *   hub_model.c    MODEL arguments of the other commands: a path, or REPO:QUANT from the cache
 *
 * Functions return 0 or a negative errno with one line in err (NS_ERR_LEN bytes): -EINVAL
 * malformed input, -ENOENT no such repo/file/quant, -EACCES refused by the hub (401/403),
 * -EIO network or server failure, -EBADMSG a checksum or an answer that does not add up,
 * -ENOSPC/-EFBIG/-EROFS... the local disk. */
#ifndef NSCTL_HUB_H
#define NSCTL_HUB_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "ns_progress.h"

#define HUB_REPO_MAX 96     /* huggingface_hub's limit on a repo id */
#define HUB_QUANT_MAX 64
#define HUB_FILE_MAX 1024   /* a path inside a repo */
#define HUB_OID_MAX 64      /* sha256 in hex; git blob ids are 40 */
#define HUB_COMMIT_LEN 40

struct hub_client; /* hub_http.c */

/* ---- hub_ref.c ---- */

/* What the user named: a repo, and at most one of a quantization or a file inside it. */
struct hub_ref {
	char repo[HUB_REPO_MAX + 1];   /* "org/name" */
	char quant[HUB_QUANT_MAX + 1]; /* "Q4_K_M"; "" for none */
	char file[HUB_FILE_MAX + 1];   /* "sub/model.gguf"; "" for none */
};

/* Parse "org/name", "org/name:QUANT" or "org/name/path/in/repo". The repo id follows the hub's
 * rules (letters, digits, '_', and '.', '-' between them; one '/'; at most 96 characters), a
 * quant is [A-Za-z0-9_.-]+, a file has no empty, "." or ".." component. Returns 0 or -EINVAL. */
int hub_ref_parse(const char *text, struct hub_ref *r, char *err, size_t errlen);

/* A path inside a repo that stays inside it: no empty, "." or ".." component, no backslash
 * or control character, at most HUB_FILE_MAX bytes. */
bool hub_path_valid(const char *path);

/* "org/name" -> "models--org--name", the folder huggingface_hub gives the repo. */
int hub_repo_folder(const char *repo, char *out, size_t outlen);

/* ---- hub_list.c: a repo's files ---- */

struct hub_file {
	char *path;                 /* inside the repo, '/'-separated */
	uint64_t size;              /* bytes of the file itself (an LFS file's, not its pointer's) */
	bool has_size;
	char oid[HUB_OID_MAX + 1];  /* LFS: sha256; else the git blob id; "" unknown */
	bool lfs;
};

struct hub_listing {
	char commit[HUB_COMMIT_LEN + 1];
	struct hub_file *files;
	size_t n, cap;
};

/* Double an array's capacity (16 items at first), the product checked: 0 or -ENOMEM, the
 * array untouched on failure. */
int hub_grow(void **arr, size_t *cap, size_t item);
/* Append a file (path copied). Returns 0 or -ENOMEM. */
int hub_listing_add(struct hub_listing *l, const char *path, uint64_t size, bool has_size,
		    const char *oid, bool lfs);
/* Sort by path (byte order), so that the hub's listing and a cache's snapshot select alike. */
void hub_listing_sort(struct hub_listing *l);
void hub_listing_free(struct hub_listing *l);

/* GET /api/models/<repo>/revision/<rev>?blobs=true: the commit and every file with its size
 * and checksum. */
int hub_list_repo(struct hub_client *c, const char *repo, const char *rev, struct hub_listing *l,
		  char *err, size_t errlen);

/* ---- hub_select.c ---- */

/* A GGUF file name read as llama.cpp reads it: "dir/Name-Q4_K_M-00002-of-00003.gguf" ->
 * prefix "dir/Name-Q4_K_M", index 2, count 3, tag "Q4_K_M" (the last [-.][A-Za-z0-9_]+ of the
 * prefix, upper-cased). An unsplit file has index = count = 1. false when not *.gguf. */
struct hub_split {
	size_t prefix_len;
	unsigned index, count;
	char tag[HUB_QUANT_MAX + 1];
};
bool hub_gguf_split(const char *path, struct hub_split *s);

enum hub_kind {
	HUB_KIND_GGUF,        /* a GGUF model: one file or all shards of a split one */
	HUB_KIND_SAFETENSORS, /* config, tokenizer, chat template, weights (+ index) */
	HUB_KIND_FILE,        /* one named file that is not a GGUF model */
};

/* The files that make the model, as indices into a listing. */
struct hub_pick {
	enum hub_kind kind;
	size_t *idx;
	size_t n, cap;
	size_t primary;      /* what a command opens: the first shard, or the named file */
	bool needs_index;    /* safetensors with model.safetensors.index.json: shards come from it */
	size_t index_file;   /* listing index of that index file */
};

/* Choose the files for r among l (sorted): r->file exactly (then case-insensitively), with all
 * shards of a split GGUF; r->quant as llama.cpp's -hf repo:quant does (the first model GGUF,
 * not mmproj/imatrix/draft, whose path has QUANT followed by '.' or '-', case-insensitive,
 * skipping shards other than the first); no quant: Q4_K_M, else Q8_0, else the first model
 * GGUF; a repo without GGUF: a safetensors checkpoint. When nothing matches, err lists what
 * the repo has. Returns 0, -ENOENT or -ENOMEM. */
int hub_pick_files(const struct hub_listing *l, const struct hub_ref *r, struct hub_pick *p,
		   char *err, size_t errlen);

/* For a pick with needs_index: add the shards the index's weight_map names (json: the index
 * file's bytes). Returns 0, -EBADMSG (not an index, or it names a file not in l) or -ENOMEM. */
int hub_pick_add_shards(const struct hub_listing *l, struct hub_pick *p, const char *json,
			size_t len, char *err, size_t errlen);
void hub_pick_free(struct hub_pick *p);

/* ---- hub_cache.c ---- */

/* The hub cache directory as huggingface_hub finds it: HF_HUB_CACHE, HUGGINGFACE_HUB_CACHE,
 * $HF_HOME/hub, $XDG_CACHE_HOME/huggingface/hub, ~/.cache/huggingface/hub. */
int hub_cache_root(char *out, size_t outlen, char *err, size_t errlen);

/* Where files go: the cache (dir = <root>/models--ORG--NAME, blobs named by their checksum,
 * snapshots/<commit>/<path> symlinks into blobs, refs/main), or a --local-dir (dir = DIR,
 * files at DIR/<path>, their commit and checksum in DIR/.cache/huggingface/download/<path>.
 * metadata, as `hf download --local-dir` keeps them). */
struct hub_dest {
	bool local;
	char dir[4096];
	char locks[4096];  /* cache: <root>/.locks/models--ORG--NAME */
	char commit[HUB_COMMIT_LEN + 1];
};

/* The paths one file uses. */
struct hub_paths {
	char final[4096];   /* cache: the snapshot's symlink; local: DIR/<path> */
	char blob[4096];    /* cache: blobs/<oid>; local: = final */
	char partial[4096]; /* <blob>.incomplete; local: in .cache/huggingface/download/ */
	char lock[4096];    /* held while the file is written (huggingface_hub's lock file) */
	char meta[4096];    /* local: the .metadata file; cache: "" */
};

int hub_dest_cache(struct hub_dest *d, const char *root, const char *repo, const char *commit,
		   char *err, size_t errlen);
int hub_dest_local(struct hub_dest *d, const char *dir, const char *commit, char *err,
		   size_t errlen);
int hub_dest_paths(const struct hub_dest *d, const char *path, const char *oid,
		   struct hub_paths *p, char *err, size_t errlen);

/* Is the file there with this checksum? Cache: its snapshot link or its blob (then linked);
 * local: DIR/<path> with metadata naming oid, or whose content hashes to oid (then the
 * metadata is written). readonly: nothing is linked or written (a dry run). *partial: bytes
 * of an unfinished download to continue. Returns 0 with *present set, or a negative errno. */
int hub_dest_lookup(const struct hub_dest *d, const struct hub_paths *p, const char *oid,
		    uint64_t size, bool readonly, bool *present, uint64_t *partial, char *err,
		    size_t errlen);

/* A verified partial becomes the file: renamed to its blob and linked from the snapshot, or
 * renamed to DIR/<path> with its metadata. */
int hub_dest_finish(const struct hub_dest *d, const struct hub_paths *p, const char *oid,
		    char *err, size_t errlen);

/* mkdir -p; 0 or -errno. */
int hub_mkdirs(const char *dir);

/* refs/<name> of a cached repo: read (commit, 40 hex) or written atomically. */
int hub_cache_read_ref(const char *repo_dir, const char *name, char commit[HUB_COMMIT_LEN + 1]);
int hub_cache_write_ref(const char *repo_dir, const char *name, const char *commit, char *err,
			size_t errlen);

/* The files of snapshots/<commit> (recursively; symlinks followed for their size, their
 * target's name taken as oid). */
int hub_cache_snapshot(const char *repo_dir, const char *commit, struct hub_listing *l,
		       char *err, size_t errlen);

/* ---- hub_hash.c ---- */

/* A checksum in the hub's form: 64 hex digits are the sha256 of the content (LFS files), 40
 * the git blob id (sha1 of "blob <size>\0" + content). */
struct hub_hash;
int hub_hash_new(struct hub_hash **h, const char *oid, uint64_t size);
int hub_hash_update(struct hub_hash *h, const void *buf, size_t n);
/* Start over (a server that answered a range request with the whole file). */
int hub_hash_reset(struct hub_hash *h);
/* The digest in lowercase hex, compared with the oid case-insensitively: 0 equal, -EBADMSG. */
int hub_hash_check(struct hub_hash *h, const char *oid, char hex[HUB_OID_MAX + 1]);
void hub_hash_free(struct hub_hash **h);
bool hub_oid_valid(const char *oid);
/* Hash the first `bytes` bytes of fd from offset 0 into h. */
int hub_hash_fd(struct hub_hash *h, int fd, uint64_t bytes);

/* ---- hub_http.c ---- */

/* A client for endpoint (HF_ENDPOINT or https://huggingface.co) sending token (may be NULL)
 * as a Bearer header to the endpoint's own host, never to a redirect's other host. */
int hub_client_new(struct hub_client **c, const char *endpoint, const char *token, char *err,
		   size_t errlen);
void hub_client_free(struct hub_client **c);
const char *hub_client_endpoint(const struct hub_client *c);

/* A 200 answer of at most max bytes into *body (malloc'd, NUL-terminated); anything else is
 * one line naming what (and repo, for the hub's own errors). */
int hub_get_small(struct hub_client *c, const char *url, size_t max, const char *repo,
		  const char *what, char **body, size_t *len, char *err, size_t errlen);

/* What resolve/<commit>/<path> says of a file (HEAD, relative redirects followed as
 * huggingface_hub does): X-Repo-Commit, X-Linked-Etag or ETag, X-Linked-Size or
 * Content-Length, and where the bytes are (Location of a redirect, or the URL itself). */
struct hub_meta {
	char commit[HUB_COMMIT_LEN + 1];
	char oid[HUB_OID_MAX + 1];
	uint64_t size;
	char url[4096];
};
int hub_head_file(struct hub_client *c, const char *repo, const char *commit, const char *path,
		  struct hub_meta *m, char *err, size_t errlen);

/* Where a GET's body goes. start: called once the status is known, with the offset the body
 * begins at (the range asked, or 0 when the server sent the whole file); data: the bytes.
 * Either returns 0 or a negative errno that ends the transfer (its line in the sink's err). */
struct hub_sink {
	int (*start)(void *arg, uint64_t offset);
	int (*data)(void *arg, const char *buf, size_t n);
	void *arg;
	char *err;
	size_t errlen;
};
/* GET url from byte `from` (a Range request when from > 0) of a file of `size` bytes. Network
 * failures are retried (resuming) up to three times. */
int hub_get(struct hub_client *c, const char *url, uint64_t from, uint64_t size,
	    struct hub_sink *s, char *err, size_t errlen);

/* ---- hub_fetch.c ---- */

enum hub_fetched { HUB_REUSED, HUB_DOWNLOADED, HUB_RESUMED };

/* Bring one file of the pick to its place in d: reused when there, else downloaded (continued
 * from a partial), checked against the hub's checksum before it gets its name. *fetched: the
 * bytes that came over the network. */
int hub_fetch_file(struct hub_client *c, const struct hub_dest *d, const char *repo,
		   const struct hub_file *f, bool progress, enum hub_fetched *how,
		   uint64_t *fetched, char *final, size_t finallen, char *err, size_t errlen);

/* A small file's bytes (an index) into memory, at most max bytes; *buf malloc'd. */
int hub_fetch_text(struct hub_client *c, const char *repo, const char *commit,
		   const struct hub_file *f, size_t max, char **buf, size_t *len, char *err,
		   size_t errlen);

/* ---- hub_model.c ---- */

/* A MODEL argument of run/info/bench: a file or directory that exists is used as is; else
 * "org/name[:QUANT|/FILE]" is looked up in the hub cache, offline, and *model becomes the
 * cached file (the first shard of a split GGUF; a safetensors checkpoint's snapshot folder),
 * written into buf. Not pulled: one line naming the pull command. Returns 0, or an exit code
 * (2) after one line on stderr prefixed with who. */
int nsctl_model_arg(const char *who, const char **model, char *buf, size_t buflen);

#endif
