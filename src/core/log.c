/* SPDX-License-Identifier: Apache-2.0 */
/* One line per event on stderr, key=value fields, levels checked first. */
#include "log.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "json.h"

enum log_level log_threshold = LOG_LEVEL_INFO;
static int log_json;

/* A text line, newline excluded, is shorter than LOG_LINE_MAX; its JSON
 * form, every byte escaped (6 bytes at most), fits in LOG_JSON_MAX. */
#define LOG_LINE_MAX 2048
#define LOG_JSON_MAX 16384

static const char *const level_names[] = {"debug", "info", "warn", "error"};

void
log_init(enum log_level level, int json)
{
	log_threshold = level;
	log_json = json;
}

/* A newline in a value (a broker's error text, say) would split the event. */
static void
log_escape_controls(char *line)
{
	for (unsigned char *p = (unsigned char *)line; *p; p++)
		if (*p < 0x20 || *p == 0x7f)
			*p = ' ';
}

/*
 * What fmt printed, and which of those bytes are fmt's own text.  In
 * " queue=%s reason=\"%s\"" the blanks, the keys, the '=' and the quotes
 * come from fmt and give the line its fields; whatever a conversion
 * printed is part of a value, quotes, blanks and "k=" included.
 */
struct log_text {
	char buf[LOG_LINE_MAX];
	unsigned char own[LOG_LINE_MAX]; /* 1: fmt's text, 0: an argument's */
	size_t len;
};

static void log_vtext(struct log_text *t, size_t max, int fields,
                      const char *fmt, va_list ap)
    __attribute__((format(printf, 4, 0)));

/*
 * fmt printed into t->buf, at most max bytes, and with fields set which of
 * them are fmt's own.  Where a conversion's output ends is the length that
 * fmt's prefix up to it prints with the same arguments, so no conversion's
 * type need be known here.
 */
static void
log_vtext(struct log_text *t, size_t max, int fields, const char *fmt,
          va_list ap)
{
	char prefix[LOG_LINE_MAX];
	size_t f = 0, out = 0, end;
	va_list cp;
	int n;

	if (max > sizeof(t->buf) - 1)
		max = sizeof(t->buf) - 1;
	va_copy(cp, ap);
	n = vsnprintf(t->buf, max + 1, fmt, cp);
	va_end(cp);
	t->len = n < 0 ? 0 : (size_t)n < max ? (size_t)n : max;
	t->buf[t->len] = '\0';
	memset(t->own, 1, t->len);
	/* No caller's fmt is that long; all of one would count as its own. */
	if (!fields || strlen(fmt) >= sizeof(prefix))
		return;
	while (fmt[f] != '\0' && out < t->len) {
		if (fmt[f] != '%' || fmt[f + 1] == '%') {
			f += fmt[f] == '%' ? 2 : 1;
			out++;
			continue;
		}
		end = f + 1 + strcspn(fmt + f + 1, "diouxXeEfFgGaAcspn");
		if (fmt[end] == '\0')
			break;
		memcpy(prefix, fmt, end + 1);
		prefix[end + 1] = '\0';
		va_copy(cp, ap);
		/* The compiler checked fmt at the call; prefix is a piece of
		 * it, and takes the first of the same arguments. */
#pragma GCC diagnostic push
#pragma GCC diagnostic ignored "-Wformat-nonliteral"
		n = vsnprintf(NULL, 0, prefix, cp);
#pragma GCC diagnostic pop
		va_end(cp);
		if (n < 0)
			break;
		for (; out < (size_t)n && out < t->len; out++)
			t->own[out] = 0;
		f = end + 1;
	}
}

struct jbuf {
	char *buf;
	size_t size, len;
};

static void
jbuf_char(struct jbuf *j, char c)
{
	if (j->len + 1 < j->size)
		j->buf[j->len++] = c;
}

static void
jbuf_raw(struct jbuf *j, const char *s)
{
	while (*s)
		jbuf_char(j, *s++);
}

/* s[0..n) as a JSON string, quotes included. */
static void
jbuf_string(struct jbuf *j, const char *s, size_t n)
{
	json_string(j->buf + j->len, j->size - j->len, s, n);
	/* What fitted: escapes leave no NUL in it. */
	j->len += strlen(j->buf + j->len);
}

/* A plain decimal, written as a JSON number: -12, 3.5 (no 1e3, no 012). */
static int
is_number(const char *s, size_t n)
{
	size_t i = 0, digits = 0;

	if (i < n && s[i] == '-')
		i++;
	if (i < n && s[i] == '0' && i + 1 < n && s[i + 1] != '.')
		return 0;
	for (; i < n && s[i] >= '0' && s[i] <= '9'; i++)
		digits++;
	if (digits == 0)
		return 0;
	if (i < n && s[i] == '.') {
		size_t frac = 0;
		for (i++; i < n && s[i] >= '0' && s[i] <= '9'; i++)
			frac++;
		if (frac == 0)
			return 0;
	}
	return i == n;
}

/* An unquoted value: a number when it is one, else a string. */
static void
jbuf_value(struct jbuf *j, const char *s, size_t n)
{
	if (!is_number(s, n)) {
		jbuf_string(j, s, n);
		return;
	}
	for (size_t i = 0; i < n; i++)
		jbuf_char(j, s[i]);
}

