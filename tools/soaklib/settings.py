# SPDX-License-Identifier: Apache-2.0
"""tools/soak's settings, read from the environment once at import, and
what every part uses: log() and prepare()."""
import os
import random
import subprocess
import sys
import time

ROOT = os.path.abspath(os.path.join(os.path.dirname(__file__), "..", ".."))
RULES = os.path.join(ROOT, "conf", "prometheus", "cascade.rules.yml")


def env_num(name, default, kind=float):
    try:
        return kind(os.environ.get(name, default))
    except ValueError:
        sys.exit("soak: %s must be a number" % name)


MINUTES = env_num("SOAK_MINUTES", 10)
RATE = env_num("SOAK_RATE", 100)
MODE = os.environ.get("SOAK_MODE", "auto")
FAULT_EVERY = env_num("SOAK_FAULT_EVERY", 40)
ALERTS = os.environ.get("SOAK_ALERTS", "1") != "0"
LATE_BOUND = env_num("SOAK_LATE_BOUND", 5)
SEED = int(os.environ.get("SOAK_SEED") or random.SystemRandom().randrange(
    1, 10 ** 6))
DURATION = MINUTES * 60
# The longest delay published: minutes in a long soak, shorter in a short
# one, so that the drain stays a fraction of the run.
MAX_DELAY = int(min(180, max(15, DURATION / 4)))
# A message is cancelled only this far before its due time (s), so that the
# request has been read when it would be delivered.
CANCEL_AHEAD = min(30, MAX_DELAY / 2)
NODE_GID = 64300  # + the node's index: its group id (meta skgid)
# Prometheus' binary, set by tools/soak from prepare() (None: no alerts).
PROMETHEUS = None


def log(fmt, *args):
    print("soak %s %s" % (time.strftime("%H:%M:%S"), fmt % args),
          flush=True)


def prepare():
    """Install what is missing and build, as make run does."""
    subprocess.run(["make", "-s", "-C", ROOT, "deps"], check=True)
    subprocess.run([os.path.join(ROOT, "tools", "install-deps"),
                    "nftables"], check=True)
    build = os.environ.get("CASCADE_BUILD", "build")
    subprocess.run(["make", "-s", "-C", ROOT, "all", "BUILD=" + build],
                   check=True)
    if not ALERTS:
        return None
    return subprocess.run(
        [os.path.join(ROOT, "tools", "prometheus-bin"), "prometheus"],
        check=True, capture_output=True, text=True,
        env=dict(os.environ, PROMETHEUS_BIN_DIR=os.path.join(
            ROOT, build, "prometheus"))).stdout.strip()
