# SPDX-License-Identifier: Apache-2.0
"""The test plan: on which runs of `make check` each integration test runs,
and why (docs/development.md, "The test plan", shows this table).

A run is one broker in one waiting mode:

  3.10.8   Debian 12: RabbitMQ 3.10.8, rabbitmq-c 0.11 (this machine)
  4.0.5    Debian 13: RabbitMQ 4.0.5, rabbitmq-c 0.15
  4.3.6    Debian 14: RabbitMQ 4.3.6, rabbitmq-c 0.18, ladder waiting
  native   Debian 14: RabbitMQ 4.3.6, native waiting (its fast tier sanitized)

`make check` sets CASCADE_TEST_RUN to the run's name, and conftest.py leaves
out what the plan does not give that run.  Without it (`make test`, `make
check-full`, a developer's pytest) every test runs.

What the broker or rabbitmq-c does differently (the dead-letter worker,
delivery limits, the consumer timeout, streams, permissions, frames, TLS,
table decoding, AMQP 1.0) runs on every broker it differs on; what is
cascade's own logic over those runs once, on the newest broker, in each
waiting mode it can change.

RabbitMQ 4.3.6 and rabbitmq-c 0.18 are in both of their runs, but native
waiting keeps every delay the tests use (up to `native_window`, 10 min)
off the ladder.  So what the 4.3 ladder does differently (its hops through
the dead-letter worker, delivery limits, the consumer timeout inside
quorum queues, requeues to the front) runs in the 4.3.6 run, and what only
needs the broker and the library (streams, permissions, the console, TLS,
the decoding of tables) runs in native waiting, the mode `auto` chooses on
4.3 (BROKERS: each broker once, in the mode it waits in by default).
"""

RUNS = ("3.10.8", "4.0.5", "4.3.6", "native")

EVERY = RUNS
BROKERS = ("3.10.8", "4.0.5", "native")
# The two ends of the broker range, each in the mode it waits in by
# default: 3.x with Mnesia, and 4.3 with Khepri.  What RabbitMQ 4.0 does
# not change from both ends (streams and their offsets, permissions and
# user-id checks, passive declares, quorum queues' arguments) runs on these;
# 4.0.5 keeps what 4.0 or rabbitmq-c 0.15 does its own way (the
# dead-letter worker and delivery limits, AMQP 1.0, the decoding of tables,
# TLS, channel errors, the management API).  make check-full runs every
# test on 4.0.5 too.
BROKER_ENDS = ("3.10.8", "native")
NATIVE = ("native",)
LADDER = ("3.10.8", "4.0.5", "4.3.6")
NEWEST = ("4.3.6", "native")
ONCE = ("4.3.6",)
HOST = ("3.10.8",)
ENDS = ("3.10.8", "4.3.6")
# Clusters: each metadata store once, Mnesia (3.10.8; 4.0 keeps it too)
# and Khepri (4.3, where it is the only one), 4.3 in the mode auto chooses.
CLUSTERS = ("3.10.8", "native")
AMQP10 = ("4.0.5", "4.3.6")

