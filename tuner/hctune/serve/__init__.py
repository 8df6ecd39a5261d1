"""`hctune serve` and `hctune worker`: a web app and JSON API over the results database (app.py),
and the processes that run the studies it queues (worker.py)."""
