# SPDX-License-Identifier: Apache-2.0
"""tools/soak in parts: settings (the environment, log, prepare), cluster
(the three nodes and a partition), traffic (publishers, the checker's
consumers), daemons (one daemon of the soak), faults (the schedule and
each fault), report (what arrived, the alerts, the verdict) and soak (the
run that ties them together).  tools/soak puts its own directory on
sys.path, then tests/integration, whose helpers these import."""
