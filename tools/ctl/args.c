/*
 * args: what the commands' option functions share in reading their
 * arguments.  Below main.c, which only dispatches to the commands.
 */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>

#include "ctl.h"

int
ctl_parse_limit(const char *s, uint64_t *out)
{
	char *end;
	unsigned long long n;

	if (*s >= '0' && *s <= '9') {
		n = strtoull(s, &end, 10);
		if (*end == '\0' && n > 0) {
			*out = n;
			return 0;
		}
	}
	fprintf(stderr, PROG ": --limit wants a positive integer: %s\n", s);
	return -1;
}
