/* One line per event on stderr, key=value fields, levels checked first. */
#include "log.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

enum log_level log_threshold = LOG_LEVEL_INFO;

static const char *const level_names[] = {"debug", "info", "warn", "error"};

void
log_init(enum log_level level)
{
	log_threshold = level;
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
	fprintf(stderr, "%s\n", line);
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