/*
 * t's fields as ,"key":value pairs.  A value in fmt's quotes is a string;
 * one without runs to fmt's next blank and is a number when it looks like
 * one.  Text of fmt's that is no key=value goes under "text".
 */
static void
jbuf_fields(struct jbuf *j, const struct log_text *t)
{
	const char *s = t->buf;
	size_t i = 0, n = t->len, k, e;

#define OWN(x, c) (t->own[x] && s[x] == (c))
	for (;;) {
		while (i < n && OWN(i, ' '))
			i++;
		if (i == n)
			break;
		for (k = i; k < n && !OWN(k, '=') && !OWN(k, ' '); k++)
			;
		jbuf_char(j, ',');
		if (k == n || s[k] != '=') {
			jbuf_string(j, "text", 4);
			jbuf_char(j, ':');
			jbuf_string(j, s + i, k - i);
			i = k;
			continue;
		}
		jbuf_string(j, s + i, k - i);
		jbuf_char(j, ':');
		i = k + 1;
		if (i < n && OWN(i, '"')) {
			for (e = ++i; e < n && !OWN(e, '"'); e++)
				;
			jbuf_string(j, s + i, e - i);
			i = e < n ? e + 1 : e;
		} else {
			for (e = i; e < n && !OWN(e, ' '); e++)
				;
			jbuf_value(j, s + i, e - i);
			i = e;
		}
	}
#undef OWN
}

static void log_vformat(char *out, size_t size, int json, const char *ts,
                        enum log_level level, const char *msg, const char *fmt,
                        va_list ap) __attribute__((format(printf, 7, 0)));

static void
log_vformat(char *out, size_t size, int json, const char *ts,
            enum log_level level, const char *msg, const char *fmt, va_list ap)
{
	struct log_text t;
	struct jbuf j = {out, size, 0};
	size_t head;
	int n;

	/* A text line is at most LOG_LINE_MAX - 1 bytes: its head, then as
	 * much of the fields as fits.  A JSON line has the same fields. */
	n = snprintf(NULL, 0, "%s %s msg=%s", ts, level_names[level], msg);
	head = n < 0 ? 0 : (size_t)n;
	log_vtext(&t, head < LOG_LINE_MAX - 1 ? LOG_LINE_MAX - 1 - head : 0,
	          json, fmt, ap);
	if (!json) {
		if (j.size > LOG_LINE_MAX)
			j.size = LOG_LINE_MAX;
		jbuf_raw(&j, ts);
		jbuf_char(&j, ' ');
		jbuf_raw(&j, level_names[level]);
		jbuf_raw(&j, " msg=");
		jbuf_raw(&j, msg);
		jbuf_raw(&j, t.buf);
		j.buf[j.len] = '\0';
		log_escape_controls(out);
		return;
	}
	jbuf_raw(&j, "{\"ts\":");
	jbuf_string(&j, ts, strlen(ts));
	jbuf_raw(&j, ",\"level\":");
	jbuf_string(&j, level_names[level], strlen(level_names[level]));
	jbuf_raw(&j, ",\"msg\":");
	jbuf_value(&j, msg, strlen(msg));
	jbuf_fields(&j, &t);
	jbuf_char(&j, '}');
	j.buf[j.len] = '\0';
}

void
log_format(char *out, size_t size, int json, const char *ts,
           enum log_level level, const char *msg, const char *fmt, ...)
{
	va_list ap;

	va_start(ap, fmt);
	log_vformat(out, size, json, ts, level, msg, fmt, ap);
	va_end(ap);
}

static void log_vemit(enum log_level level, const char *msg, const char *fmt,
                      va_list ap) __attribute__((format(printf, 3, 0)));

static void
log_vemit(enum log_level level, const char *msg, const char *fmt, va_list ap)
{
	char ts[64], out[LOG_JSON_MAX];
	struct timespec now;
	struct tm tm;

	clock_gettime(CLOCK_REALTIME, &now);
	gmtime_r(&now.tv_sec, &tm);
	snprintf(ts, sizeof(ts), "%04d-%02d-%02dT%02d:%02d:%02d.%03ldZ",
	         tm.tm_year + 1900, tm.tm_mon + 1, tm.tm_mday, tm.tm_hour,
	         tm.tm_min, tm.tm_sec, now.tv_nsec / 1000000);
	log_vformat(out, sizeof(out), log_json, ts, level, msg, fmt, ap);
	/* One write per line, so lines from two daemons never interleave. */
	fprintf(stderr, "%s\n", out);
	fflush(stderr);
}

void
log_emit(enum log_level level, const char *msg, const char *fmt, ...)
{
	va_list ap;

	if (level < log_threshold)
		return;
	va_start(ap, fmt);
	log_vemit(level, msg, fmt, ap);
	va_end(ap);
}

void
fatalx(const char *msg, const char *fmt, ...)
{
	va_list ap;

	va_start(ap, fmt);
	log_vemit(LOG_LEVEL_ERROR, msg, fmt, ap);
	va_end(ap);
	exit(1);
}
