/* SPDX-License-Identifier: Apache-2.0 */
/*
 * libFuzzer: form_parse on any bytes, in a buffer of exactly len + 1 so
 * ASan sees any write past the byte the parser may use; what parses must
 * hold only what the parser promises (no NUL, UTF-8, bounded, distinct
 * names), because the console hands those fields on as they are.
 */
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "form.h"
#include "json.h"

#define MAX 16

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

static void
check(const char *s, size_t len, size_t limit)
{
	if (len > limit || strlen(s) != len)
		abort();
	for (size_t i = 0; i < len;) {
		size_t k = json_utf8_len((const unsigned char *)s + i, len - i);
		if (k == 0)
			abort();
		i += k;
	}
}

int
LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	struct form_field f[MAX];
	const char *why;
	size_t n;
	char *body = malloc(size + 1);

	if (body == NULL)
		return 0;
	memcpy(body, data, size);
	if (form_parse(body, size, f, MAX, &n, &why) == 0) {
		if (n > MAX)
			abort();
		for (size_t i = 0; i < n; i++) {
			check(f[i].name, f[i].name_len, FORM_NAME_MAX);
			check(f[i].value, f[i].value_len, FORM_VALUE_MAX);
			if (f[i].name_len == 0 ||
			    form_get(f, n, f[i].name) != &f[i])
				abort();
		}
	} else if (why == NULL || why[0] == '\0') {
		abort(); /* every refusal says why */
	}
	free(body);
	return 0;
}
