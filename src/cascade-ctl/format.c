/* SPDX-License-Identifier: Apache-2.0 */
/*
 * format: how cascade-ctl writes broker bytes on a terminal line; the
 * escaping itself is the library's (escape.h), so every command says the
 * same of the same byte.
 */
#include "amqp_compat.h"
#include <inttypes.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>

#include "ctl.h"
#include "duration.h"
#include "escape.h"
#include "json.h"
#include "when.h"

void
format_name(amqp_bytes_t b, char *out, size_t size)
{
	escape_bytes(b.bytes, b.len, SIZE_MAX, ESCAPE_NAME, out, size);
}

void
format_json_time(const char *key, int present, int64_t ms)
{
	char text[WHEN_TEXT_MAX];

	if (!present) {
		printf(",\"%s\":null,\"%s_ms\":null", key, key);
		return;
	}
	when_format(ms, text, sizeof(text));
	printf(",\"%s\":\"%s\",\"%s_ms\":%" PRId64, key, text, key, ms);
}

void
format_target(const struct waiting *w, char *out, size_t size)
{
	char ex[NAME_TEXT], key[NAME_TEXT];

	format_name(w->exchange, ex, sizeof(ex));
	format_name(w->routing_key, key, sizeof(key));
	snprintf(out, size, "%s/%s",
	         waiting_exchange_is_default(w->exchange) ? "amq.default" : ex,
	         key);
}

void
format_schedule(const struct waiting *w, char *out, size_t size)
{
	char text[NAME_TEXT];

	if (w->cron.len > 0) {
		format_name(w->cron, text, sizeof(text));
		snprintf(out, size, "cron \"%s\"", text);
	} else {
		duration_format(w->every, text, sizeof(text));
		snprintf(out, size, "every %s", text);
	}
}

void
format_json_repeat(const struct waiting *w)
{
	printf(",\"repeat\":");
	if (!w->repeat) {
		printf("null");
		return;
	}
	printf("{\"every_ms\":");
	if (w->cron.len > 0)
		printf("null");
	else
		printf("%" PRId64, w->every);
	printf(",\"cron\":");
	json_write_or_null(stdout, w->cron.len > 0, w->cron.bytes, w->cron.len);
	printf(",\"tz\":");
	json_write_or_null(stdout, w->tz.len > 0, w->tz.bytes, w->tz.len);
	printf(",\"occurrence\":%" PRId64 ",\"paused\":%s}", w->occurrence,
	       w->paused ? "true" : "false");
}
