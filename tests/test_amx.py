"""The bf16 products on AMX tiles (cc/engine/amx_gemm.h; on by default where the CPU has them,
TF_RNN_OPS_BF16_AMX=0 turns them off) through bf16::GemmConverted, checked by
tests/amx_checks.cc against a double reference of the same bf16 operands over shapes around the
tiles' edges (rows, pairs and columns below, at and past multiples of 16, the ones past on tiles
configured for them; both panel widths and a last panel of 1-15 columns; odd K; accumulate or
not; column ranges that must leave the other columns alone; operands on cache lines or off;
B's next pieces fetched ahead where the caller says B streams, inside B).

Here the tile instructions are emulated in C++ (TFRNN_AMX_EMULATE: tools/build_amx_checks.sh
with EMULATE=1), which runs the kernel's blocking, strides and tails on any CPU with
AVX512_BF16 (the register blocks of the tails need it); the same cases with the tiles off check
the reference and the register blocks alone. On a CPU with AMX the instructions themselves run
as well (test_tiles_on_this_cpu; tools/gpu_session.sh's amx_cpu stage on the GPU machine's
host)."""

import os
import platform
import re
import shutil
import subprocess

import pytest

from test_packaging import _cpu_flags

REPO = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
BUILD = os.path.join(REPO, "tools", "build_amx_checks.sh")


FLAGS = _cpu_flags() if os.path.exists("/proc/cpuinfo") else set()
pytestmark = pytest.mark.skipif(
    platform.machine() != "x86_64" or "avx512_bf16" not in FLAGS or shutil.which("g++") is None,
    reason="needs x86-64 with AVX512_BF16 and g++")


def _build(tmp_path, emulate):
    out = str(tmp_path / ("amx_checks_emu" if emulate else "amx_checks"))
    env = dict(os.environ, EMULATE="1" if emulate else "0")
    r = subprocess.run(["bash", BUILD, out], cwd=REPO, env=env, capture_output=True, text=True,
                       timeout=600)
    assert r.returncode == 0, r.stdout + r.stderr
    return out


def _run(binary, tiles):
    env = dict(os.environ, TF_RNN_OPS_BF16_AMX="1" if tiles else "0")
    r = subprocess.run([binary], cwd=REPO, env=env, capture_output=True, text=True, timeout=600)
    out = r.stdout + r.stderr
    assert r.returncode == 0, out
    m = re.search(r"(\d+) cases, (\d+) failed, tiles (on|off)", out)
    assert m, out
    assert int(m.group(1)) > 2000 and int(m.group(2)) == 0, out
    assert m.group(3) == ("on" if tiles else "off"), out
    return out


@pytest.fixture(scope="module")
def emulated(tmp_path_factory):
    return _build(tmp_path_factory.mktemp("amx"), emulate=True)


def test_tiles_emulated(emulated):
    out = _run(emulated, tiles=True)
    m = re.search(r"(\d+) emulated tile products, (\d+) of them on fewer than 16 rows, pairs or columns",
                  out)
    assert m, out
    assert int(m.group(1)) > 10000, out  # the cases past 16 pairs ran on tiles
    assert int(m.group(2)) > 1000, out  # and their rows and pairs past the last whole tiles too
    # The cases told that B streams fetched its next pieces ahead, every line inside B.
    m = re.search(r"(\d+) lines of B fetched ahead, (\d+) of them outside B", out)
    assert m, out
    assert int(m.group(1)) > 1000 and int(m.group(2)) == 0, out


def test_register_blocks_alone(emulated):
    out = _run(emulated, tiles=False)
    assert "0 emulated tile products, 0 of them" in out, out


@pytest.mark.skipif("amx_bf16" not in FLAGS or "amx_tile" not in FLAGS,
                    reason="the tile instructions need a CPU with AMX")
def test_tiles_on_this_cpu(tmp_path):
    _run(_build(tmp_path, emulate=False), tiles=True)
