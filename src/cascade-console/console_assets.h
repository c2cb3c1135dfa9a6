/* SPDX-License-Identifier: Apache-2.0 */
/*
 * The browser console's static files (console.js, console.css,
 * favicon.svg), embedded in cascade-console by src/cascade-console/gen-assets,
 * which writes the table below from src/cascade-console/assets/.  A page names
 * each by its hash (docs/console-design.md, section 4), so that it can be
 * cached for a year and a new build is never served an old script.
 */
#ifndef CASCADE_CONSOLE_ASSETS_H
#define CASCADE_CONSOLE_ASSETS_H

#include <stddef.h>

struct console_asset {
	const char *name; /* the file's name: "console.js" */
	const char *type; /* its Content-Type */
	const char *hash; /* the first 12 hex digits of its SHA-256 */
	const unsigned char *data;
	size_t len;
};

extern const struct console_asset console_assets[];
extern const size_t console_nassets;

#endif
