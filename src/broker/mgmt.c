/* SPDX-License-Identifier: Apache-2.0 */
/*
 * mgmt: the management API's URL and the app env it shows (mgmt.h).  What
 * is in Erlang strings and quoted atoms is no structure: the readers skip
 * them whole.
 */
#include "mgmt.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "escape.h"

/* Percent-decode s[0..n) into out; -1 on a bad escape or no room. */
static int
mgmt_url_decode(const char *s, size_t n, char *out, size_t size)
{
	size_t o = 0;

	for (size_t i = 0; i < n; i++) {
		int ch = (unsigned char)s[i];
		if (ch == '%') {
			if (i + 2 >= n || escape_hex_value(s[i + 1]) < 0 ||
			    escape_hex_value(s[i + 2]) < 0)
				return -1;
			ch = escape_hex_value(s[i + 1]) * 16 +
			     escape_hex_value(s[i + 2]);
			i += 2;
		}
		if (ch == 0 || o + 1 >= size)
			return -1;
		out[o++] = (char)ch;
	}
	out[o] = '\0';
	return 0;
}

void
mgmt_finish(struct mgmt *m, const char *prefix, size_t prefixlen)
{
	int v6 = strchr(m->host, ':') != NULL;

	while (prefixlen > 0 && prefix[prefixlen - 1] == '/')
		prefixlen--;
	snprintf(m->shown, sizeof(m->shown), "http://%s%s%s:%s%.*s",
	         v6 ? "[" : "", m->host, v6 ? "]" : "", m->port, (int)prefixlen,
	         prefix);
	snprintf(m->path, sizeof(m->path), "%.*s/api/config/effective",
	         (int)prefixlen, prefix);
}

int
mgmt_parse(const char *url, struct mgmt *m, const char **why)
{
	const char *p = url + 7, *at, *host, *end, *colon;
	size_t hostlen;

	if (strncmp(url, "https://", 8) == 0) {
		*why = "https is not supported: give the management plugin's "
		       "http listener";
		return -1;
	}
	if (strncmp(url, "http://", 7) != 0 || url[strcspn(url, " \t\r\n")]) {
		*why = "not an http:// URL";
		return -1;
	}
	/* The last @ ends the credentials: a password may hold / or @. */
	at = strrchr(p, '@');
	if (at != NULL) {
		const char *sep = memchr(p, ':', (size_t)(at - p));
		size_t ulen = sep ? (size_t)(sep - p) : (size_t)(at - p);
		if (mgmt_url_decode(p, ulen, m->user, sizeof(m->user)) < 0 ||
		    mgmt_url_decode(sep ? sep + 1 : at,
		                    sep ? (size_t)(at - sep - 1) : 0, m->pass,
		                    sizeof(m->pass)) < 0) {
			*why = "bad percent-encoding in the user or password";
			return -1;
		}
		p = at + 1;
	}
	end = p + strcspn(p, "/?#");
	if (*p == '[') {
		host = p + 1;
		colon = memchr(p, ']', (size_t)(end - p));
		if (colon == NULL) {
			*why = "no ] after the IPv6 address";
			return -1;
		}
		hostlen = (size_t)(colon - host);
		colon = colon + 1 < end && colon[1] == ':' ? colon + 1 : NULL;
	} else {
		host = p;
		colon = memchr(p, ':', (size_t)(end - p));
		hostlen = colon ? (size_t)(colon - p) : (size_t)(end - p);
	}
	if (hostlen == 0 || hostlen >= sizeof(m->host)) {
		*why = "no host";
		return -1;
	}
	memcpy(m->host, host, hostlen);
	m->host[hostlen] = '\0';
	if (colon != NULL) {
		size_t plen = (size_t)(end - colon - 1);
		if (plen == 0 || plen >= sizeof(m->port) ||
		    strspn(colon + 1, "0123456789") < plen) {
			*why = "bad port";
			return -1;
		}
		memcpy(m->port, colon + 1, plen);
		m->port[plen] = '\0';
	} else {
		snprintf(m->port, sizeof(m->port), "%s", MGMT_PORT);
	}
	if (end[strcspn(end, "?#")] != '\0') {
		*why = "a query or fragment: give the URL up to the port, "
		       "or the path prefix";
		return -1;
	}
	if (strlen(end) > 512) {
		*why = "path prefix too long";
		return -1;
	}
	mgmt_finish(m, end, strlen(end));
	return 0;
}

