# SPDX-License-Identifier: Apache-2.0
# cascade: see README.md.  `make` builds, `make check` runs every test,
# `make test` the fast tier.
PREFIX ?= /usr/local
BUILD ?= build
CC ?= cc
SHELL := /bin/bash

PKGS := librabbitmq inih libmicrohttpd libsystemd openssl libqpid-proton
# Each program is a folder of src/ named after it: the daemon's event loop
# and glue (src/cascade), cascade-ctl, cascade-console (with its browser
# assets) and cascade-publish.  The library they share, libcascade.a, is
# the folders of LAYERS, each a concern (src/README.md): a folder uses only
# the folders before it in this list, and a program uses the library, never
# another program (make check-calls).  The programs take only the modules
# they use.  cascade-bench, a developer's tool, is tools/benchmark/*.c.
LAYERS := core time wire web routing metrics config records broker
PROGRAMS := cascade cascade-ctl cascade-console cascade-publish
LIB_SRCS := $(sort $(foreach l,$(LAYERS),$(wildcard src/$(l)/*.c)))
DAEMON_SRCS := $(sort $(wildcard src/cascade/*.c))
CTL_SRCS := $(sort $(wildcard src/cascade-ctl/*.c))
CONSOLE_SRCS := $(sort $(wildcard src/cascade-console/*.c))
PUBLISH_SRCS := $(sort $(wildcard src/cascade-publish/*.c))
BENCH_SRCS := $(sort $(wildcard tools/benchmark/*.c))
CONSOLE_ASSETS := $(sort $(wildcard src/cascade-console/assets/*))

WARN := -Wall -Wextra -Wshadow -Wstrict-prototypes -Wmissing-prototypes \
	-Wpointer-arith -Wformat=2
ifdef WERROR
WARN += -Werror
endif
CFLAGS ?= -O2 -g
CPPFLAGS += -Iinclude -D_POSIX_C_SOURCE=200809L -D_DEFAULT_SOURCE
# The libraries' flags are asked of pkg-config when a recipe first needs
# them, not when make reads this file: `make run` on a new machine installs
# the packages (deps) before anything is compiled, and a flag read earlier
# would be empty.  Each is asked once (the variable replaces itself).
PKG_CFLAGS = $(eval PKG_CFLAGS := $$(shell pkg-config --cflags $(PKGS)))$(PKG_CFLAGS)
PKG_LIBS = $(eval PKG_LIBS := $$(shell pkg-config --libs $(PKGS)))$(PKG_LIBS)
CRITERION_CFLAGS = $(eval CRITERION_CFLAGS := $$(shell pkg-config --cflags criterion))$(CRITERION_CFLAGS)
CRITERION_LIBS = $(eval CRITERION_LIBS := $$(shell pkg-config --libs criterion))$(CRITERION_LIBS)
ALL_CFLAGS = -std=c11 $(WARN) $(CFLAGS) $(PKG_CFLAGS)
LDLIBS = $(PKG_LIBS) -lev -lm

ifdef SANITIZER
ALL_CFLAGS += -fsanitize=$(SANITIZER) -fno-omit-frame-pointer \
	-fno-sanitize-recover=all
LDFLAGS += -fsanitize=$(SANITIZER)
endif

DAEMON_OBJS := $(DAEMON_SRCS:src/%.c=$(BUILD)/obj/%.o)
LIB_OBJS := $(LIB_SRCS:src/%.c=$(BUILD)/obj/%.o)
CTL_OBJS := $(CTL_SRCS:src/%.c=$(BUILD)/obj/%.o)
PUBLISH_OBJS := $(PUBLISH_SRCS:src/%.c=$(BUILD)/obj/%.o)
BENCH_OBJS := $(BENCH_SRCS:tools/benchmark/%.c=$(BUILD)/obj/benchmark/%.o)
CONSOLE_OBJS := $(CONSOLE_SRCS:src/%.c=$(BUILD)/obj/%.o) \
	$(BUILD)/obj/cascade-console/gen_assets.o
UNIT_SRCS := $(wildcard tests/unit/test_*.c)
UNIT_BINS := $(UNIT_SRCS:tests/unit/%.c=$(BUILD)/tests/%)
LIB := $(BUILD)/libcascade.a

.PHONY: all test unit integration test-slow test-cluster test-rabbitmq4 \
	test-rabbitmq43 test-native test-newcomer test-alerts test-dashboard \
	image test-image \
	test-soak test-waiting test-browser check check-calls \
	run deps deps-clients deps-browser deps-image node-clients \
	fuzz install deb test-deb \
	uninstall \
	format format-check clean

TOOLS := $(BUILD)/cascade-publish $(BUILD)/cascade-bench $(BUILD)/cascade-ctl \
	$(BUILD)/cascade-console

all: $(BUILD)/cascade $(TOOLS)

$(LIB): $(LIB_OBJS)
	rm -f $@
	$(AR) rcs $@ $(LIB_OBJS)

$(BUILD)/cascade-publish: $(PUBLISH_OBJS) $(LIB)
	$(CC) $(LDFLAGS) -o $@ $(PUBLISH_OBJS) $(LIB) $(LDLIBS)

$(BUILD)/cascade-ctl: $(CTL_OBJS) $(LIB)
	$(CC) $(LDFLAGS) -o $@ $(CTL_OBJS) $(LIB) $(LDLIBS)

# cascade-console: src/cascade-console/*.c, and its browser assets built
# in as C arrays (src/cascade-console/gen-assets: coreutils and sed only).
$(BUILD)/cascade-console: $(CONSOLE_OBJS) $(LIB)
	$(CC) $(LDFLAGS) -o $@ $(CONSOLE_OBJS) $(LIB) $(LDLIBS) -lpthread
$(BUILD)/gen/console_assets.c: src/cascade-console/gen-assets $(CONSOLE_ASSETS)
	@mkdir -p $(dir $@)
	sh src/cascade-console/gen-assets $@ $(CONSOLE_ASSETS)
$(BUILD)/obj/cascade-console/gen_assets.o: $(BUILD)/gen/console_assets.c
	@mkdir -p $(dir $@)
	$(CC) $(CPPFLAGS) -Isrc/cascade-console $(ALL_CFLAGS) -MMD -MP -c -o $@ $<

ifneq ($(BENCH_SRCS),)
$(BUILD)/cascade-bench: $(BENCH_OBJS) $(LIB)
	$(CC) $(LDFLAGS) -o $@ $(BENCH_OBJS) $(LIB) $(LDLIBS)
endif

$(BUILD)/obj/benchmark/%.o: tools/benchmark/%.c
	@mkdir -p $(dir $@)
	$(CC) $(CPPFLAGS) $(ALL_CFLAGS) -MMD -MP -c -o $@ $<

$(BUILD)/cascade: $(DAEMON_OBJS) $(LIB)
	$(CC) $(LDFLAGS) -o $@ $(DAEMON_OBJS) $(LIB) $(LDLIBS)

# A file's private headers (src/cascade/daemon_int.h, src/cascade-ctl/ctl.h)
# are beside it, where #include "..." looks first.
$(BUILD)/obj/%.o: src/%.c
	@mkdir -p $(dir $@)
	$(CC) $(CPPFLAGS) $(ALL_CFLAGS) -MMD -MP -c -o $@ $<

# A unit test links the library, and any object it names as a
# prerequisite (the test_daemon_* files: two daemon files and the stubs of
# what they call, tests/unit/daemon_fixture.c).
$(BUILD)/tests/%: tests/unit/%.c $(LIB)
	@mkdir -p $(dir $@)
	$(CC) $(CPPFLAGS) $(ALL_CFLAGS) $(CRITERION_CFLAGS) -MMD -MP -o $@ $< \
		$(filter $(BUILD)/obj/%.o,$^) $(LIB) $(LDFLAGS) $(LDLIBS) \
		$(CRITERION_LIBS)
$(BUILD)/obj/tests/%.o: tests/unit/%.c
	@mkdir -p $(dir $@)
	$(CC) $(CPPFLAGS) $(ALL_CFLAGS) $(CRITERION_CFLAGS) -MMD -MP -c -o $@ $<
$(BUILD)/tests/test_daemon_flow $(BUILD)/tests/test_daemon_window \
	$(BUILD)/tests/test_daemon_native: $(BUILD)/obj/cascade/daemon_sort.o \
	$(BUILD)/obj/cascade/daemon_flow.o $(BUILD)/obj/tests/daemon_fixture.o

# The fast tier: installs what is missing (Debian packages), builds, runs
# the unit tests, the alert rules' tests and the integration tests that need
# one broker, but the browser's (test-browser: its packages are some 400 MB
# that this tier does without; make check runs it).
test: deps deps-clients
	$(MAKE) unit test-alerts integration

# What CI runs (.ci/run): every run of the test plan (docs/development.md,
# tests/integration/plan.py) with warnings as errors: this machine's
# RabbitMQ 3.10.8, Debian 13's 4.0.5 and Debian 14's 4.3.6 in both waiting
# modes, the sanitized fast tier, the fuzzers for a bounded time and a
# newcomer's make run, in two lanes side by side (tools/check).  Each part
# says how long it took, and the table at the end.
check: deps deps-clients deps-browser deps-image node-clients
	tools/check

# Every test on every run, as by hand before resolving an issue that
# changes how cascade talks to the broker (docs/development.md says which).
check-full: deps deps-clients deps-browser deps-image node-clients
	tools/check --full

# Everything the unit and integration tests run, built (tools/check
# builds it with -j2 first, while the other lane waits on the network).
test-bins: all $(UNIT_BINS)

# The unit binaries, UNIT_JOBS at a time (each test in a binary one at a
# time), each binary's output kept together; every one runs, and any that
# fails fails the target.
UNIT_JOBS ?= 2
UNIT_RUNS := $(UNIT_BINS:$(BUILD)/tests/%=unit-run-%)
unit: $(UNIT_BINS)
	@$(MAKE) --no-print-directory -k -O -j$(UNIT_JOBS) $(UNIT_RUNS)
unit-run-%:
	@echo "== $(BUILD)/tests/$*"; $(BUILD)/tests/$* --jobs 1

# -rfEx: failures, errors and expected failures, with their reasons, in the
# summary, so a CI log says why a fault test was an expected failure.
# TEST_JOBS: tests run side by side (pytest-xdist), each worker with a
# private broker of its own; the modules that start brokers for the module
# keep to one worker (conftest.py).  Most of a test is waiting for a delay,
# so three share this 2-core machine.  CLUSTER_JOBS: the same for the
# cluster tests, three nodes each.  1: one at a time.
TEST_JOBS ?= 3
CLUSTER_JOBS ?= 2
# TESTS: which integration tests (a file, or file::test), all by default.
# INTEGRATION_SLOW=1: the slow tier's tests in the same session as the
# fast tier's (tools/check: one broker start per worker for both, and the
# slow tests packed among the others).
PYTEST_ARGS ?=
TESTS ?= tests/integration
# TEST_TMPDIR: where the tests' brokers keep their data (and pytest its
# temporary files): /dev/shm when it is a memory file system with 4 GiB
# free, so that quorum queues' write-ahead logs are not synced to a disk
# (measured on 2026-11-29, four test modules on this machine: the brokers
# used a fifth less CPU, and the kernel's block workers none); /tmp
# otherwise (a container's 64 MB /dev/shm).  Nothing there outlives a
# test session.
TEST_TMPDIR ?= $(shell [ -w /dev/shm ] && \
	[ "$$(stat -f -c %T /dev/shm 2>/dev/null)" = tmpfs ] && \
	[ "$$(df -k --output=avail /dev/shm | tail -1)" -ge 4194304 ] && \
	echo /dev/shm || echo /tmp)
# --durations=25: where a run's time goes, in every CI log.
PYTEST_BASE := TMPDIR=$(TEST_TMPDIR) CASCADE_BUILD=$(BUILD) \
	CASCADE_TEST_LATE_SCALE=$(if $(SANITIZER),3,1) \
	/usr/bin/python3 -m pytest -q -rfEx \
	--durations=25 --dist loadgroup
PYTEST := $(PYTEST_BASE) -n $(TEST_JOBS)
integration: all
	$(PYTEST) -m "not cluster and $(if $(INTEGRATION_SLOW),,not slow and )not \
		newcomer and not soak and not browser and not image" \
		$(PYTEST_ARGS) $(TESTS)

# The single-broker tests that take over 10 s each (a few minutes in all).
test-slow: deps
	$(MAKE) all
	$(PYTEST) -m slow $(PYTEST_ARGS) $(TESTS)

# The tests that start several RabbitMQ nodes (a few minutes each).
test-cluster: deps
	$(MAKE) all
	$(PYTEST_BASE) -n $(CLUSTER_JOBS) -m cluster $(PYTEST_ARGS) $(TESTS)

# The fast tier, the slow and the cluster tests on another Debian release:
# in a cached root that tools/debian-root builds on first use (as root, a
# few minutes), in a build directory of its own, warnings as errors.
# test-rabbitmq4: Debian 13 trixie, RabbitMQ 4.0.5, rabbitmq-c 0.15, gcc 14.
# test-rabbitmq43: Debian 14 forky, RabbitMQ 4.3.6, rabbitmq-c 0.18.1.
BUILD_RABBITMQ4 ?= build-deb13
BUILD_RABBITMQ43 ?= build-deb14
ROOT_TIERS ?= test test-slow test-cluster
test-rabbitmq4:
	tools/debian-root trixie run make BUILD=$(BUILD_RABBITMQ4) WERROR=1 \
		PYTEST_ARGS='$(PYTEST_ARGS)' TESTS='$(TESTS)' $(ROOT_TIERS)
test-rabbitmq43:
	tools/debian-root forky run make BUILD=$(BUILD_RABBITMQ43) WERROR=1 \
		PYTEST_ARGS='$(PYTEST_ARGS)' TESTS='$(TESTS)' $(ROOT_TIERS)

# The same tests on RabbitMQ 4.3.6 with [topology] mode = native for every
# daemon that does not set its own (tests/integration/helpers.py): each
# message waits its last second in a holding queue, over AMQP 1.0.
# NATIVE_TIERS: integration (the fast tier, the default), test-slow,
# test-cluster.
# NATIVE_SKIP: the test modules no waiting mode changes (the command line
# and config, install and systemd, cascade-ctl's management API reading),
# left out there for CI's time.
NATIVE_TIERS ?= integration
NATIVE_SKIP ?= --ignore=tests/integration/test_cli.py \
	--ignore=tests/integration/test_deploy.py \
	--ignore=tests/integration/test_ctl_dlx.py
test-native:
	tools/debian-root forky run env CASCADE_TEST_MODE=native make \
		BUILD=$(BUILD_RABBITMQ43) WERROR=1 \
		PYTEST_ARGS='$(NATIVE_SKIP) $(PYTEST_ARGS)' TESTS='$(TESTS)' \
		$(NATIVE_TIERS)

# A newcomer: a fresh minimal Debian 12 root (mmdebstrap, git and make
# only; a copy of the package test's bare root when there is one), a clone of this repository's HEAD in it, the README's `make run`
# until the daemon is ready, and the README's first example against it.
# As root; about ten minutes, most of it apt.  NEWCOMER_SUITE=trixie|forky
# for Debian 13 or 14.
NEWCOMER_SUITE ?= bookworm
test-newcomer:
	NEWCOMER_SUITE=$(NEWCOMER_SUITE) $(PYTEST_BASE) -n 0 -m newcomer \
		$(PYTEST_ARGS) $(TESTS)

# The container image (conf/container/Containerfile): make image builds
# it as IMAGE with podman or docker, whichever is here (tools/image).
# make test-image installs podman, makes the base image from Debian's
# packages when podman lacks it (no registry here), builds the image as
# IMAGE_TEST with podman and runs tests/integration/test_image.py against
# it: as root, about two minutes on a fresh machine.
IMAGE ?= cascade:latest
IMAGE_TEST ?= localhost/cascade:test
image:
	tools/image build $(IMAGE)
test-image: export CASCADE_IMAGE_ENGINE = podman
test-image: deps-image
	@mkdir -p $(BUILD)
	tools/image base
	tools/image build $(IMAGE_TEST) >$(BUILD)/image-build.log 2>&1 || \
		{ cat $(BUILD)/image-build.log; exit 1; }
	@podman image prune -f --filter label=cascade.stage=build >/dev/null
	CASCADE_IMAGE=$(IMAGE_TEST) $(PYTEST_BASE) -n 0 -m image \
		$(PYTEST_ARGS) $(TESTS)

# The Grafana dashboard (conf/grafana) against Grafana's published schema
# (the types of npm's @grafana/schema, checked by tsc), its queries parsed
# by promtool and its metrics those of docs/CONTRACT.md: tools/check-dashboard.
test-dashboard:
	@command -v npm >/dev/null || tools/install-deps nodejs npm
	@CASCADE_GRAFANA_CHECK_DIR=$(CURDIR)/$(BUILD)/grafana-check \
		PROMETHEUS_BIN_DIR=$(CURDIR)/$(BUILD)/prometheus \
		tools/check-dashboard

# tools/soak for one minute (random faults on a three-node cluster, and its
# checker), on this machine's RabbitMQ; the long runs are by hand (README).
test-soak: deps
	$(MAKE) all
	$(PYTEST_BASE) -n 0 -m soak $(PYTEST_ARGS) $(TESTS)

# A full installation at WAITING_N waiting (tools/bench waiting: fill,
# trickle, sizes, list and cancel, the console, a daemon and a broker
# restart), checked by tools/check-waiting against the ten-million bounds
# per waiting message, so that a cost that grows faster than N fails here
# (make check-full, at 200,000: about 6 minutes).  The fill at 4 x
# WAITING_FILL_RATE msg/s, well under what this machine moves with the
# other lane busy, so that the trickle beside it must be on time too.
WAITING_N ?= 200000
WAITING_FILL_RATE ?= 250
test-waiting: deps
	$(MAKE) all
	WAITING_N=$(WAITING_N) WAITING_FILL_RATE=$(WAITING_FILL_RATE) \
		BENCH_BUILD=$(CURDIR)/$(BUILD) \
		BENCH_OUT=$(CURDIR)/$(BUILD)/bench-results tools/bench waiting
	tools/check-waiting $(BUILD)/bench-results/waiting-$(WAITING_N).json

# The console in a real browser (tests/integration/test_console_browser.py):
# Debian's chromium, chromedriver and selenium, which deps-browser
# installs (some 400 MB; make test does without them), one test of about
# 40 s, screenshots in $(BUILD)/console-screenshots/.
test-browser: deps deps-browser
	$(MAKE) all
	$(PYTEST_BASE) -n 0 -m browser $(PYTEST_ARGS) \
		tests/integration/test_console_browser.py

# Runs the daemon in the foreground; starts a private RabbitMQ when
# CASCADE_BROKER_URL is not set.
run: deps
	$(MAKE) all
	CASCADE_BUILD=$(BUILD) tools/cascade-run conf/cascade.ini

# The alert rules (conf/prometheus) against their unit tests, with the
# promtool of Debian's prometheus package (unpacked, not installed:
# tools/prometheus-bin).
test-alerts:
	@promtool=$$(PROMETHEUS_BIN_DIR=$(CURDIR)/$(BUILD)/prometheus \
		tools/prometheus-bin promtool) && \
		$$promtool check rules conf/prometheus/cascade.rules.yml && \
		cd tests/prometheus && \
		$$promtool test rules cascade.rules.test.yml

# The folders of src/ as layers (src/README.md, tools/check-layers): an
# #include or a call from a library folder goes only to the folders before
# it in LAYERS, and a program uses the library, never another program;
# tests/layers plants each kind of use against them and sees it fail.
# Inside a folder, no cycle of calls among its files (tools/call-cycles, by
# their symbols): each folder's files form a tree of calls.
check-calls: all
	tools/check-layers "$(LAYERS)" "$(PROGRAMS)" $(LIB_OBJS) \
		$(DAEMON_OBJS) $(CTL_OBJS) $(CONSOLE_OBJS) $(PUBLISH_OBJS)
	CASCADE_BUILD=$(BUILD) /usr/bin/python3 -m pytest -q -p no:cacheprovider \
		tests/layers
	tools/call-cycles $(LIB_OBJS)
	tools/call-cycles $(CTL_OBJS)
	tools/call-cycles $(CONSOLE_OBJS)
	tools/call-cycles $(DAEMON_OBJS)

deps:
	@tools/install-deps

deps-browser:
	@tools/install-deps --browser

# podman, runc and mmdebstrap, for make test-image (and make check, which
# runs it).
deps-image:
	@tools/install-deps --image

# The clients docs/clients.md's snippets are run with (some 500 MB):
# make test and make check need them, make run does not.
deps-clients:
	@tools/install-deps --clients

# amqplib for test_client_docs (the version it names), from npm into
# build/node, on this machine before any lane starts: the Debian roots
# share that directory, and npm inside them cannot verify this machine's
# registry certificate chain.  The test installs it itself when run alone.
node-clients: deps-clients
	@test -d build/node/node_modules/amqplib || \
		npm install --prefix build/node --cache build/npm-cache \
		--no-audit --no-fund --ignore-scripts \
		"$$(sed -n 's/^AMQPLIB = "\(.*\)"$$/\1/p' \
		tests/integration/test_client_docs.py)"

# libFuzzer on the pure parsers, FUZZ_SECONDS each (clang, ASan, UBSan).
# The library is compiled once for all of them (it was once per fuzzer:
# some 10 s each on this 2-core machine).
FUZZ_SECONDS ?= 60
FUZZERS := duration config headers records zone cron form wire
FUZZ_SRCS := $(LIB_SRCS)
FUZZ_CFLAGS = -std=c11 -g -O1 $(CPPFLAGS) -fno-sanitize-recover=all \
	$(shell pkg-config --cflags $(PKGS))
fuzz:
	@mkdir -p $(BUILD)/fuzz/obj
	@set -e; for s in $(FUZZ_SRCS); do \
		clang $(FUZZ_CFLAGS) -fsanitize=fuzzer-no-link,address,undefined \
			-c -o $(BUILD)/fuzz/obj/$$(basename $$s .c).o $$s; \
	done
	@set -e; for f in $(FUZZERS); do \
		clang $(FUZZ_CFLAGS) -fsanitize=fuzzer,address,undefined \
			-o $(BUILD)/fuzz/$$f tests/fuzz/fuzz_$$f.c \
			$(addprefix $(BUILD)/fuzz/obj/,$(notdir $(FUZZ_SRCS:.c=.o))) \
			$(LDLIBS); \
		mkdir -p $(BUILD)/fuzz/corpus-$$f; \
		cp -n tests/fuzz/corpus/$$f/* $(BUILD)/fuzz/corpus-$$f/ 2>/dev/null || true; \
		echo "== fuzz $$f for $(FUZZ_SECONDS)s"; \
		$(BUILD)/fuzz/$$f -max_total_time=$(FUZZ_SECONDS) -print_final_stats=1 \
			-artifact_prefix=$(BUILD)/fuzz/$$f- \
			$(BUILD)/fuzz/corpus-$$f 2>&1 | \
			grep -E "stat::number_of_executed_units|stat::peak_rss|ERROR|SUMMARY|Done" ; \
		test $${PIPESTATUS[0]} -eq 0; \
	done

# `make install PREFIX=/usr [DESTDIR=/tmp/stage]`: the daemon in sbin (systemd
# runs it, users do not), the tools in bin, the config in SYSCONFDIR (/etc
# when PREFIX is /usr) and never over one already there, the man pages, and
# the systemd unit with its paths rewritten to the installed ones.
BINDIR ?= $(PREFIX)/bin
SBINDIR ?= $(PREFIX)/sbin
SYSCONFDIR ?= $(if $(filter /usr,$(PREFIX)),/etc,$(PREFIX)/etc)
MANDIR ?= $(PREFIX)/share/man
UNITDIR ?= $(PREFIX)/lib/systemd/system
MANPAGES := conf/cascade.8 conf/cascade-ctl.8 conf/cascade-console.8 \
	conf/cascade-publish.8
INSTALL_SED := sed -e 's|/usr/sbin/cascade|$(SBINDIR)/cascade|g' \
	-e 's|/etc/cascade/|$(SYSCONFDIR)/cascade/|g'

install: all
	install -d $(DESTDIR)$(BINDIR) $(DESTDIR)$(SBINDIR) \
		$(DESTDIR)$(SYSCONFDIR)/cascade $(DESTDIR)$(MANDIR)/man8 \
		$(DESTDIR)$(UNITDIR)
	install -m 755 $(BUILD)/cascade $(DESTDIR)$(SBINDIR)/cascade
	install -m 755 $(TOOLS) $(DESTDIR)$(BINDIR)/
	$(INSTALL_SED) conf/cascade.service > $(DESTDIR)$(UNITDIR)/cascade.service
	$(INSTALL_SED) conf/cascade.8 > $(DESTDIR)$(MANDIR)/man8/cascade.8
	$(INSTALL_SED) conf/cascade-ctl.8 > $(DESTDIR)$(MANDIR)/man8/cascade-ctl.8
	$(INSTALL_SED) conf/cascade-console.8 > \
		$(DESTDIR)$(MANDIR)/man8/cascade-console.8
	$(INSTALL_SED) conf/cascade-publish.8 > \
		$(DESTDIR)$(MANDIR)/man8/cascade-publish.8
	chmod 644 $(DESTDIR)$(UNITDIR)/cascade.service \
		$(MANPAGES:conf/%=$(DESTDIR)$(MANDIR)/man8/%)
	@ini=$(DESTDIR)$(SYSCONFDIR)/cascade/cascade.ini; \
	if [ -e $$ini ]; then \
		echo "kept $$ini; the new default is conf/cascade.ini"; \
	else \
		echo "install -m 644 conf/cascade.ini $$ini"; \
		install -m 644 conf/cascade.ini $$ini; \
	fi

# `make deb`: a Debian package of the daemon and its tools, built by
# dpkg-buildpackage from tools/deb/debian/ in a staging tree under
# $(BUILD)/deb/, against this system's libraries, and clean under lintian
# (tools/deb/build).  Out: $(BUILD)/cascade_$(DEB_VERSION)_ARCH.deb.
# `tools/debian-root SUITE run make deb` builds Debian 13's or 14's.
DEB_VERSION ?= 0.1.0-1
deb:
	@tools/install-deps
	@tools/install-deps --deb
	tools/deb/build $(BUILD) $(DEB_VERSION)

# The package built for Debian 12 (here), 13 and 14 (the roots), each
# installed with apt into a fresh copy of a bare root of its release, its
# cascade --check run and one delayed message carried by the installed
# daemon and cascade-publish (tools/deb/test; as root, about two minutes).
# DEB_SUITES: which releases.
DEB_SUITES ?= bookworm trixie forky
test-deb:
	tools/deb/test $(DEB_SUITES)

# Leaves the config unless it is the unchanged default.
uninstall:
	rm -f $(DESTDIR)$(SBINDIR)/cascade \
		$(TOOLS:$(BUILD)/%=$(DESTDIR)$(BINDIR)/%) \
		$(MANPAGES:conf/%=$(DESTDIR)$(MANDIR)/man8/%) \
		$(DESTDIR)$(UNITDIR)/cascade.service
	@ini=$(DESTDIR)$(SYSCONFDIR)/cascade/cascade.ini; \
	if cmp -s conf/cascade.ini $$ini; then \
		echo "rm -f $$ini"; rm -f $$ini; \
	elif [ -e $$ini ]; then \
		echo "kept $$ini: it differs from conf/cascade.ini"; \
	fi; \
	rmdir $(DESTDIR)$(SYSCONFDIR)/cascade 2>/dev/null || true

# The repository's style (.clang-format, clang-format 14 as in Debian 12).
# CI runs format-check, which changes nothing and fails on any difference.
FORMAT_FILES = $(wildcard src/*/*.c src/*/*.h include/*.h tests/unit/*.c \
	tests/unit/*.h tests/fuzz/*.c tools/*/*.c tools/*/*.h)
format:
	clang-format -i $(FORMAT_FILES)
format-check:
	clang-format --dry-run --Werror $(FORMAT_FILES)

clean:
	rm -rf $(BUILD)

-include $(DAEMON_OBJS:.o=.d) $(LIB_OBJS:.o=.d) $(CTL_OBJS:.o=.d) \
	$(BENCH_OBJS:.o=.d) $(CONSOLE_OBJS:.o=.d) $(PUBLISH_OBJS:.o=.d) \
	$(UNIT_BINS:=.d) $(BUILD)/obj/tests/daemon_fixture.d
