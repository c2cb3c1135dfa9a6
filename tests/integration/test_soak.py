# SPDX-License-Identifier: Apache-2.0
"""tools/soak for one minute, as CI runs it: a three-node cluster, two
daemons, traffic at 100 messages a second and faults on top of each other
(seed 181: kill -9 and SIGTERM of daemons, a node stopped, a node
partitioned, poison and cancellations), then its checker's verdict.  The 30-minute runs on every
broker are by hand (README, "The soak")."""
import json
import os
import subprocess

import pytest

from helpers import ROOT


@pytest.mark.soak
def test_a_one_minute_soak_loses_nothing_and_delivers_nothing_early(
        tmp_path):
    if os.geteuid() != 0:
        pytest.skip("the soak's partition needs root (nftables)")
    env = dict(os.environ, SOAK_MINUTES="1", SOAK_SEED="181",
               SOAK_FAULT_EVERY="6", SOAK_ALERTS="0",
               SOAK_DIR=str(tmp_path))
    env.pop("CASCADE_BROKER_URL", None)
    r = subprocess.run([os.path.join(ROOT, "tools", "soak")], env=env,
                       capture_output=True, text=True, timeout=900)
    print(r.stdout[-12000:], r.stderr[-4000:])
    path = tmp_path / "report.json"
    assert path.exists(), "no report: the soak did not run"
    rep = json.loads(path.read_text())
    held = sum(v[2] + v[3] for v in
               rep["broker_holds_for_dead_lettering"].values())
    if rep["lost"] and rep["early"] == 0 and held >= rep["lost"]:
        # as in the fault suite (faults.stalled_in_broker)
        pytest.xfail("RabbitMQ's dead-letter worker still holds %d "
                     "expired messages (%d missing)" % (held, rep["lost"]))
    assert rep["lost"] == 0 and rep["early"] == 0, rep
    assert rep["cancelled_but_delivered"] == [], rep
    assert rep["poison"] > 0 and rep["poison_parked"] == rep["poison"], rep
    assert rep["cancelled"] > 0, rep
    # the schedule of seed 181 ran, and traffic flowed through it
    assert set(rep["faults"]) == {"cancel", "kill9", "node_stop",
                                  "partition", "poison", "sigterm"}, \
        rep["faults"]
    assert not rep["faults_failed"], rep["faults_failed"]
    # Traffic flowed: 100 a second is the aim, but a loaded CI machine
    # publishes fewer (3,412 in one run of make check); the rate is a
    # benchmark's to judge, not this test's.
    assert rep["published"] > 1500 and rep["delivered_once"] > \
        0.9 * rep["published"], rep
    assert r.returncode == 0, r.stdout[-3000:]
