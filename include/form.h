/* SPDX-License-Identifier: Apache-2.0 */
/*
 * application/x-www-form-urlencoded bodies, the console's POSTs
 * (docs/console-design.md, section 4).  Parsed here rather than by
 * libmicrohttpd's post processor, which differs between 0.9.75 and 1.0,
 * and strictly: what a browser never sends (a bad %-escape, a NUL, bytes
 * that are not UTF-8, a field without '=', a field given twice, more
 * fields or longer ones than the caller allows) is refused with a reason
 * rather than guessed at, since each field becomes a broker request.
 * Pure code, decoding in place: no allocation.
 */
#ifndef CASCADE_FORM_H
#define CASCADE_FORM_H

#include <stddef.h>

/* A field name longer than this is refused: ours are short words. */
#define FORM_NAME_MAX 64
/* A decoded value longer than this is refused (a password is 255). */
#define FORM_VALUE_MAX 4096

struct form_field {
	const char *name; /* decoded, NUL-terminated, inside the body */
	size_t name_len;
	const char *value; /* likewise; may be empty */
	size_t value_len;
};

/*
 * Parse body[0..len) into at most max fields, decoding '+' and %XX in
 * place; body[len] must be writable (len + 1 bytes: each name and value
 * is NUL-terminated where its separator was).  An empty body is no
 * field.  Returns 0 with the fields in f[0..*n), or -1 with a static
 * reason in *why (the body is then partly decoded: do not use it).
 */
int form_parse(char *body, size_t len, struct form_field *f, size_t max,
               size_t *n, const char **why);

/* The field named name among f[0..n), or NULL. */
const struct form_field *form_get(const struct form_field *f, size_t n,
                                  const char *name);

#endif
