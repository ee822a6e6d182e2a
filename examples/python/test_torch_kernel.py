"""PyTorch's fused attention (scaled_dot_product_attention on CUDA: the FlashAttention backend
for bf16/f16 causal T = S) under numprobe's pytest plugin and numprobe.drift, in process.

    pytest examples/python/test_torch_kernel.py          # skipped without torch and a GPU

Each plugin test is one of the CLI's tile-crossing lengths (named by its case id); the drift
test sweeps the lengths on the opaque kernel (its tile inferred, as `numprobe drift` does)
with the inputs handed over as CUDA tensors of the case dtype (kernel_inputs="torch").
The bound is FlashAttention's own acceptance criterion: at most twice the error of the naive
same-precision computation (ratio_to_naive <= 2).
"""
import pytest

import numprobe
from numprobe.testing import assert_attention_close

torch = pytest.importorskip("torch")
if not torch.cuda.is_available():
    pytest.skip("no CUDA device", allow_module_level=True)
F = torch.nn.functional

DTYPES = {"bf16": torch.bfloat16, "f16": torch.float16}


def sdpa(q, k, v, hq, hkv, dtype):
    """q [T, Hq, D], k/v [S, Hkv, D] (numpy float32 or torch) -> O [T, Hq, D] float32 on the host."""
    dt = DTYPES[dtype]
    q, k, v = (torch.as_tensor(a).to("cuda", dt).transpose(0, 1)[None] for a in (q, k, v))
    k = k.repeat_interleave(hq // hkv, dim=1)  # head h reads KV head h // (Hq / Hkv)
    v = v.repeat_interleave(hq // hkv, dim=1)
    with torch.no_grad():
        o = F.scaled_dot_product_attention(q, k, v, is_causal=True)  # T = S: top-left = bottom-right
    return o[0].transpose(0, 1).float().cpu().numpy()


@numprobe.cases(seq="tile", tile=(128, 128), seq_range="64..4096", dtype=["bf16", "f16"], heads=8, kv_heads=2,
                head_dim=128, mask="causal")
def test_sdpa_flash(case):
    q, k, v = case.inputs()
    o = sdpa(q, k, v, 8, 2, case.fields["dtype"])
    assert_attention_close(o, q, k, v, "ratio_to_naive<=2", case=case.id, tile=case.tile, rows=512)


def test_sdpa_drift_in_process():
    def kernel(q, k, v, case):  # torch tensors of the case dtype, on cuda
        return sdpa(q, k, v, case["heads"], case["kv_heads"], case["dtype"])

    r = numprobe.drift(kernel, seq="128..8192", points="tile", heads=8, kv_heads=2, head_dim=128, dtype="bf16",
                       bounds="ratio_to_naive<=2", kernel_inputs="torch")
    print(r.text())
    assert r.exit_code == 0, r.text()
