"""The service's jobs: the queue (a study's state machine in hc_queue and the workers' rows in
hc_workers; its SQL in hctune.db.queue, behind the storage's one door) and the runner that works it (hctune.jobs.runner: `hctune
worker`, the same search `hctune search` runs). `hctune serve` only enqueues and shows; the
queue's moves are importable from here (`jobs.claim(db)`, `jobs.finish(db, qid)`, ...)."""

from hctune.db.queue import (ACTIVE, WORKER_STATES, beat, cancel, cancelled, claim,  # noqa: F401
                             delete, enqueue, finish, forget_worker, job, jobs, prune_workers,
                             requeue_stuck, start_comparing, start_validating, worker_beat,
                             workers)
