/* SPDX-License-Identifier: Apache-2.0 */
/*
 * A parse's errors: each one FILE:LINE: key: why (or FILE: key: why, for
 * the environment), added to the caller's buffer until it is full, and
 * counted.  config.c and config_check.c report through it.
 */
#include "config_int.h"

#include <stdarg.h>
#include <stdio.h>

void
config_error(struct config_parse *p, int line, const char *key, const char *fmt,
             ...)
{
	va_list ap;
	int n;

	p->errors++;
	if (p->errlen + 1 >= p->errsize)
		return;
	if (line > 0)
		n = snprintf(p->err + p->errlen, p->errsize - p->errlen,
		             "%s:%d: %s%s", p->name, line, key ? key : "",
		             key ? ": " : "");
	else
		n = snprintf(p->err + p->errlen, p->errsize - p->errlen,
		             "%s: %s%s", p->name, key ? key : "",
		             key ? ": " : "");
	if (n < 0 || (size_t)n >= p->errsize - p->errlen) {
		p->errlen = p->errsize - 1;
		return;
	}
	p->errlen += (size_t)n;
	va_start(ap, fmt);
	n = vsnprintf(p->err + p->errlen, p->errsize - p->errlen, fmt, ap);
	va_end(ap);
	if (n < 0 || (size_t)n >= p->errsize - p->errlen - 1) {
		p->errlen = p->errsize - 1;
		return;
	}
	p->errlen += (size_t)n;
	p->err[p->errlen++] = '\n';
	p->err[p->errlen] = '\0';
}
