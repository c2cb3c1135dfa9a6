/* SPDX-License-Identifier: Apache-2.0 */
/*
 * args: what the commands' option functions share in reading their
 * arguments.  Below main.c, which only dispatches to the commands.
 */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

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

int
ctl_check_ids(const char *cmd, int n, char **v, const char *what)
{
	for (int i = 0; i < n; i++) {
		size_t len = strlen(v[i]);
		if (len == 0 || len > 255) {
			fprintf(stderr,
			        PROG ": %s: an id has 1 to 255 bytes (%s): "
			             "'%s'\n",
			        cmd, what, v[i]);
			return -1;
		}
	}
	return 0;
}