/*
 * The atom at s, bare or quoted, if it is name and a comma follows: what
 * comes after the comma; else NULL.
 */
static const char *
mgmt_atom_comma(const char *s, const char *name)
{
	size_t n = strlen(name);
	int quoted = *s == '\'';

	s += quoted;
	if (strncmp(s, name, n) != 0)
		return NULL;
	s += n;
	if (quoted && *s++ != '\'')
		return NULL;
	s += strspn(s, " \t\r\n");
	return *s == ',' ? s + 1 : NULL;
}

/* The closing quote of the Erlang string or quoted atom at s, or NULL. */
static const char *
mgmt_skip_quoted(const char *s)
{
	char q = *s++;

	for (; *s != q; s++) {
		if (*s == '\\' && s[1] != '\0')
			s++;
		if (*s == '\0')
			return NULL;
	}
	return s;
}

#define ERL_SPACE " \t\r\n"

/*
 * In the text of /api/config/effective, [{App, [{Key, Value}, ...]},
 * ...] (or rabbit's list alone): where the value of key in rabbit's list
 * starts, or NULL when it has no key.  *rabbit: is there a rabbit
 * application?  What is in strings and quoted atoms is no structure.
 */
static const char *
mgmt_env_find(const char *s, const char *key, int *rabbit)
{
	int depth = 0, in_rabbit = 0;
	const char *v;

	*rabbit = 0;
	for (; *s != '\0'; s++) {
		switch (*s) {
		case '"':
		case '\'':
			if ((s = mgmt_skip_quoted(s)) == NULL)
				return NULL;
			break;
		case '{':
			depth++;
			v = s + 1 + strspn(s + 1, ERL_SPACE);
			if (depth == 2 && mgmt_atom_comma(v, "rabbit") != NULL)
				*rabbit = in_rabbit = 1;
			else if (((depth == 4 && in_rabbit) ||
			          (depth == 2 && !*rabbit)) &&
			         (v = mgmt_atom_comma(v, key)) != NULL)
				return v + strspn(v, ERL_SPACE);
			break;
		case '[':
			depth++;
			break;
		case '}':
		case ']':
			if (--depth < 2)
				in_rabbit = 0;
			break;
		default:
			break;
		}
	}
	return NULL;
}

int
mgmt_dlx_timeout(const char *env, int64_t *ms)
{
	int rabbit;
	const char *v = mgmt_env_find(env, MGMT_DLX_KEY, &rabbit);
	char *end;

	if (v == NULL)
		return rabbit ? 0 : -1;
	if (*v < '0' || *v > '9')
		return -1;
	errno = 0;
	*ms = (int64_t)strtoll(v, &end, 10);
	end += strspn(end, ERL_SPACE);
	return errno == 0 && *end == '}' ? 1 : -1;
}

int
mgmt_listens_on(const char *env, int port)
{
	int rabbit, depth = 0;
	const char *v = mgmt_env_find(env, "tcp_listeners", &rabbit);

	for (const char *p = v; p != NULL && *p != '\0'; p++) {
		if (*p == '"' || *p == '\'') {
			if ((p = mgmt_skip_quoted(p)) == NULL)
				return 1;
		} else if (*p == '[' || *p == '{') {
			depth++;
		} else if (*p == ']' || *p == '}') {
			if (depth-- == 0)
				return 0; /* the end of {tcp_listeners, ...} */
		} else if (*p >= '0' && *p <= '9' &&
		           (p == v || strchr("[{, \t\r\n", p[-1]) != NULL)) {
			char *end;
			long n = strtol(p, &end, 10);
			if (n == port)
				return 1;
			p = end - 1;
		}
	}
	return 1;
}

void
mgmt_reason(const char *body, char *out, size_t size)
{
	const char *p = strstr(body, "\"reason\":\"");
	size_t n = 0;

	if (p != NULL) {
		p += 10;
		n = strcspn(p, "\"\\");
	}
	snprintf(out, size, "%.*s", (int)n, p ? p : "");
}

/*
 * MGMT_DLX_KEY from the management API: --management, CASCADE_MANAGEMENT_URL,
 * or by default http://HOST:15672 of the amqp:// URL connected to, with
 * its user and password.  0 with *ms, or -1 with why in a few words.
 */
