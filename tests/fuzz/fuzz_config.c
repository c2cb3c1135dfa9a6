/* SPDX-License-Identifier: Apache-2.0 */
/* libFuzzer: a whole config file from any bytes. */
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "config.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

int
LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	static struct config cfg;
	static char err[4096];
	char *text = malloc(size + 1);

	if (text == NULL)
		return 0;
	memcpy(text, data, size);
	text[size] = '\0';
	if (config_load_string(&cfg, "fuzz.ini", text, err, sizeof(err)) < 0 &&
	    err[0] == '\0')
		abort(); /* an error must say what it is */
	free(text);
	return 0;
}