# module, or module::test (a test's own line wins over its module's):
# (runs, why)
PLAN = {
    "test_broker_versions": (EVERY, "kills, upgrades and consumer cancels: "
                             "what each broker redelivers and cancels"),
    "test_cli": (ONCE, "the command line and config: no broker behaviour"),
    "test_clients": (LADDER, "real clients' publishes as each broker and "
                     "rabbitmq-c take them; waiting changes nothing"),
    "test_client_docs": (ONCE, "docs/clients.md's snippets through "
                         "pika, kombu, amqplib, amqp091-go and rabbitmq-c, "
                         "as the newest broker and rabbitmq-c take them: "
                         "what the page says is the same on each "
                         "(test_clients and test_headers take those "
                         "clients' headers on every ladder run); waiting "
                         "changes nothing"),
    "test_client_docs::test_a_qpid_proton_snippet_does_what_the_page_"
    "says": (AMQP10, "the page's Qpid Proton snippets: RabbitMQ 4's AMQP "
             "1.0 in 4.0 and 4.3"),
    "test_console": (BROKER_ENDS, "the console over 3.x's and 4.3's "
                     "streams, logins and user-ids, and libmicrohttpd "
                     "0.9.75's and 1.0's"),
    "test_console::test_header_bombs_in_the_events_stream_cost_the_reader_"
    "no_connection": (BROKERS, "rabbitmq-c 0.11, 0.15 and 0.18 decode "
                      "tables differently"),
    "test_console_actions": (BROKER_ENDS, "the console's cancels, "
                             "reschedules, pauses and requeues through 3.x's "
                             "and 4.3's streams and user-id checks"),
    "test_console_ctl": (BROKER_ENDS, "cascade-ctl through the console's "
                         "index against reading 3.x's and 4.3's streams"),
    "test_console_gate": (BROKER_ENDS, "the gate and hostile data over "
                          "libmicrohttpd 0.9.75's and 1.0's HTTP parsing"),
    "test_console_browser": (HOST, "the pages in chromium: they do not "
                             "vary by broker, and the Debian roots would "
                             "need some 400 MB more for a browser"),
    "test_restart_order": (EVERY, "a broker restart mid-delay, the "
                           "plugin's own test: each broker's recovery and "
                           "dead-letter worker, native waiting's holding "
                           "queues, and the reorder window over both"),
    "test_burst": (BROKER_ENDS, "a burst due together, the window on and "
                   "off: the ladder's backlog in the return queue on 3.x, "
                   "the holding queue in the mode 4.3 waits in by default"),
    "test_publishers": (ONCE, "which header decides is cascade's own "
                        "logic; waiting changes nothing"),
    "test_publishers::test_an_amqp10_publisher_gets_its_delay_and_its_"
    "message_intact": (AMQP10, "RabbitMQ 4's AMQP 1.0 (/exchanges/ "
                       "addresses, annotations made headers) in 4.0 and "
                       "4.3; the waiting mode changes nothing"),
    "test_ctl": (BROKER_ENDS, "passive declares (403 or 404), stream reading "
                 "and requeue through 3.x's and 4.3's brokers"),
    "test_ctl::test_requeue_keeps_a_due_time_still_ahead": (
        NEWEST, "requeue's due-time logic; its broker steps are the other "
        "requeue tests'"),
    "test_ctl_dlx": (ONCE, "cascade-ctl's reading of fake management "
                     "answers and its options: no broker behaviour"),
    "test_ctl_dlx::test_default_timeout_warns": (
        LADDER, "each broker's management API and advanced.config"),
    "test_ctl_dlx::test_ten_seconds_no_warning": (
        LADDER, "each broker's management API and advanced.config"),
    "test_ctl_dlx::test_password_from_the_environment": (
        LADDER, "each broker's management API"),
    "test_ctl_dlx::test_not_an_administrator_is_unknown": (
        LADDER, "each broker's management permissions"),
    "test_decode_bounds": (BROKERS, "rabbitmq-c 0.11, 0.15 and 0.18 "
                           "decode tables differently"),
    "test_delay": (EVERY, "every hop rides each broker's dead-letter "
                   "worker"),
    "test_deploy": (ONCE, "install, systemd and man pages: no broker "
                    "behaviour"),
    "test_errors": (BROKERS, "a missing exchange closes a channel: each "
                    "broker's way"),
    "test_events": (BROKER_ENDS, "streams, offsets and replay: 3.x's and 4.3's "
                    "streams"),
    "test_events::test_list_shows_what_waits_with_filters_and_json": (
        NEWEST, "list's filters and JSON: cascade's logic"),
    "test_events::test_a_stalled_reading_of_cancellations_recovers": (
        NATIVE, "a stream's reader on a cluster: streams keep their own "
        "Raft coordinator whatever the metadata store, so once, on the "
        "newest (a node's loss runs on Mnesia in test_faults)"),
    "test_faults": (EVERY, "kills, cuts and broker restarts: what each "
                    "broker redelivers"),
    "test_faults::test_three_node_cluster_one_node_stopped": (
        CLUSTERS, "a node's loss: quorum queues and streams over each "
        "metadata store, Mnesia and Khepri (the 4.3 ladder's hops are the "
        "restart tests')"),
    "test_headers": (LADDER, "header values as rabbitmq-c decodes them; "
                     "waiting changes nothing"),
    "test_native": (EVERY, "4.3's holding queue over AMQP 1.0; the older "
                    "brokers check that native refuses and auto keeps the "
                    "ladder"),
    "test_native::test_native_kill_9_with_messages_held_by_the_queue": (
        NEWEST, "native waiting only"),
    "test_native::test_native_a_cancel_recorded_while_down_holds_at_start": (
        NEWEST, "native waiting only"),
    "test_production": (BROKER_ENDS, "metrics, logs and a least-privileged "
                        "user: 3.x's and 4.3's permissions"),
    "test_properties": (EVERY, "properties and bodies intact through each "
                        "broker and each waiting mode"),
    "test_rabbitmq43": (EVERY, "delivery limits, consumer timeouts, Khepri "
                        "and deprecations: each version's own"),
    "test_requests": (BROKER_ENDS, "requests and claims through 3.x's and "
                      "4.3's streams, with kills"),
    "test_requests::test_reschedule_later_with_ctl_is_not_delivered_at_the_"
    "old_time": (NEWEST, "reschedule logic"),
    "test_requests::test_reschedule_earlier_with_ctl_arrives_at_the_new_"
    "time": (NEWEST, "reschedule logic"),
    "test_requests::test_reschedule_earlier_with_the_header": (
        NEWEST, "reschedule logic"),
    "test_requests::test_another_user_cannot_cancel_or_reschedule_a_"
    "message": (NEWEST, "ownership logic; test_trust_records covers it on "
                "every broker"),
    "test_retry": (NEWEST, "retry policies: cascade's logic, published as "
                   "any delay"),
    "test_schedules": (EVERY, "cron, pause and pacing: the issue asks for "
                       "every broker in both waiting modes (hops, waits "
                       "and diverts ride each broker)"),
    "test_shards": (BROKER_ENDS, "shards over 3.x's and 4.3's quorum queues "
                    "and leader placement"),
    "test_shards::test_changing_shards_drains_the_former_layout": (
        NEWEST, "draining a former layout: cascade's logic"),
    "test_shards::test_a_levels_shards_lead_on_different_nodes": (
        NATIVE, "leader placement (x-queue-leader-locator, which the "
        "metadata store does not decide): once, on the newest broker, "
        "whose cluster tier runs anyway"),
    "test_soak": ((), "a minute of random faults on a three-node cluster: "
                  "make check-full only (test_faults has the kills, cuts, "
                  "restarts and the node's loss it draws from); longer "
                  "soaks by hand on each broker (README)"),
    "test_stuck": (EVERY, "backpressure, frames and redelivery counts: "
                   "each broker's and rabbitmq-c's"),
    "test_tls": (BROKERS, "TLS through each rabbitmq-c, and Proton's in "
                 "native waiting"),
    "test_trust": (BROKER_ENDS, "user-id checks, permissions and streams: "
                   "3.x's and 4.3's (docs/security.md)"),
    "test_trust_records": (BROKER_ENDS, "user-id checks, permissions and "
                           "streams: 3.x's and 4.3's (docs/security.md)"),
    "test_unique_and_repeats": (BROKER_ENDS, "requests and claims through "
                                "3.x's and 4.3's streams, with kills"),
    "test_unique_and_repeats::test_unique_keep_and_replace": (
        NEWEST, "unique-id logic"),
    "test_unique_and_repeats::test_unique_race_between_two_daemons": (
        NEWEST, "unique-id logic between two daemons"),
    "test_unique_and_repeats::test_a_series_of_5_every_second_numbered_"
    "without_drift": (NEWEST, "repeat logic"),
    "test_unique_and_repeats::test_an_endless_series_stops_when_"
    "cancelled": (NEWEST, "repeat logic"),
    "test_unique_and_repeats::test_p_series_keeps_its_window_in_small_"
    "segments": (LADDER, "each broker's stream arguments; waiting changes "
                 "nothing"),
    "test_unique_and_repeats::test_an_old_series_record_is_written_again_"
    "before_it_ages_out": (ONCE, "the refresh of series records: cascade's "
                           "logic (every daemon's start reads P.series on "
                           "every broker)"),
    "test_newcomer": (HOST, "a fresh Debian 12 root (make test-newcomer)"),
    "test_image": (HOST, "the container image (Debian 12 slim, "
                   "rabbitmq-c 0.11) against this machine's broker, "
                   "under podman and runc (make test-image)"),
}


def runs_of(module, name):
    """The runs the test `name` (without its parameters) of `module` (a
    file name without .py) is planned for; KeyError when its module is not
    in the plan."""
    key = module + "::" + name
    if key in PLAN:
        return PLAN[key][0]
    return PLAN[module][0]


def markdown():
    """The plan as the table docs/development.md shows (test_deploy.py
    checks that they agree)."""
    lines = ["| tests | " + " | ".join(RUNS) + " | why |",
             "|---|" + "---|" * len(RUNS) + "---|"]
    for key, (runs, why) in PLAN.items():
        cells = ["yes" if r in runs else "" for r in RUNS]
        lines.append("| `%s` | %s | %s |" % (key, " | ".join(cells), why))
    return "\n".join(lines) + "\n"
