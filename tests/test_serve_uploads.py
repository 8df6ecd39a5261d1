"""Uploads are bounded and deduplicated, over HTTP on a real server: the same bytes uploaded
again (in any format, text included) are the stored trace (200, nothing stored), a server
holds at most --max-traces traces and --upload-quota MiB (507 past them), and an upload
leaves --min-free MiB free on its disk (507 before a byte is written)."""

import os

import pytest

from serve_support import Served

pytestmark = pytest.mark.timeout(120)


def text_trace(n: int) -> bytes:
    return "".join(f"a t{i} {16 + i}\n" for i in range(n)).encode() + b"f t0\n"


def test_uploads_are_deduplicated_and_bounded(tmp_path):
    data = tmp_path / "data"
    srv = Served(tmp_path / "h.db", "--max-traces", 3, "--upload-quota", 1, "--data-dir", data)
    try:
        status, a = srv.upload(text_trace(5), fmt="text")
        assert status == 201, a
        status, again = srv.upload(text_trace(5), fmt="text")
        assert status == 200 and again["id"] == a["id"], again
        assert srv.upload(text_trace(6), fmt="text")[0] == 201
        status, err = srv.upload(text_trace(80_000), fmt="text")      # 1.3 MB
        assert status == 507 and "--upload-quota" in err["error"], err
        assert srv.upload(text_trace(7), fmt="text")[0] == 201
        status, err = srv.upload(text_trace(8), fmt="text")
        assert status == 507 and "--max-traces" in err["error"], err
        # an already stored trace is still answered
        assert srv.upload(text_trace(5), fmt="text")[0] == 200
        assert len(list((data / "traces").iterdir())) == 3
        assert list((data / "tmp").iterdir()) == []
    finally:
        srv.stop()
    srv = Served(tmp_path / "h.db", "--min-free", 1 << 30,
                 "--data-dir", data)
    try:
        status, err = srv.upload(text_trace(8), fmt="text")
        assert status == 507 and "--min-free" in err["error"], err
    finally:
        srv.stop()
