"""A run that the teardown test interrupts: sets up a 2-node Db, puts an iptables rule on n1,
prints `ready <run id>` and waits for a signal (at most 600 s: the test kills it at the latest then)."""

from __future__ import annotations

import sys
import threading

from harness.containers.db import Db

with Db(2, image=sys.argv[1]) as db:
    db.exec("n1", f"iptables -A INPUT -s {db.address('n2')} -j DROP")
    print("ready", db.run_id, flush=True)
    threading.Event().wait(600)
