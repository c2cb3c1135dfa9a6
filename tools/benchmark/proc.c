/* SPDX-License-Identifier: Apache-2.0 */
/*
 * What the processes moving the messages cost, read from /proc: CPU
 * seconds of the mover (--mover-pid) and of the broker, the mover's RSS,
 * and the broker's pid when --broker-pid is not given.  Linux only, like
 * the benchmark.
 */
#include <dirent.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "bench.h"

/* utime + stime of a process, in seconds; -1 if it cannot be read. */
double
proc_cpu(long pid)
{
	char path[64], buf[1024], *p;
	unsigned long ut, st;
	FILE *fp;

	if (pid <= 0)
		return -1;
	snprintf(path, sizeof(path), "/proc/%ld/stat", pid);
	fp = fopen(path, "r");
	if (fp == NULL)
		return -1;
	if (fgets(buf, sizeof(buf), fp) == NULL) {
		fclose(fp);
		return -1;
	}
	fclose(fp);
	p = strrchr(buf, ')'); /* the command may hold spaces */
	if (p == NULL ||
	    sscanf(p + 2, "%*c %*d %*d %*d %*d %*d %*u %*u %*u %*u %*u %lu %lu",
	           &ut, &st) != 2)
		return -1;
	return (double)(ut + st) / (double)sysconf(_SC_CLK_TCK);
}

/* A process's resident set (VmRSS) in KiB; -1 if it cannot be read. */
long
proc_rss_kib(long pid)
{
	char path[64], line[256];
	long kib = -1;
	FILE *fp;

	snprintf(path, sizeof(path), "/proc/%ld/status", pid);
	fp = fopen(path, "r");
	if (fp == NULL)
		return -1;
	while (fgets(line, sizeof(line), fp) != NULL)
		if (sscanf(line, "VmRSS: %ld kB", &kib) == 1)
			break;
	fclose(fp);
	return kib;
}

/*
 * The only beam.smp on the machine, or 0 when there is none or several:
 * with several, which one is the broker under test cannot be told, and a
 * wrong one would report another broker's CPU.
 */
long
proc_find_beam(void)
{
	DIR *dir = opendir("/proc");
	struct dirent *e;
	long found = 0;
	int n = 0;

	if (dir == NULL)
		return 0;
	while ((e = readdir(dir)) != NULL) {
		char path[300], comm[64] = "";
		FILE *fp;
		long pid = strtol(e->d_name, NULL, 10);
		if (pid <= 0)
			continue;
		snprintf(path, sizeof(path), "/proc/%ld/comm", pid);
		fp = fopen(path, "r");
		if (fp == NULL)
			continue;
		if (fgets(comm, sizeof(comm), fp) != NULL &&
		    strncmp(comm, "beam.smp", 8) == 0) {
			found = pid;
			n++;
		}
		fclose(fp);
	}
	closedir(dir);
	return n == 1 ? found : 0;
}
