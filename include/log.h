/* SPDX-License-Identifier: Apache-2.0 */
/*
 * One logging module for the daemon and its tools.
 *
 * Every event is one line: "ts level msg=... key=value ...".  Callers pass a
 * message word and printf-style key=value fields; the level is checked before
 * anything is formatted, so debug lines cost nothing when they are off.
 * Values with blanks are written in double quotes.  With json set, the same
 * fields become one JSON object per line: {"ts":..,"level":..,"msg":..,...}.
 * Control characters never reach the output raw, so one event stays one line.
 */
#ifndef CASCADE_LOG_H
#define CASCADE_LOG_H

#include <stdarg.h>
#include <stddef.h>

enum log_level {
	LOG_LEVEL_DEBUG,
	LOG_LEVEL_INFO,
	LOG_LEVEL_WARN,
	LOG_LEVEL_ERROR,
};

extern enum log_level log_threshold;

/* level: lowest level written; json: one JSON object per line. */
void log_init(enum log_level level, int json);

/*
 * The line log_emit writes for one event, without the newline, in out
 * (size > 0): text, or with json set a JSON object; ts is the time stamp.
 * The JSON fields come from fmt's own text, not from what the arguments
 * printed: a value holding quotes, blanks or "k=" stays one value.
 * (Exposed for the unit tests; log_emit stamps the time and writes.)
 */
void log_format(char *out, size_t size, int json, const char *ts,
                enum log_level level, const char *msg, const char *fmt, ...)
    __attribute__((format(printf, 7, 8)));

/* fmt continues the line after "msg=<msg>": e.g. " queue=%s reason=%s". */
void log_emit(enum log_level level, const char *msg, const char *fmt, ...)
    __attribute__((format(printf, 3, 4)));

#define log_debug(msg, ...)                                                    \
	do {                                                                   \
		if (log_threshold <= LOG_LEVEL_DEBUG)                          \
			log_emit(LOG_LEVEL_DEBUG, msg, __VA_ARGS__);           \
	} while (0)
#define log_info(msg, ...)                                                     \
	do {                                                                   \
		if (log_threshold <= LOG_LEVEL_INFO)                           \
			log_emit(LOG_LEVEL_INFO, msg, __VA_ARGS__);            \
	} while (0)
#define log_warn(msg, ...) log_emit(LOG_LEVEL_WARN, msg, __VA_ARGS__)
#define log_error(msg, ...) log_emit(LOG_LEVEL_ERROR, msg, __VA_ARGS__)

/* Start-up failures and broken invariants only: logs and exits 1. */
void fatalx(const char *msg, const char *fmt, ...)
    __attribute__((format(printf, 2, 3), noreturn));

#endif
