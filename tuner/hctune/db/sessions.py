"""The service's login sessions (hc_sessions), stored so that /logout ends one everywhere."""

from __future__ import annotations


class Sessions:
    """hctune.db.Database's questions about the service's sessions."""

    def add_session(self, key: str, created: str, expires: str) -> None:
        """Store a session (its id's hash), dropping those expired by `created`."""
        with self.transaction() as c:
            c.execute("DELETE FROM hc_sessions WHERE expires < :now", now=created)
            c.execute("INSERT INTO hc_sessions (id, created, expires) VALUES (:id, :created,"
                      " :expires)", id=key, created=created, expires=expires)

    def delete_session(self, key: str) -> bool:
        with self.transaction() as c:
            return c.execute("DELETE FROM hc_sessions WHERE id = :id", id=key).rowcount == 1

    def session_expires(self, key: str) -> str | None:
        row = self.query_one("SELECT expires FROM hc_sessions WHERE id = :id", id=key)
        return row["expires"] if row is not None else None
