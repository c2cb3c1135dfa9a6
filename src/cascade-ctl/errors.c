/* SPDX-License-Identifier: Apache-2.0 */
/*
 * errors: the parked messages in P.error with their reasons, target and
 * due time.  They stay in the queue: each is taken unacked and given back.
 */
#include "amqp_compat.h"
#include <inttypes.h>
#include <stdio.h>
#include <string.h>

#include "ctl.h"
#include "escape.h"
#include "json.h"
#include "when.h"

#define BODY_PREVIEW 60 /* bytes of each body `errors` shows */

/* errors's options. */
static struct {
	int json;
	uint64_t limit; /* 0: ERRORS_LIMIT */
} opts;

const struct ctl_option errors_options[] = {
    {"json", 'j', 0},
    {"limit", 'n', 1},
    {NULL, 0, 0},
};

int
errors_option(struct ctl *c, const char *name, const char *arg)
{
	(void)c;
	if (strcmp(name, "json") == 0) {
		opts.json = 1;
		return 0;
	}
	return ctl_parse_limit(arg, &opts.limit);
}

/*
 * Each field from the message printed as list prints names: escaped, so
 * that a publisher's bytes (ESC, BEL, CR, LF in a message-id or routing
 * key) never reach the operator's terminal raw (ESCAPE_NAME, escape.h).
 * A field is cut at FIELD_MAX bytes, more than any name holds.
 */
#define FIELD_MAX 1024

static const char *
errors_field(amqp_bytes_t b, char *out, size_t size)
{
	escape_bytes(b.bytes, b.len, FIELD_MAX, ESCAPE_NAME, out, size);
	return out;
}

/* A reason: cascade's words, which may hold its escapes of a value. */
static const char *
errors_reason(amqp_bytes_t b, char *out, size_t size)
{
	escape_bytes(b.bytes, b.len, FIELD_MAX, ESCAPE_TEXT, out, size);
	return out;
}

static void
errors_text(const struct ctl *c, uint64_t i, const amqp_message_t *m,
            const struct park_target *t)
{
	const amqp_basic_properties_t *p = &m->properties;
	amqp_bytes_t id = client_message_id(p);
	char due[WHEN_TEXT_MAX], body[BODY_PREVIEW * ESCAPE_MAX_FACTOR + 8];
	char f[FIELD_MAX * ESCAPE_MAX_FACTOR + 4];
	int64_t n;

	if (t->reason.len > 0)
		printf("#%" PRIu64 " %s\n", i,
		       errors_reason(t->reason, f, sizeof(f)));
	else
		printf("#%" PRIu64 " (no x-cascade-error)\n", i);
	if (t->refused.len > 0)
		printf("   refused:    %s\n",
		       errors_reason(t->refused, f, sizeof(f)));
	if (t->has_exchange)
		printf("   target:     exchange '%s'",
		       errors_field(t->exchange, f, sizeof(f)));
	else
		printf("   target:     default exchange ([router] "
		       "default_target_exchange)");
	if (client_rk_unknown(&c->cl, t))
		printf(", routing key not recorded\n");
	else
		printf(", routing key '%s'\n",
		       errors_field(t->routing_key, f, sizeof(f)));
	if (t->retry_gave_up)
		printf("   work queue: %s\n",
		       errors_field(t->queue, f, sizeof(f)));
	if (id.len > 0)
		printf("   message-id: %s\n", errors_field(id, f, sizeof(f)));
	if (t->has_due) {
		when_format(t->due, due, sizeof(due));
		printf("   due:        %s\n", due);
	}
	if (client_delivery_count(p, &n) && n > 0)
		printf("   handed out: %" PRId64 " time%s before "
		       "(x-delivery-count)\n",
		       n, n == 1 ? "" : "s");
	escape_bytes(m->body.bytes, m->body.len, BODY_PREVIEW, ESCAPE_QUOTED,
	             body, sizeof(body));
	printf("   body:       %zu bytes \"%s\"\n", m->body.len, body);
}

static void
errors_json(const struct ctl *c, uint64_t i, const amqp_message_t *m,
            const struct park_target *t)
{
	const amqp_basic_properties_t *p = &m->properties;
	amqp_bytes_t id = client_message_id(p), head;
	int64_t n;

	if (i > 1)
		putchar(',');
	printf("{\"reason\":");
	json_write(stdout, t->reason.bytes, t->reason.len);
	printf(",\"refused\":");
	json_write_or_null(stdout, t->refused.len > 0, t->refused.bytes,
	                   t->refused.len);
	printf(",\"exchange\":");
	json_write_or_null(stdout, t->has_exchange, t->exchange.bytes,
	                   t->exchange.len);
	printf(",\"routing_key\":");
	json_write_or_null(stdout, !client_rk_unknown(&c->cl, t),
	                   t->routing_key.bytes, t->routing_key.len);
	printf(",\"queue\":");
	json_write_or_null(stdout, t->retry_gave_up, t->queue.bytes,
	                   t->queue.len);
	printf(",\"message_id\":");
	json_write_or_null(stdout, p->_flags & AMQP_BASIC_MESSAGE_ID_FLAG,
	                   id.bytes, id.len);
	format_json_time("due", t->has_due, t->due);
	if (client_delivery_count(p, &n))
		printf(",\"delivery_count\":%" PRId64, n);
	else
		printf(",\"delivery_count\":null");
	/* The bytes themselves: JSON has its own escapes. */
	head = m->body;
	if (head.len > BODY_PREVIEW)
		head.len = BODY_PREVIEW;
	printf(",\"body_bytes\":%zu,\"body\":", m->body.len);
	json_write(stdout, head.bytes, head.len);
	putchar('}');
}

int
errors_run(struct ctl *c)
{
	uint64_t limit = opts.limit ? opts.limit : ERRORS_LIMIT, shown = 0;
	uint64_t tag, last = 0;
	struct park_target t;
	amqp_message_t m;
	uint32_t total;
	char rk[KEY_MAX];
	int got, rc = 0;

	if (client_error_count(&c->cl, &total) < 0)
		return -1;
	if (opts.json) {
		printf("{\"queue\":");
		json_write_str(stdout, c->topo.error);
		printf(",\"total\":%" PRIu32 ",\"messages\":[", total);
	} else {
		printf("%s: %" PRIu32 " parked message%s\n", c->topo.error,
		       total, total == 1 ? "" : "s");
	}
	while (shown < limit) {
		got = client_get(&c->cl, &tag, rk, &m);
		if (got < 0) {
			rc = -1;
			break;
		}
		if (got == 0)
			break;
		last = tag;
		shown++;
		park_target(&m.properties, amqp_cstring_bytes(rk), &t);
		if (opts.json)
			errors_json(c, shown, &m, &t);
		else
			errors_text(c, shown, &m, &t);
		amqp_destroy_message(&m);
	}
	if (opts.json)
		printf("],\"shown\":%" PRIu64 "}\n", shown);
	else if (shown < total)
		printf("(%" PRIu64 " of %" PRIu32 " shown; --limit N shows "
		       "more)\n",
		       shown, total);
	/* Every message stays where it was; a lost connection, too, would
	 * give them back. */
	if (rc == 0 && session_give_back(c, last, shown) < 0)
		rc = -1;
	return rc;
}
