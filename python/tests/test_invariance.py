"""numprobe.invariance and numprobe.testing.assert_invariant on Python callables (issue 30): a
kernel whose every row is computed in a fixed order is invariant on every check; a split-KV
kernel whose split count follows the batch size (FlashAttention-2's heuristic in miniature)
differs in bits only in the batch check, within the bound; a kernel that is wrong only inside
batches breaks. The kernels are NumPy, written here from the case definition.

Why the healthy kernel is bit-identical by construction: each score is a sum over D of one
row's products and each output a sum over S of one row's weighted values, reduced by NumPy
along a fixed axis of a fixed length, whatever T or B is; nothing is shared between rows. The
split kernel's float32 partial sums (m, l, o per split, merged by the LSE rule) round at other
places when the split count changes, so its bits change with the batch, by float32 roundings
(far within the bf16 bound: the naive bf16 baseline's error is ~2^-8)."""
import pathlib
import sys

import numpy as np
import pytest

import numprobe
import numprobe.testing

ROOT = pathlib.Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT / "examples" / "exec"))
import numprobe_exec  # noqa: E402

SMALL = {"heads": 2, "kv_heads": 1, "head_dim": 16}
FAST = {"seq": 130, "batch_sizes": (1, 3), "tile": (64, 64), "repeats": 2, **SMALL}


