"""GPU tests (skipped without torch or a CUDA GPU): flashjit.attention, attention_varlen and decode against float32
SDPA, merge, out= reuse, strided views, explicit configs, CUDA-graph capture and replay; torch.compile
(fullgraph=True, no graph break) and torch.export over the custom ops, flash-attn's names against float64, select
for the device's arch; the variants (softcap, ALiBi, sinks) against float64; paged prefill (page_table=,
seqused_k=) against float64. The checks live in gpu_checks.py, gpu_torch_checks.py, gpu_variant_checks.py,
gpu_paged_checks.py, gpu_append_checks.py, gpu_bias_checks.py, gpu_block_mask_checks.py, gpu_seqused_checks.py and
gpu_rel_bias_checks.py, which also run without pytest. Appending to a KV
cache (append_kv, the fused flash_attn_with_kvcache) against torch indexing; bias tensors (bias=) against SDPA's
attn_mask and float64; block masks (flashjit.block_mask, attention(block_mask=)) against Flex's create_block_mask
and SDPA's dense masks; seqused_k over contiguous keys (padded batches) against SDPA's key-padding mask;
relative-logits tables (rel_bias=) against SDPA's float masks built from them."""
import pytest

torch = pytest.importorskip("torch")
if not torch.cuda.is_available():
    pytest.skip("no CUDA GPU", allow_module_level=True)

import gpu_append_checks  # noqa: E402  (needs torch)
import gpu_bias_checks  # noqa: E402
import gpu_block_mask_checks  # noqa: E402
import gpu_checks  # noqa: E402
import gpu_paged_checks  # noqa: E402
import gpu_rel_bias_checks  # noqa: E402
import gpu_seqused_checks  # noqa: E402
import gpu_torch_checks  # noqa: E402
import gpu_variant_checks  # noqa: E402


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


def run_or_skip(check, *args):
    try:
        check(*args)
    except gpu_variant_checks.Skipped as e:
        pytest.skip(str(e))


@pytest.mark.parametrize("case", gpu_variant_checks.VARIANT_CASES, ids=str)
def test_variant_matches_float64(case):
    gpu_variant_checks.check_variant_case(case)


@pytest.mark.parametrize("case", gpu_variant_checks.VARLEN_VARIANT_CASES, ids=str)
def test_varlen_variant_matches_float64(case):
    gpu_variant_checks.check_varlen_variant_case(case)


@pytest.mark.parametrize("case", gpu_variant_checks.DECODE_VARIANT_CASES, ids=str)
def test_decode_variant_matches_float64(case):
    run_or_skip(gpu_variant_checks.check_decode_variant_case, case)


@pytest.mark.parametrize("check", gpu_variant_checks.CHECKS + gpu_variant_checks.DECODE_CHECKS,
                         ids=lambda c: c.__name__.removeprefix("check_"))
def test_variant_check(check):
    run_or_skip(check)


@pytest.mark.parametrize("case", gpu_paged_checks.PAGED_CASES, ids=str)
def test_paged_matches_float64(case):
    gpu_paged_checks.check_paged_case(case)


@pytest.mark.parametrize("check", gpu_paged_checks.CHECKS, ids=lambda c: c.__name__.removeprefix("check_"))
def test_paged_check(check):
    check()


@pytest.mark.parametrize("case", gpu_append_checks.APPEND_CASES, ids=str)
def test_append_matches_torch_indexing(case):
    gpu_append_checks.check_append_case(case)


@pytest.mark.parametrize("check", gpu_append_checks.CHECKS, ids=lambda c: c.__name__.removeprefix("check_"))
def test_append_check(check):
    check()


@pytest.mark.parametrize("check", gpu_bias_checks.CHECKS, ids=lambda c: c.__name__.removeprefix("check_"))
def test_bias_check(check):
    check()


@pytest.mark.parametrize("check", gpu_block_mask_checks.CHECKS, ids=lambda c: c.__name__.removeprefix("check_"))
def test_block_mask_check(check):
    check()


@pytest.mark.parametrize("check", gpu_seqused_checks.CHECKS, ids=lambda c: c.__name__.removeprefix("check_"))
def test_seqused_check(check):
    check()


@pytest.mark.parametrize("check", gpu_rel_bias_checks.CHECKS, ids=lambda c: c.__name__.removeprefix("check_"))
def test_rel_bias_check(check):
    check()
