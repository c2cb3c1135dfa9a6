/* One line per event on stderr, key=value fields, levels checked first. */
#include "log.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

enum log_level log_threshold = LOG_LEVEL_INFO;
static int log_json;

static const char *const level_names[] = {"debug", "info", "warn", "error"};

void
log_init(enum log_level level, int json)
{
	log_threshold = level;
	log_json = json;
}

int
log_level_parse(const char *name, enum log_level *out)
{
	for (size_t i = 0; i < sizeof(level_names) / sizeof(level_names[0]);
	     i++) {
		if (strcmp(name, level_names[i]) == 0) {
			*out = (enum log_level)i;
			return 0;
		}
	}
	return -1;
}

/* A newline in a value (a broker's error text, say) would split the event. */
static void
log_escape_controls(char *line)
{
	for (unsigned char *p = (unsigned char *)line; *p; p++)
		if (*p < 0x20 || *p == 0x7f)
			*p = ' ';
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
	static const char hex[] = "0123456789abcdef";

	jbuf_char(j, '"');
	for (size_t i = 0; i < n; i++) {
		unsigned char c = (unsigned char)s[i];
		if (c == '"' || c == '\\') {
			jbuf_char(j, '\\');
			jbuf_char(j, (char)c);
		} else if (c < 0x20 || c == 0x7f) {
			jbuf_char(j, '\\');
			jbuf_char(j, 'u');
			jbuf_char(j, '0');
			jbuf_char(j, '0');
			jbuf_char(j, hex[c >> 4]);
			jbuf_char(j, hex[c & 15]);
		} else {
			jbuf_char(j, (char)c);
		}
	}
	jbuf_char(j, '"');
}

/* After a closing quote: the end of the line, or " key=". */
static int
ends_value(const char *p)
{
	const char *k;

	if (*p == '\0')
		return 1;
	if (*p != ' ')
		return 0;
	for (k = p + 1;
	     (*k >= 'a' && *k <= 'z') || (*k >= 'A' && *k <= 'Z') ||
	     (*k >= '0' && *k <= '9') || *k == '_' || *k == '-' || *k == '.';
	     k++)
		;
	return k > p + 1 && *k == '=';
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

/*
 * "TS LEVEL k=v k=\"v w\" ..." to {"ts":"TS","level":"LEVEL","k":"v",...}.
 * A quoted value ends at a quote followed by the end or by " key=", so
 * quotes inside a value survive.  Text that is not key=value goes under "text".
 */
void
log_to_json(const char *line, char *out, size_t size)
{
	struct jbuf j = {out, size, 0};
	const char *p = line, *end;
	size_t n;

	jbuf_raw(&j, "{\"ts\":");
	n = strcspn(p, " ");
	jbuf_string(&j, p, n);
	p += n;
	p += strspn(p, " ");
	n = strcspn(p, " ");
	jbuf_raw(&j, ",\"level\":");
	jbuf_string(&j, p, n);
	p += n;
	while (*(p += strspn(p, " ")) != '\0') {
		const char *eq = p + strcspn(p, "= ");
		jbuf_char(&j, ',');
		if (*eq != '=') {
			/* a word without a key */
			jbuf_string(&j, "text", 4);
			jbuf_char(&j, ':');
			jbuf_string(&j, p, (size_t)(eq - p));
			p = eq;
			continue;
		}
		jbuf_string(&j, p, (size_t)(eq - p));
		jbuf_char(&j, ':');
		p = eq + 1;
		if (*p == '"') {
			p++;
			end = p;
			while (*end != '\0' &&
			       !(*end == '"' && ends_value(end + 1)))
				end++;
			jbuf_string(&j, p, (size_t)(end - p));
			p = *end ? end + 1 : end;
		} else {
			n = strcspn(p, " ");
			if (is_number(p, n))
				for (size_t i = 0; i < n; i++)
					jbuf_char(&j, p[i]);
			else
				jbuf_string(&j, p, n);
			p += n;
		}
	}
	jbuf_char(&j, '}');
	j.buf[j.len] = '\0';
}

static void log_vemit(enum log_level level, const char *msg, const char *fmt,
                      va_list ap) __attribute__((format(printf, 3, 0)));

static void
log_vemit(enum log_level level, const char *msg, const char *fmt, va_list ap)
{
	char line[2048];
	struct timespec ts;
	struct tm tm;
	int n;

	clock_gettime(CLOCK_REALTIME, &ts);
	gmtime_r(&ts.tv_sec, &tm);
	n = snprintf(line, sizeof(line),
	             "%04d-%02d-%02dT%02d:%02d:%02d.%03ldZ %s msg=%s",
	             tm.tm_year + 1900, tm.tm_mon + 1, tm.tm_mday, tm.tm_hour,
	             tm.tm_min, tm.tm_sec, ts.tv_nsec / 1000000,
	             level_names[level], msg);
	if (n > 0 && (size_t)n < sizeof(line))
		vsnprintf(line + n, sizeof(line) - (size_t)n, fmt, ap);
	/* One write per line, so lines from two daemons never interleave. */
	if (log_json) {
		char json[16384]; /* every byte of line escaped fits */
		log_to_json(line, json, sizeof(json));
		fprintf(stderr, "%s\n", json);
	} else {
		log_escape_controls(line);
		fprintf(stderr, "%s\n", line);
	}
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
