/* SPDX-License-Identifier: Apache-2.0 */
/*
 * The INI file, read with inih: each key handed to config_set (the key
 * table, config_keys.c), each error reported with its file, line and key
 * (config_error.c), then the checks that need more than one key or the
 * environment (config_check.c).
 */
#include "config_int.h"

#include <errno.h>
#include <ini.h>
#include <stdio.h>
#include <string.h>

/* [retry] and [retry.QUEUE] keys; their names depend on the user's queues. */
static void
config_retry(struct config_parse *p, const char *section, const char *name,
             const char *value, const char *key)
{
	struct retry_policy *rp;
	const char *why = "";

	if (strcmp(section, "retry") == 0) {
		rp = &p->cfg->retry.def;
	} else if (section[6] == '\0') {
		config_error(p, p->line, key, "[retry.] needs a queue name");
		return;
	} else {
		rp = retry_section(&p->cfg->retry, section + 6);
		if (rp == NULL) {
			config_error(p, p->line, key,
			             "more than %d [retry.*] sections, or a "
			             "queue name longer than 255 bytes",
			             RETRY_MAX_POLICIES);
			return;
		}
	}
	switch (retry_set(rp, name, value, &why)) {
	case 0:
		if (rp->line == 0)
			rp->line = p->line;
		return;
	case -2:
		config_error(p, p->line, key,
		             "unknown key (max_retries, delays, backoff, "
		             "initial, multiplier, max, jitter)");
		return;
	case -3:
		config_error(p, p->line, key, "given twice");
		return;
	default:
		config_error(p, p->line, key, "%s: \"%s\"", why, value);
		return;
	}
}

/* A [target] section's name, or NULL when section is not one. */
static const char *
target_section(const char *section)
{
	if (strncmp(section, "target", 6) != 0)
		return NULL;
	if (section[6] == '\0')
		return section + 6;
	return section[6] == ' ' ? section + 7 : NULL;
}

/* "target NAME", for errors. */
static void
target_key(const struct config_parse *p, char *out, size_t size)
{
	snprintf(out, size, "target %.*s", (int)p->target.len, p->target.name);
}

/* A [target NAME] header (NAME, len bytes, after "target "). */
static void
config_target_begin(struct config_parse *p, const char *name, size_t len)
{
	char key[CONFIG_STR_MAX + 8];

	memset(&p->target, 0, sizeof(p->target));
	p->target.active = 1;
	p->target.line = p->line;
	if (len >= sizeof(p->target.name)) {
		config_error(p, p->line, "target", "name longer than %d bytes",
		             (int)sizeof(p->target.name) - 1);
		p->target.refused = 1;
		return;
	}
	memcpy(p->target.name, name, len);
	p->target.name[len] = '\0';
	p->target.len = len;
	target_key(p, key, sizeof(key));
	if (len == 0) {
		config_error(p, p->line, "target",
		             "no exchange or routing key: [target EXCHANGE] "
		             "paces every routing key of an exchange, [target "
		             "EXCHANGE/KEY] one key, [target /QUEUE] a queue");
		p->target.refused = 1;
	} else if (name[0] == ' ' || name[0] == '\t' || name[len - 1] == ' ' ||
	           name[len - 1] == '\t') {
		config_error(
		    p, p->line, key,
		    "a blank at the start or end of the name: "
		    "exchange and routing key are taken byte for byte");
		p->target.refused = 1;
	}
}

/* Where the [target] section being read was given before; 0: nowhere. */
static int
target_first_line(const struct config_parse *p)
{
	const struct pace *pace = &p->cfg->pace;
	const char *name = p->target.name, *slash;
	size_t len = p->target.len, exlen;

	slash = memchr(name, '/', len);
	exlen = slash ? (size_t)(slash - name) : len;
	for (size_t i = 0; i < pace->n; i++) {
		const struct pace_target *t = &pace->t[i];
		if (t->any_key != (slash == NULL) || t->exchange_len != exlen ||
		    memcmp(t->exchange, name, exlen) != 0)
			continue;
		if (slash == NULL ||
		    (t->routing_key_len == len - exlen - 1 &&
		     memcmp(t->routing_key, slash + 1, len - exlen - 1) == 0))
			return p->cfg->pace_line[i];
	}
	return 0;
}

