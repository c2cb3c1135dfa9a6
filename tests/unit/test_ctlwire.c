/* SPDX-License-Identifier: Apache-2.0 */
/* ctlwire: the console's answers to cascade-ctl, written and read. */
#include <criterion/criterion.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "ctlwire.h"

/* s[0..n) through ctlwire_field: the field's text, NUL-ended. */
static char *
field(const void *s, size_t n)
{
	static char out[1024];
	struct hbuf b;

	hbuf_init(&b, 4096);
	ctlwire_field(&b, s, n);
	cr_assert(!b.full);
	cr_assert_lt(b.n, sizeof(out));
	if (b.n > 0) /* an empty field leaves the buffer unallocated */
		memcpy(out, b.p, b.n);
	out[b.n] = '\0';
	hbuf_free(&b);
	return out;
}

Test(ctlwire, escapes_what_splits_a_line)
{
	const char in[] = "a\tb\nc\\d\re\x01"
	                  "f\x7f"
	                  "g\xc3\xa9";

	cr_assert_str_eq(field(in, sizeof(in) - 1),
	                 "a\\tb\\nc\\\\d\\x0de\\x01f\\x7fg\xc3\xa9");
	cr_assert_str_eq(field("", 0), "");
	cr_assert_str_eq(field("\0", 1), "\\x00");
}

Test(ctlwire, every_byte_comes_back)
{
	unsigned char in[256];
	char text[1024];
	size_t n;

	for (int i = 0; i < 256; i++)
		in[i] = (unsigned char)i;
	snprintf(text, sizeof(text), "%s", field(in, sizeof(in)));
	cr_assert_null(strchr(text, '\t'));
	cr_assert_null(strchr(text, '\n'));
	n = strlen(text);
	cr_assert_eq(ctlwire_unescape(text, &n), 0);
	cr_assert_eq(n, sizeof(in));
	cr_assert_eq(memcmp(text, in, n), 0);
}

Test(ctlwire, refuses_what_it_never_writes)
{
	static const char *const bad[] = {
	    "a\\",   "\\q",   "\\x4",  "\\x4g", "\\x41", /* not escaped */
	    "\\x5c", "\\x09", "\\x0a", "\\x0D", "raw\x01", "raw\x7f", "\\X01",
	};

	for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
		char s[32];
		size_t n = strlen(bad[i]);
		memcpy(s, bad[i], n + 1);
		cr_assert_eq(ctlwire_unescape(s, &n), -1, "%s", bad[i]);
	}
}

/* A row of every kind of field, as the console writes it. */
static void
a_row(struct waiting *w)
{
	memset(w, 0, sizeof(*w));
	w->id = amqp_cstring_bytes("e357f751e793a970");
	w->message_id = amqp_cstring_bytes("order\t42\n\\x");
	w->exchange = amqp_cstring_bytes("");
	w->routing_key = amqp_cstring_bytes("orders");
	w->due = 1795000000000;
	w->seen = 0;
	w->size = 12;
	w->cancel_pending = 1;
	w->repeat = 1;
	w->cron = amqp_cstring_bytes("0 9 * * 1-5");
	w->tz = amqp_cstring_bytes("Europe/Berlin");
	w->occurrence = 3;
	w->paused = 1;
}

static char *
dup_hbuf(const struct hbuf *b, size_t *len)
{
	char *s = malloc(b->n + 1);

	cr_assert_not_null(s);
	memcpy(s, b->p, b->n);
	s[b->n] = '\0';
	*len = b->n;
	return s;
}

static int
bytes_is(amqp_bytes_t b, const char *s)
{
	return b.len == strlen(s) && memcmp(b.bytes, s, b.len) == 0;
}

Test(ctlwire, a_list_answer_reads_back)
{
	struct ctlwire_head h = {3, 10, 2, {1, 1, 1, 0}};
	struct ctlwire_list l;
	struct waiting w;
	struct hbuf b;
	const char *why = NULL;
	size_t len;
	char *text;

	hbuf_init(&b, 1 << 20);
	ctlwire_list_head(&b, &h);
	a_row(&w);
	ctlwire_list_row(&b, &w);
	w.message_id = amqp_empty_bytes;
	w.repeat = w.paused = w.cancel_pending = 0;
	w.cron = w.tz = amqp_empty_bytes;
	w.every = 0;
	w.seen = 1795000000001;
	ctlwire_list_row(&b, &w);
	ctlwire_end(&b);
	text = dup_hbuf(&b, &len);
	hbuf_free(&b);
	cr_assert_eq(ctlwire_parse_list(text, len, &l, &why), 0, "%s", why);
	cr_assert_eq(l.head.matching, 3);
	cr_assert_eq(l.head.total, 10);
	cr_assert_eq(l.head.shown, 2);
	cr_assert_eq(l.head.counts[0], 1);
	cr_assert(bytes_is(l.rows[0]->id, "e357f751e793a970"));
	cr_assert(bytes_is(l.rows[0]->message_id, "order\t42\n\\x"));
	cr_assert_eq(l.rows[0]->exchange.len, 0);
	cr_assert(bytes_is(l.rows[0]->routing_key, "orders"));
	cr_assert_eq(l.rows[0]->due, 1795000000000);
	cr_assert_eq(l.rows[0]->seen, 0);
	cr_assert_eq(l.rows[0]->size, 12);
	cr_assert_eq(l.rows[0]->cancel_pending, 1);
	cr_assert_eq(l.rows[0]->repeat, 1);
	cr_assert(bytes_is(l.rows[0]->cron, "0 9 * * 1-5"));
	cr_assert(bytes_is(l.rows[0]->tz, "Europe/Berlin"));
	cr_assert_eq(l.rows[0]->occurrence, 3);
	cr_assert_eq(l.rows[0]->paused, 1);
	cr_assert_eq(l.rows[1]->message_id.len, 0);
	cr_assert_eq(l.rows[1]->repeat, 0);
	cr_assert_eq(l.rows[1]->seen, 1795000000001);
	ctlwire_list_free(&l);
	free(text);
}

