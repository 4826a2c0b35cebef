"""bfloat16 ops with the bf16 products (cc/engine/bf16_gemm.h: vdpbf16ps, float accumulation)
against the float64 reference, and against the same ops with the products in float
(TF_RNN_OPS_BF16_GEMM=0), in child processes (tests/bf16_checks.py): the bf16 products as the
sizes choose their roads, and with the batch in the SIMD lanes wherever the spec allows
(TF_RNN_OPS_CPU_LANES=1: cc/engine/lanes_gemm.h on pair words).

The bf16 products run only in the avx512 engine on a CPU with AVX512_BF16; elsewhere the
comparison with them is skipped (the float-product run still checks the reference).
"""
import json

import pytest

from child_run import run_check
from test_packaging import _cpu_flags, _supported_isas

# max |ours - ref| / max(1, max |ref|) over outputs and gradients, bf16 inputs. On an
# AVX512_BF16 CPU these cases measure 0.0026-0.0044 with float products and 0.0028-0.0049 with
# bf16 products (the outputs' own rounding to bf16 is up to 2^-9 = 0.002 relative).
TOL = 0.02
# The bf16 products round h and the gate gradients before each product: allowed at most this
# much more error than the float products on the same case (measured: at most 0.0007).
EXTRA = 0.005


def _run(bf16_products, lanes=None, extra=None):
    env = {"TF_RNN_OPS_BF16_GEMM": bf16_products}
    if lanes is not None:
        env["TF_RNN_OPS_CPU_LANES"] = lanes
    env.update(extra or {})
    p = run_check("bf16_checks.py", env=env,
                  unset=("TF_RNN_OPS_ISA", "TF_RNN_OPS_CPU_LANES", "TF_RNN_OPS_BF16_WORDS",
                         "BF16_CHECKS_ONLY"),
                  timeout=600)
    assert p.returncode == 0, (p.stdout + p.stderr)[-6000:]
    rows = [json.loads(line) for line in p.stdout.splitlines() if line.startswith("{")]
    assert rows, p.stdout[-3000:]
    return {r["case"]: r for r in rows}


def _need_bf16_products():
    if "avx512" not in _supported_isas() or "avx512_bf16" not in _cpu_flags():
        pytest.skip("this CPU has no AVX512_BF16: the bf16 products do not run here")


@pytest.fixture(scope="module")
def float_products():
    return _run("0")


@pytest.fixture(scope="module", params=[None, "1"], ids=["roads_by_size", "lanes_forced"])
def bf16_products(request):
    _need_bf16_products()
    return request.param, _run("1", request.param)


def test_float_products_match_reference(float_products):
    for case, r in float_products.items():
        assert r["err"] <= TOL, f"{case}: error {r['err']:.3g} > {TOL}"


def test_bf16_products_match_reference(float_products, bf16_products):
    _, bf16 = bf16_products
    assert bf16.keys() == float_products.keys()
    for case, r in bf16.items():
        f = float_products[case]
        assert r["err"] <= TOL, f"{case}: error {r['err']:.3g} > {TOL}"
        assert r["err"] <= f["err"] + EXTRA, (
            f"{case}: bf16 products error {r['err']:.3g}, float products {f['err']:.3g}")
        # The bf16 products ran: the results differ from the float products' somewhere.
        assert r["checksum"] != f["checksum"], f"{case}: same results with and without"


def test_bf16_words_same_bits(bf16_products):
    """The Keras op's bfloat16 inference with its x, kernels and y read and written as bf16
    words by the engine (cc/engine/rnn_cpu_stack.cc Reads16) gives the bits of the same op with
    the bridge converting them (TF_RNN_OPS_BF16_WORDS=0): the same products on the same pair
    words, y rounded as the bridge rounds it."""
    lanes, words = bf16_products
    converted = _run("1", lanes, {"TF_RNN_OPS_BF16_WORDS": "0", "BF16_CHECKS_ONLY": "keras"})
    assert converted, "no Keras cases ran"
    for case, r in converted.items():
        assert words[case]["bits"] == r["bits"], f"{case}: bits differ with the words read"
