/* chat_file.c - /save and /load of nsctl run --chat (chat_file.h). */
#include "chat_file.h"

#include <errno.h>
#include <jansson.h>
#include <stdio.h>
#include <string.h>
#include <unistd.h>
#include <unistr.h>

#include "ns_util.h"

/* A reply is what stdout got: token bytes, not always UTF-8 (a byte-level vocabulary can end
 * a reply inside a character; a small model can emit any byte). JSON strings hold only
 * UTF-8, so such a message is written twice: "content" with each bad byte as U+FFFD (for a
 * reader), and "content_hex", the exact bytes, which /load uses. */
static json_t *s_msg(const struct ns_engine_msg *m)
{
	const uint8_t *c = (const uint8_t *)m->content;
	size_t n = strlen(m->content), k = 0, o = 0;
	char *shown, *hex;
	json_t *j;

	if (!u8_check(c, n))
		return json_pack("{s:s, s:s}", "role", m->role, "content", m->content);
	shown = malloc(n * 3 + 1);
	hex = malloc(n * 2 + 1);
	j = NULL;
	if (shown && hex) {
		while (k < n) {
			ucs4_t u;
			int l = u8_mbtoucr(&u, c + k, n - k);

			if (l > 0) {
				memcpy(shown + o, c + k, (size_t)l);
				o += (size_t)l;
				k += (size_t)l;
			} else {
				memcpy(shown + o, "\xef\xbf\xbd", 3);
				o += 3;
				k++;
			}
		}
		shown[o] = 0;
		for (k = 0; k < n; k++)
			snprintf(hex + 2 * k, 3, "%02x", c[k]);
		j = json_pack("{s:s, s:s, s:s}", "role", m->role, "content", shown, "content_hex",
			      hex);
	}
	free(shown);
	free(hex);
	return j;
}

static int s_nibble(char c)
{
	return c >= '0' && c <= '9' ? c - '0' : c >= 'a' && c <= 'f' ? c - 'a' + 10 :
	       c >= 'A' && c <= 'F' ? c - 'A' + 10 : -1;
}

/* "content_hex" back to bytes: malloc'd, NULL when it is not an even run of hex digits or
 * holds a NUL. */
static char *s_unhex(const char *h)
{
	size_t n = strlen(h);
	char *b = n % 2 ? NULL : malloc(n / 2 + 1);

	for (size_t i = 0; b && i < n / 2; i++) {
		int hi = s_nibble(h[2 * i]), lo = s_nibble(h[2 * i + 1]);

		if (hi < 0 || lo < 0 || !(hi | lo)) {
			free(b);
			return NULL;
		}
		b[i] = (char)(hi << 4 | lo);
	}
	if (b)
		b[n / 2] = 0;
	return b;
}

int chat_file_save(const char *path, const struct ns_chat_log *log, char *err, size_t errlen)
{
	json_t *root = json_object(), *msgs = json_array();
	char tmp[4200];
	int rc = 0;

	if (!root || !msgs || json_object_set_new(root, "messages", msgs)) {
		json_decref(root);
		return ns_errf(err, errlen, "out of memory"), -ENOMEM;
	}
	for (size_t i = 0; i < log->n && rc == 0; i++) {
		json_t *m = s_msg(&log->msgs[i]);

		if (!m || json_array_append_new(msgs, m))
			rc = -ENOMEM;
	}
	if (rc) {
		json_decref(root);
		return ns_errf(err, errlen, "out of memory"), rc;
	}
	if (snprintf(tmp, sizeof(tmp), "%s.tmp", path) >= (int)sizeof(tmp)) {
		json_decref(root);
		return ns_errf(err, errlen, "%s: name too long", path), -ENAMETOOLONG;
	}
	if (json_dump_file(root, tmp, JSON_INDENT(1) | JSON_ENSURE_ASCII) < 0 ||
	    rename(tmp, path) < 0) {
		rc = -(errno ? errno : EIO);
		ns_errf(err, errlen, "cannot write %s: %s", path, strerror(-rc));
		unlink(tmp);
	}
	json_decref(root);
	return rc;
}

static bool s_role_ok(const char *r)
{
	static const char *const roles[] = { "system", "user", "assistant", "tool", "developer" };

	for (size_t i = 0; i < NS_ARRAY_LEN(roles); i++)
		if (!strcmp(r, roles[i]))
			return true;
	return false;
}

int chat_file_load(const char *path, struct ns_chat_log *log, char *err, size_t errlen)
{
	struct ns_chat_log got = { 0 };
	json_error_t je;
	json_t *root = json_load_file(path, JSON_REJECT_DUPLICATES, &je), *msgs, *m;
	size_t i;
	int rc = 0;

	if (!root)
		return ns_errf(err, errlen, "%s: %s (line %d)", path, je.text, je.line), -EINVAL;
	msgs = json_object_get(root, "messages");
	if (!json_is_array(msgs)) {
		json_decref(root);
		return ns_errf(err, errlen, "%s: no \"messages\" array", path), -EINVAL;
	}
	json_array_foreach(msgs, i, m) {
		const char *role = json_string_value(json_object_get(m, "role"));
		const char *hex = json_string_value(json_object_get(m, "content_hex"));
		json_t *c = json_object_get(m, "content");
		char *bytes = hex ? s_unhex(hex) : NULL;

		if (!role || !s_role_ok(role) || !json_is_string(c) ||
		    strlen(json_string_value(c)) != json_string_length(c) || (hex && !bytes)) {
			ns_errf(err, errlen, "%s: message %zu needs a role (system, user, assistant, "
				"tool, developer) and a string content without NUL (content_hex: "
				"hex digits)", path, i);
			rc = -EINVAL;
			break;
		}
		rc = ns_chat_log_add(&got, role, bytes ? bytes : json_string_value(c));
		free(bytes);
		if (rc < 0) {
			ns_errf(err, errlen, "out of memory");
			break;
		}
	}
	json_decref(root);
	if (rc) {
		ns_chat_log_clear(&got);
		return rc;
	}
	ns_chat_log_clear(log);
	*log = got;
	return 0;
}