/* The end of a [target] section (another header, or the end of the file):
 * the target is added with its pace. */
static void
config_target_end(struct config_parse *p)
{
	char key[CONFIG_STR_MAX + 8];
	const char *why;
	int first;

	if (!p->target.active)
		return;
	p->target.active = 0;
	if (p->target.refused)
		return;
	target_key(p, key, sizeof(key));
	if (p->target.pace_line == 0) {
		config_error(p, p->target.line, key,
		             "no pace (pace = N/s, N/m or N/h)");
		return;
	}
	first = target_first_line(p);
	if (first != 0) {
		config_error(p, p->target.line, key,
		             "given twice (first on line %d)", first);
		return;
	}
	if (pace_add(&p->cfg->pace, p->target.name, p->target.len,
	             p->target.per_s, &why) < 0) {
		config_error(p, p->target.line, key, "%s", why);
		return;
	}
	p->cfg->pace_line[p->cfg->pace.n - 1] = p->target.line;
}

/* A key of a [target NAME] section: pace, once. */
static void
config_target(struct config_parse *p, const char *name, const char *value,
              const char *inih_name)
{
	char key[CONFIG_STR_MAX + 64];
	const char *why;
	double per_s;

	/* The header is always seen first (config_section_line); should
	 * inih ever see one that was not, its name is the one there is. */
	if (!p->target.active)
		config_target_begin(p, inih_name, strlen(inih_name));
	snprintf(key, sizeof(key), "target %.*s.%s", (int)p->target.len,
	         p->target.name, name);
	if (strcmp(name, "pace") != 0) {
		config_error(p, p->line, key, "unknown key (pace)");
		return;
	}
	if (p->target.pace_line != 0) {
		config_error(p, p->line, key,
		             "given twice (first on line %d; an indented line "
		             "continues the key above it)",
		             p->target.pace_line);
		return;
	}
	if (pace_parse_rate(value, &per_s, &why) < 0) {
		config_error(p, p->line, key, "%s: \"%s\"", why, value);
		p->target.refused = 1; /* reported: no "no pace" */
		return;
	}
	p->target.per_s = per_s;
	p->target.pace_line = p->line;
}

static int
config_handler(void *user, const char *section, const char *name,
               const char *value)
{
	struct config_parse *p = user;
	const struct config_key *k;
	const char *why;
	char key[256];
	int known_section, first;

	snprintf(key, sizeof(key), "%s.%s", section, name);
	if (strcmp(section, "retry") == 0 ||
	    strncmp(section, "retry.", 6) == 0) {
		config_retry(p, section, name, value, key);
		return 1;
	}
	if (target_section(section) != NULL) {
		config_target(p, name, value, target_section(section));
		return 1;
	}
	k = config_key_find(section, name, &known_section);
	if (!known_section) {
		if (*section == '\0')
			config_error(p, p->line, name,
			             "key outside any section");
		else
			config_error(p, p->line, key, "unknown section [%s]",
			             section);
		return 1;
	}
	if (k == NULL) {
		config_error(p, p->line, key, "unknown key");
		return 1;
	}
	/* inih also hands an indented line to the key above as a continuation.
	 */
	first = *(int *)((char *)p->cfg + k->line_offset);
	if (first != 0) {
		config_error(p, p->line, key,
		             "given twice (first on line %d; an indented line "
		             "continues the key above it)",
		             first);
		return 1;
	}
	if (config_set(p->cfg, k, value, &why) < 0) {
		config_error(p, p->line, key, "%s: \"%s\"", why, value);
		return 1;
	}
	*(int *)((char *)p->cfg + k->line_offset) = p->line;
	return 1;
}

static int
section_known(const char *name, size_t len)
{
	static const char *const known[] = {"broker",  "topology", "router",
	                                    "retry",   "events",   "metrics",
	                                    "console", "log"};

	for (size_t i = 0; i < sizeof(known) / sizeof(known[0]); i++)
		if (strlen(known[i]) == len && memcmp(known[i], name, len) == 0)
			return 1;
	return (len > 6 && memcmp(name, "retry.", 6) == 0) ||
	       (len == 6 && memcmp(name, "target", 6) == 0) ||
	       (len > 6 && memcmp(name, "target ", 7) == 0);
}

