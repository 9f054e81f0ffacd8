/* json_min.h - a small JSON reader for the test goldens (JSON lines, chat case files).
 * Parses one value into a tree; strings are decoded to UTF-8 (\uXXXX escapes, surrogate
 * pairs; a lone surrogate becomes its 3-byte encoding) and may contain NULs (trust len). */
#ifndef NS_JSON_MIN_H
#define NS_JSON_MIN_H

#include <stdbool.h>
#include <stddef.h>

enum jm_type { JM_NULL, JM_BOOL, JM_NUM, JM_STR, JM_ARR, JM_OBJ };

struct jm {
	enum jm_type type;
	bool b;
	double num;
	char *str;     /* JM_STR; JM_OBJ member: key in key */
	size_t len;
	char *key;     /* set for object members */
	struct jm *kid; /* first child (ARR/OBJ) */
	struct jm *next;
	size_t n;      /* number of children */
};

/* Parse text[0:n). Returns NULL on a syntax error (message in err). Free with jm_free. */
struct jm *jm_parse(const char *text, size_t n, char *err, size_t errlen);
void jm_free(struct jm *v);
const struct jm *jm_get(const struct jm *obj, const char *key);
const struct jm *jm_at(const struct jm *arr, size_t i);

#endif
