/* SPDX-License-Identifier: Apache-2.0 */
/* prom: the per-target samples of the daemon's /metrics (prom.h). */
#include "prom.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* A quoted label value at *p (after the opening quote), unescaped. */
static int
prom_label_value(const char **p, char *out, size_t size)
{
	const char *s = *p;
	size_t n = 0;

	for (; *s && *s != '"'; s++) {
		char c = *s;
		if (c == '\\' && s[1] != '\0')
			c = *++s == 'n' ? '\n' : *s;
		if (n + 1 < size)
			out[n++] = c;
	}
	if (*s != '"')
		return -1;
	out[n] = '\0';
	*p = s + 1;
	return 0;
}

size_t
prom_targets_parse(char *text, struct prom_target *t, size_t max)
{
	static const char *const names[] = {"cascade_target_refusals_total{",
	                                    "cascade_target_diverted_total{",
	                                    "cascade_target_backoff_seconds{"};
	size_t count = 0;
	char *save = NULL;

	for (char *line = strtok_r(text, "\n", &save); line;
	     line = strtok_r(NULL, "\n", &save)) {
		struct prom_target r = {0}; /* counts start at 0 */
		const char *p = NULL;
		size_t f, i;
		double v;

		for (f = 0; f < 3 && p == NULL; f++)
			if (strncmp(line, names[f], strlen(names[f])) == 0)
				p = line + strlen(names[f]);
		if (p == NULL || strncmp(p, "exchange=\"", 10) != 0)
			continue;
		p += 10;
		if (prom_label_value(&p, r.exchange, sizeof(r.exchange)) < 0 ||
		    strncmp(p, ",routing_key=\"", 14) != 0)
			continue;
		p += 14;
		if (prom_label_value(&p, r.routing_key, sizeof(r.routing_key)) <
		        0 ||
		    strncmp(p, "} ", 2) != 0)
			continue;
		for (i = 0; i < count; i++)
			if (strcmp(t[i].exchange, r.exchange) == 0 &&
			    strcmp(t[i].routing_key, r.routing_key) == 0)
				break;
		if (i == count) {
			if (count == max)
				continue;
			t[count++] = r;
		}
		v = strtod(p + 2, NULL);
		/* f is one past the name that matched */
		if (f == 1)
			t[i].refusals = v;
		else if (f == 2)
			t[i].diverted = v;
		else
			t[i].backoff = v;
	}
	return count;
}

int
prom_value(const char *text, const char *name, double *v)
{
	char sample[PROM_NAME_MAX + 4];
	const char *p;
	char *end;
	size_t n;

	n = (size_t)snprintf(sample, sizeof(sample), "\n%s ", name);
	if (n >= sizeof(sample) || (p = strstr(text, sample)) == NULL)
		return 0;
	p += n;
	*v = strtod(p, &end);
	return end != p && (*end == '\n' || *end == '\0' || *end == ' ');
}

const char *
prom_wait_mode(const char *text)
{
	static const char *const modes[] = {"ladder", "native"};
	char sample[64];

	for (size_t i = 0; i < 2; i++) {
		const char *p = text;
		size_t n = (size_t)snprintf(sample, sizeof(sample),
		                            "\ncascade_wait_mode{mode=\"%s\"} ",
		                            modes[i]);
		while ((p = strstr(p, sample)) != NULL) {
			p += n;
			if (*p == '1')
				return modes[i];
		}
	}
	return NULL;
}