/* text as a list answer: whether it parses. */
static int
parses(const char *text)
{
	struct ctlwire_list l;
	const char *why;
	char *s = strdup(text);
	int rc;

	cr_assert_not_null(s);
	rc = ctlwire_parse_list(s, strlen(s), &l, &why);
	if (rc == 0)
		ctlwire_list_free(&l);
	free(s);
	return rc;
}

#define ROW "row\tc1\tm1\tex\tk\t5\t0\t3\t0\t0\t0\t0\t\t\t0\t0\n"

Test(ctlwire, a_list_answer_cut_or_wrong_is_refused)
{
	cr_assert_eq(parses("list\t1\t1\t1\t1\t1\t0\t0\t0\n" ROW "end\n"), 0);
	/* cut: no end, half a line, a row missing */
	cr_assert_eq(parses("list\t1\t1\t1\t1\t1\t0\t0\t0\n" ROW), -1);
	cr_assert_eq(parses("list\t1\t1\t1\t1\t1\t0\t0\t0\n" ROW "end"), -1);
	cr_assert_eq(parses("list\t1\t2\t2\t2\t2\t0\t0\t0\n" ROW "end\n"), -1);
	/* more after the end, another version, counts that do not add up */
	cr_assert_eq(parses("list\t1\t1\t1\t1\t1\t0\t0\t0\n" ROW "end\nx\n"),
	             -1);
	cr_assert_eq(parses("list\t2\t1\t1\t1\t1\t0\t0\t0\n" ROW "end\n"), -1);
	cr_assert_eq(parses("list\t1\t1\t1\t1\t0\t0\t0\t0\n" ROW "end\n"), -1);
	cr_assert_eq(parses("list\t1\t2\t1\t1\t2\t0\t0\t0\n" ROW "end\n"), -1);
	/* a row with a field too few, too many, a flag of 2, a number +5 */
	cr_assert_eq(parses("list\t1\t1\t1\t1\t1\t0\t0\t0\n"
	                    "row\tc1\tm1\tex\tk\t5\t0\t3\t0\t0\t0\t0\t\t\t0\n"
	                    "end\n"),
	             -1);
	cr_assert_eq(
	    parses("list\t1\t1\t1\t1\t1\t0\t0\t0\n"
	           "row\tc1\tm1\tex\tk\t5\t0\t3\t0\t0\t0\t0\t\t\t0\t0\t"
	           "\nend\n"),
	    -1);
	cr_assert_eq(
	    parses("list\t1\t1\t1\t1\t1\t0\t0\t0\n"
	           "row\tc1\tm1\tex\tk\t5\t0\t3\t2\t0\t0\t0\t\t\t0\t0\n"
	           "end\n"),
	    -1);
	cr_assert_eq(
	    parses("list\t1\t1\t1\t1\t1\t0\t0\t0\n"
	           "row\tc1\tm1\tex\tk\t+5\t0\t3\t0\t0\t0\t0\t\t\t0\t0\n"
	           "end\n"),
	    -1);
	/* an empty cascade id; none shown of some matching is fine */
	cr_assert_eq(parses("list\t1\t1\t1\t1\t1\t0\t0\t0\n"
	                    "row\t\tm1\tex\tk\t5\t0\t3\t0\t0\t0\t0\t\t\t0\t0\n"
	                    "end\n"),
	             -1);
	cr_assert_eq(parses("list\t1\t7\t9\t0\t3\t4\t0\t0\nend\n"), 0);
	cr_assert_eq(parses(""), -1);
}

Test(ctlwire, a_count_answer_reads_back)
{
	struct hbuf b;
	const char *why = NULL;
	uint64_t n;
	int64_t last;
	size_t len;
	char *text;

	hbuf_init(&b, 4096);
	ctlwire_count(&b, 3, 1795000000000);
	ctlwire_end(&b);
	text = dup_hbuf(&b, &len);
	hbuf_free(&b);
	cr_assert_str_eq(text, "count\t1\t3\t1795000000000\nend\n");
	cr_assert_eq(ctlwire_parse_count(text, len, &n, &last, &why), 0, "%s",
	             why);
	cr_assert_eq(n, 3);
	cr_assert_eq(last, 1795000000000);
	free(text);
	text = strdup("count\t1\t3\t17\n");
	cr_assert_eq(ctlwire_parse_count(text, strlen(text), &n, &last, &why),
	             -1);
	free(text);
	text = strdup("count\t1\t-3\t17\nend\n");
	cr_assert_eq(ctlwire_parse_count(text, strlen(text), &n, &last, &why),
	             -1);
	free(text);
}