def _split_attention(q, k, v, case, splits=None, split_size=None):
    """float32 split-KV attention: the keys cut into ranges of `split_size` keys, or into
    `splits` ranges of ceil(S_max / splits) keys (S_max the longest member: our CUDA decode's
    default geometry), each a (m, l, o) partial in float32, merged with the log-sum-exp rule.
    A ragged batch (case["seq_lens"]): member b holds its first seq_lens[b] keys."""
    B, T, S = case["batch"], case["queries"], case["seq"]
    Hq, Hkv, D = case["heads"], case["kv_heads"], case["head_dim"]
    q = q.astype(np.float32).reshape(B, T, Hq, D)
    k = k.astype(np.float32).reshape(B, S, Hkv, D)
    v = v.astype(np.float32).reshape(B, S, Hkv, D)
    lens = case.get("seq_lens") or [S] * B
    scale = np.float32(case["scale"])
    o = np.zeros((B, T, Hq, D), dtype=np.float32)
    size = split_size or -(-S // splits)
    for b in range(B):
        n = lens[b]
        visible = numprobe_exec.visible_keys({**case, "seq": n})
        for h in range(Hq):
            kv = h // (Hq // Hkv)
            # [T, S]: each score reduced over D on its own (no matmul blocking).
            s = (q[b, :, h][:, None, :] * k[b, :n, kv][None, :, :]).sum(axis=-1) * scale
            s = np.where(visible, s, -np.inf).astype(np.float32)
            parts = []
            for lo in range(0, n, size):
                blk = s[:, lo:lo + size]
                m = blk.max(axis=1, keepdims=True)
                m_safe = np.where(np.isfinite(m), m, np.float32(0))
                p = np.exp(blk - m_safe).astype(np.float32)
                l = p.sum(axis=1, keepdims=True, dtype=np.float32)
                acc = (p[:, :, None] * v[b, lo:min(lo + size, n), kv][None, :, :]).sum(axis=1, dtype=np.float32)
                parts.append((m, l, acc))
            m_all = np.max([m for m, _, _ in parts], axis=0)
            m_all = np.where(np.isfinite(m_all), m_all, np.float32(0))
            l_all = np.zeros_like(parts[0][1])
            acc_all = np.zeros_like(parts[0][2])
            for m, l, acc in parts:
                w = np.exp(np.where(np.isfinite(m), m, -np.inf) - m_all).astype(np.float32)
                l_all = l_all + w * l
                acc_all = acc_all + w * acc
            o[b, :, h] = np.where(l_all > 0, acc_all / np.where(l_all > 0, l_all, 1), 0)
    return o.reshape(B * T, Hq, D)


def one_split(q, k, v, case):
    return _split_attention(q, k, v, case, 1)


def splits_follow_batch(q, k, v, case):
    """More splits when the batch is small, as a split-KV heuristic fills the SMs."""
    return _split_attention(q, k, v, case, 4 if case["batch"] == 1 else 1)


def split_by_longest(q, k, v, case):
    """4 splits of ceil(S_max / 4) keys: in a ragged batch a member's split boundaries follow
    the longest member beside it."""
    return _split_attention(q, k, v, case, splits=4)


def fixed_split_size(q, k, v, case):
    return _split_attention(q, k, v, case, split_size=32)


def wrong_in_batches(q, k, v, case):
    o = one_split(q, k, v, case)
    return o * np.float32(1.05) if case["batch"] > 1 else o


def verdicts(result):
    inv = result.to_dict()["invariance"]
    return {c["name"]: c for c in inv}


def test_a_fixed_order_kernel_is_invariant_on_every_check():
    r = numprobe.invariance(one_split, checks=["repeat", "batch", "decode", "chunk"], **FAST)
    v = verdicts(r)
    assert r.exit_code == 0, r.text()
    assert {n: c["verdict"] for n, c in v.items()} == {
        "repeat": "invariant", "batch": "invariant", "decode": "invariant", "chunk": "invariant"}, r.text()
    # Every comparison compared something: batch 1 and 3 (first and last), decode at 64, 65,
    # 128, 129 keys (the key tile given), chunks of 16 and 65 rows.
    assert v["batch"]["compared"] == 3 * 130 * 2 * 16
    assert [x["label"] for x in v["decode"]["comparisons"]] == ["S=64", "S=65", "S=128", "S=129"]
    assert [x["label"] for x in v["chunk"]["comparisons"]] == ["C=16", "C=65"]
    numprobe.testing.assert_invariant(one_split, ["batch", "decode"], **FAST)


def test_a_split_count_that_follows_the_batch_is_caught_by_the_batch_check_only():
    r = numprobe.invariance(splits_follow_batch, checks=["repeat", "batch", "decode", "chunk"], **FAST)
    v = verdicts(r)
    assert v["batch"]["verdict"] == "within-bound", r.text()
    assert v["batch"]["differing"] > 0 and v["batch"]["first"] is not None
    assert len(v["batch"]["cases"]) == 2 and "member" in v["batch"]["cases"][1]
    for name in ("repeat", "decode", "chunk"):
        assert v[name]["verdict"] == "invariant", (name, r.text())
    assert r.exit_code == 0  # a determinism finding, not an accuracy one
    with pytest.raises(AssertionError, match="not invariant"):
        numprobe.testing.assert_invariant(splits_follow_batch, "batch", **FAST)
    # Required by name: exit 1.
    assert numprobe.invariance(splits_follow_batch, checks="batch", require="batch", **FAST).exit_code == 1


def test_ragged_batches_tell_a_split_geometry_from_the_longest_member_from_a_fixed_split_size():
    # Uniform batches cannot tell them apart: every member has S keys.
    for kernel in (split_by_longest, fixed_split_size):
        r = numprobe.invariance(kernel, checks="batch", ragged=False, **FAST)
        assert verdicts(r)["batch"]["verdict"] == "invariant", r.text()
        assert verdicts(r)["batch"]["ragged"].startswith("not taken"), r.text()
    # Ragged batches (members shorter and longer): the default geometry moves, the fixed size not.
    r = numprobe.invariance(split_by_longest, checks="batch", ragged=True, **FAST)
    v = verdicts(r)["batch"]
    assert v["verdict"] == "within-bound" and v["ragged"] == "run", r.text()
    differing = [x for x in v["comparisons"] if x["differing"] > 0]
    assert differing and all(x["label"].startswith("ragged") for x in differing), v["comparisons"]
    r = numprobe.invariance(fixed_split_size, checks="batch", ragged=True, **FAST)
    v = verdicts(r)["batch"]
    assert v["verdict"] == "invariant", r.text()
    assert any(x["label"].startswith("ragged") for x in v["comparisons"])


def test_a_kernel_wrong_inside_batches_breaks():
    r = numprobe.invariance(wrong_in_batches, checks="batch", **FAST)
    v = verdicts(r)
    assert v["batch"]["verdict"] == "breaks", r.text()
    assert r.exit_code == 1
    assert "invariance" in r.to_json() and "batch" in r.to_markdown()


def test_splits_is_not_applicable_and_refusals_are_not_errors():
    def prefill_only(q, k, v, case):
        if case["queries"] != case["seq"]:
            raise numprobe.Unsupported("T < S: prefill only")
        return one_split(q, k, v, case)

    r = numprobe.invariance(prefill_only, checks=["decode", "splits"], **FAST)
    v = verdicts(r)
    assert v["decode"]["verdict"] == "not-applicable" and "prefill only" in v["decode"]["reason"]
    assert v["splits"]["verdict"] == "not-applicable"
    assert r.exit_code == 0, r.text()
    # Not invariant when required: a refusal is no evidence of invariance.
    assert numprobe.invariance(prefill_only, checks="decode", require="decode", **FAST).exit_code == 1


@pytest.mark.parametrize("kw, place", [({"checks": "batches"}, "checks"), ({"require": ["nope"]}, "require"),
                                       ({"batch_sizes": (0,)}, "batch_sizes"), ({"seq": 0}, "seq"),
                                       ({"repeats": 0}, "repeats"), ({"head_count": 3}, "head_count")])
def test_bad_arguments_raise_value_error_naming_them(kw, place):
    with pytest.raises(ValueError, match=place):
        numprobe.invariance(one_split, **{**FAST, **kw})


def test_a_kernel_that_raises_stops_the_run_naming_it():
    def broken(q, k, v, case):
        raise RuntimeError("launch failed")

    with pytest.raises(RuntimeError, match="broken raised RuntimeError: launch failed"):
        numprobe.invariance(broken, checks="repeat", **FAST)