/*
 * inih calls the handler for key lines only, so a section header with no
 * keys under it would pass unseen: check every header here.  Here too a
 * [target NAME] section starts (and the one before it ends), with NAME in
 * full.
 */
static void
config_section_line(struct config_parse *p, const char *line)
{
	const char *s = line, *end;
	size_t len;

	if (p->line == 1 && strncmp(s, "\xEF\xBB\xBF", 3) == 0)
		s += 3; /* a UTF-8 byte order mark, which inih skips */
	while (*s == ' ' || *s == '\t')
		s++;
	if (*s != '[')
		return;
	/* Where inih ends the name: at ']', or at a comment (a ';' after a
	 * blank), which makes the line a syntax error it reports. */
	for (end = s + 1; *end != '\0' && *end != ']'; end++)
		if (*end == ';' && (end[-1] == ' ' || end[-1] == '\t'))
			return;
	if (*end != ']')
		return;
	len = (size_t)(end - s - 1);
	config_target_end(p);
	if (!section_known(s + 1, len))
		config_error(p, p->line, NULL, "unknown section [%.*s]",
		             (int)len, s + 1);
	else if (len >= 6 && memcmp(s + 1, "target", 6) == 0)
		config_target_begin(p, len > 6 ? s + 8 : s + 7,
		                    len > 6 ? len - 7 : 0);
}

/* inih reads one line per call; counting them here gives the handler lines. */
static char *
config_reader(char *buf, int size, void *stream)
{
	struct config_parse *p = stream;
	size_t n;

	if (p->fp != NULL) {
		if (fgets(buf, size, p->fp) == NULL)
			return NULL;
	} else {
		const char *nl;
		if (*p->text == '\0')
			return NULL;
		nl = strchr(p->text, '\n');
		n = nl ? (size_t)(nl - p->text) + 1 : strlen(p->text);
		if (n > (size_t)size - 1)
			n = (size_t)size - 1;
		memcpy(buf, p->text, n);
		buf[n] = '\0';
		p->text += n;
	}
	p->line = p->lines_done + 1;
	config_section_line(p, buf);
	n = strlen(buf);
	if (n > 0 && buf[n - 1] == '\n') {
		p->lines_done++;
	} else if (n == (size_t)size - 1) {
		/* The rest of the line would come back as a line of its own. */
		config_error(p, p->line, NULL, "line longer than %d characters",
		             size - 2);
		return NULL;
	}
	return buf;
}

static int
config_parse_any(struct config *cfg, struct config_parse *p)
{
	int rc;

	config_defaults(cfg);
	snprintf(cfg->path, sizeof(cfg->path), "%s", p->name);
	rc = ini_parse_stream(config_reader, p, config_handler, p);
	config_target_end(p);
	/* The handler never fails, so inih's line is a syntax error. */
	if (rc > 0)
		config_error(
		    p, rc, NULL,
		    "syntax error (expected [section] or key = value)");
	config_check(p);
	return p->errors ? -1 : 0;
}

int
config_load(struct config *cfg, const char *path, char *err, size_t errsize)
{
	struct config_parse p = {
	    .cfg = cfg, .name = path, .err = err, .errsize = errsize};
	int rc;

	if (errsize)
		err[0] = '\0';
	p.fp = fopen(path, "r");
	if (p.fp == NULL) {
		snprintf(err, errsize, "%s: cannot open: %s\n", path,
		         strerror(errno));
		return -1;
	}
	rc = config_parse_any(cfg, &p);
	fclose(p.fp);
	return rc;
}

int
config_load_string(struct config *cfg, const char *name, const char *text,
                   char *err, size_t errsize)
{
	struct config_parse p = {.cfg = cfg,
	                         .name = name,
	                         .text = text,
	                         .err = err,
	                         .errsize = errsize};

	if (errsize)
		err[0] = '\0';
	return config_parse_any(cfg, &p);
}
