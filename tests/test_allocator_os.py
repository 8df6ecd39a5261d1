"""HC and the operating system (issue 9): mapped blocks of any alignment, heap growth, the
self-adjusting mmap threshold, memory given back (decay, malloc_trim), glibc's malloc API."""

from __future__ import annotations

import subprocess

import pytest

from conftest import preload_env


@pytest.fixture(params=["hc", "hc-debug"])
def hc_build(request):
    return request.getfixturevalue("hcmalloc_so" if request.param == "hc" else "hcmalloc_debug_so")


def test_alignments_up_to_2_pow_35(c_program, hc_build):
    """memalign/posix_memalign/aligned_alloc from 32 B to 32 GiB alignment: aligned, writable,
    and free() unmaps exactly the block's mapping (an offset of 4 GiB or more used to be cut to
    32 bits and free() unmapped the wrong range)."""
    res = subprocess.run([str(c_program("hc_align_big")), "35"], capture_output=True, text=True,
                         timeout=60, env=preload_env(hc_build))
    assert res.returncode == 0 and res.stdout.startswith("ok "), res.stdout + res.stderr
