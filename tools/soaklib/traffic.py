# SPDX-License-Identifier: Apache-2.0
"""Publishing and consuming: the ledger of what was sent, the publishers
and the checker's consumers."""
import threading
import time

import pika

from .settings import MAX_DELAY


class Ledger:
    """Every message published: id -> dict(sent, due, target, kind,
    confirmed); the cancellations asked for and the poison sent."""

    def __init__(self):
        self.lock = threading.Lock()
        self.msgs = {}
        self.cancelled = {}  # id -> when the request was confirmed
        self.ctl_asked = set()  # ids given to cascade-ctl cancel
        self.poison = set()
        self.unconfirmed = 0

    def add(self, mid, rec):
        with self.lock:
            self.msgs[mid] = rec


def connect(urls, start=0):
    """A blocking connection to the first node of urls (from start) that
    answers, and its index."""
    last = None
    for k in range(len(urls)):
        i = (start + k) % len(urls)
        try:
            p = pika.URLParameters(urls[i])
            p.socket_timeout = 5
            p.blocked_connection_timeout = 30
            return pika.BlockingConnection(p), i
        except Exception as e:
            last = e
    raise last


class Publisher(threading.Thread):
    """Publishes at rate messages a second with confirms, through any node
    that answers; a message whose confirm did not come is counted as
    unconfirmed and left out of the check unless it arrives."""

    def __init__(self, name, urls, prefix, targets, rate, ledger, rnd):
        super().__init__(daemon=True, name=name)
        self.urls, self.prefix, self.targets = urls, prefix, targets
        self.rate, self.ledger, self.rnd = rate, ledger, rnd
        self.stopping = False
        self.seq = 0
        self.errors = 0

    def message(self):
        r = self.rnd.random()
        now_ms = int(time.time() * 1000)
        if r < 0.10:
            return {"x-remaining-delay": 0}, now_ms, "0"
        if r < 0.20:
            d = self.rnd.randint(1, 400)
            return {"x-remaining-delay": d}, now_ms + d, "under resolution"
        if r < 0.70:
            d = self.rnd.randint(1000, min(30000, MAX_DELAY * 1000))
            return {"x-remaining-delay": d}, now_ms + d, "seconds"
        if r < 0.90:
            d = self.rnd.randint(min(30000, MAX_DELAY * 1000 - 1000),
                                 MAX_DELAY * 1000)
            return {"x-remaining-delay": "%dms" % d}, now_ms + d, "minutes"
        at = now_ms + self.rnd.randint(1000, MAX_DELAY * 1000)
        return {"x-deliver-at": at}, at, "x-deliver-at"

    def run(self):
        node = self.rnd.randrange(len(self.urls))
        while not self.stopping:
            try:
                conn, node = connect(self.urls, node)
                ch = conn.channel()
                ch.confirm_delivery()
                # the rate again from now: no burst to catch up an outage
                t0, base = time.time(), self.seq
                while not self.stopping:
                    ahead = t0 + (self.seq - base) / self.rate - time.time()
                    if ahead > 0:
                        time.sleep(ahead)
                    self.publish(ch)
                conn.close()
            except Exception:
                self.errors += 1
                node += 1
                time.sleep(0.5)

    def publish(self, ch):
        self.seq += 1
        mid = "%s-%d" % (self.name, self.seq)
        headers, due, kind = self.message()
        target = self.targets[0] if self.rnd.random() < 0.9 \
            else self.targets[1]
        rec = {"sent": time.time(), "due": due, "target": target,
               "kind": kind, "confirmed": False}
        self.ledger.add(mid, rec)
        ch.basic_publish(self.prefix, target, b"soak " + mid.encode(),
                         pika.BasicProperties(message_id=mid,
                                              delivery_mode=2,
                                              headers=headers),
                         mandatory=True)
        rec["confirmed"] = True


class Checker(threading.Thread):
    """Consumes one target through any node that answers and records every
    arrival, duplicates included; pause() stops consuming (the target then
    fills up), resume() starts again."""

    def __init__(self, urls, queue):
        super().__init__(daemon=True, name="check-" + queue)
        self.urls, self.queue = urls, queue
        self.arrivals = []
        self.stopping = False
        self.paused = threading.Event()
        self.idle = threading.Event()
        self.offline = []  # when its connection failed

    def run(self):
        node = 0
        while not self.stopping:
            if self.paused.is_set():
                self.idle.set()
                time.sleep(0.2)
                continue
            try:
                conn, node = connect(self.urls, node)
                ch = conn.channel()
                ch.basic_qos(prefetch_count=500)

                def on_message(c, m, p, b):
                    self.arrivals.append((time.time(), p.message_id,
                                          m.redelivered, b))
                    c.basic_ack(m.delivery_tag)

                ch.basic_consume(self.queue, on_message)
                self.idle.clear()
                while not self.stopping and not self.paused.is_set():
                    conn.process_data_events(time_limit=0.1)
                conn.close()
            except Exception:
                self.offline.append(time.time())
                node += 1
                time.sleep(0.3)

    def pause(self):
        self.idle.clear()
        self.paused.set()
        self.idle.wait(30)

    def resume(self):
        self.paused.clear()
