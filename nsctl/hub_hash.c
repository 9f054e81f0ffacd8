/* hub_hash.c - the hub's checksums, with OpenSSL's digests (libcrypto).
 *
 * The hub names a file's content in two ways: an LFS file (weights, GGUF) by the sha256 of
 * its bytes (X-Linked-Etag, the listing's lfs.sha256), a file kept in git itself (config.json,
 * a tokenizer) by its git blob id, the sha1 of "blob <size>\0" followed by the bytes (its
 * ETag, the listing's blobId). huggingface_hub names cached blobs by the same string. */
#include <errno.h>
#include <openssl/evp.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <unistd.h>

#include "hub.h"

struct hub_hash {
	EVP_MD_CTX *ctx;
	const EVP_MD *md;
	bool git;       /* a git blob id: the header goes first */
	uint64_t size;  /* for that header */
};

bool hub_oid_valid(const char *oid)
{
	size_t n = strlen(oid);

	if (n != 40 && n != 64)
		return false;
	for (size_t i = 0; i < n; i++) {
		char c = oid[i];
		if (!((c >= '0' && c <= '9') || (c >= 'a' && c <= 'f') || (c >= 'A' && c <= 'F')))
			return false;
	}
	return true;
}

int hub_hash_reset(struct hub_hash *h)
{
	if (!EVP_DigestInit_ex(h->ctx, h->md, NULL))
		return -EIO;
	if (h->git) {
		char hdr[32];
		int n = snprintf(hdr, sizeof(hdr), "blob %llu", (unsigned long long)h->size);

		/* the header's terminating NUL is part of what git hashes */
		if (!EVP_DigestUpdate(h->ctx, hdr, (size_t)n + 1))
			return -EIO;
	}
	return 0;
}

int hub_hash_new(struct hub_hash **out, const char *oid, uint64_t size)
{
	struct hub_hash *h;

	*out = NULL;
	if (!hub_oid_valid(oid))
		return -EINVAL;
	h = calloc(1, sizeof(*h));
	if (!h)
		return -ENOMEM;
	h->git = strlen(oid) == 40;
	h->md = h->git ? EVP_sha1() : EVP_sha256();
	h->size = size;
	h->ctx = EVP_MD_CTX_new();
	if (!h->ctx || hub_hash_reset(h)) {
		hub_hash_free(&h);
		return -ENOMEM;
	}
	*out = h;
	return 0;
}

int hub_hash_update(struct hub_hash *h, const void *buf, size_t n)
{
	return EVP_DigestUpdate(h->ctx, buf, n) ? 0 : -EIO;
}

int hub_hash_check(struct hub_hash *h, const char *oid, char hex[HUB_OID_MAX + 1])
{
	unsigned char md[EVP_MAX_MD_SIZE];
	unsigned int n = 0;

	if (!EVP_DigestFinal_ex(h->ctx, md, &n) || n * 2 > HUB_OID_MAX)
		return -EIO;
	for (unsigned int i = 0; i < n; i++)
		snprintf(hex + 2 * i, 3, "%02x", md[i]);
	hex[2 * n] = '\0';
	return strcasecmp(hex, oid) ? -EBADMSG : 0;
}

int hub_hash_fd(struct hub_hash *h, int fd, uint64_t bytes)
{
	enum { S_CHUNK = 1 << 20 };
	char *buf = malloc(S_CHUNK);
	uint64_t off = 0;
	int rc = 0;

	if (!buf)
		return -ENOMEM;
	while (off < bytes && !rc) {
		size_t want = bytes - off < S_CHUNK ? (size_t)(bytes - off) : S_CHUNK;
		ssize_t got = pread(fd, buf, want, (off_t)off);

		if (got < 0 && errno == EINTR)
			continue;
		if (got <= 0) {
			rc = got < 0 ? -errno : -EIO; /* shorter than it was a moment ago */
			break;
		}
		rc = hub_hash_update(h, buf, (size_t)got);
		off += (uint64_t)got;
	}
	free(buf);
	return rc;
}

void hub_hash_free(struct hub_hash **h)
{
	if (!*h)
		return;
	EVP_MD_CTX_free((*h)->ctx);
	free(*h);
	*h = NULL;
}
