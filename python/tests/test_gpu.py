"""GPU tests (skipped without torch or a CUDA GPU): flashjit.attention, attention_varlen and decode against float32
SDPA, merge, out= reuse, strided views, explicit configs, CUDA-graph capture and replay; torch.compile
(fullgraph=True, no graph break) and torch.export over the custom ops, flash-attn's names against float64, select
for the device's arch. The checks live in gpu_checks.py and gpu_torch_checks.py, which also run without pytest."""
import pytest

torch = pytest.importorskip("torch")
if not torch.cuda.is_available():
    pytest.skip("no CUDA GPU", allow_module_level=True)

import gpu_checks  # noqa: E402  (needs torch)
import gpu_torch_checks  # noqa: E402


@pytest.fixture(autouse=True)
def seeded():
    torch.manual_seed(0)


@pytest.mark.parametrize("case", gpu_checks.CASES, ids=str)
def test_matches_sdpa(case):
    gpu_checks.check_case(case)


@pytest.mark.parametrize("case", gpu_checks.VARLEN_CASES, ids=str)
def test_varlen_matches_sdpa(case):
    gpu_checks.check_varlen_case(case)


@pytest.mark.parametrize("case", gpu_checks.DECODE_CASES, ids=str)
def test_decode_matches_sdpa(case):
    gpu_checks.check_decode_case(case)


@pytest.mark.parametrize("check", gpu_checks.CHECKS, ids=lambda c: c.__name__.removeprefix("check_"))
def test_check(check):
    check()


@pytest.mark.parametrize("check", gpu_torch_checks.CHECKS, ids=lambda c: c.__name__.removeprefix("check_"))
def test_torch_integration(check):
    check()
