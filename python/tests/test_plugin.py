"""The pytest plugin: @numprobe.cases names each test by its case id over the CLI's
tile-crossing lengths, and a failing kernel's report is printed."""
import numprobe


def test_tile_lengths_cross_every_boundary():
    lengths = numprobe.tile_lengths("tile", "64..1024", (64, 64))
    assert lengths == sorted(set(lengths)) and min(lengths) >= 63 and max(lengths) <= 1025
    for s in lengths:
        assert min(s % 64, 64 - s % 64) <= 1  # k*Bk - 1, k*Bk or k*Bk + 1
    assert {64, 65, 1023, 1024} <= set(lengths)  # both ends of the range, each side of a tile edge


def test_cases_parametrize_by_case_id(pytester):
    pytester.makepyfile("""
        import numpy as np
        import numprobe
        from numprobe.testing import assert_attention_close

        @numprobe.cases(seq="63,65", tile=(64, 64), seq_range="63..65", dtype=["bf16", "f16"],
                        heads=2, kv_heads=1, head_dim=16, mask="causal")
        def test_kernel(case):
            q, k, v = case.inputs()
            o, _ = numprobe.reference.attention(q, k, v, mask="causal")
            if case.fields["dtype"] == "f16":
                o = o * 1.1  # a wrong kernel: 10% too large
            assert_attention_close(o, q, k, v, case=case.id, tile=case.tile)
    """)
    r = pytester.runpytest("-v")
    r.assert_outcomes(passed=2, failed=2)
    out = r.stdout.str()
    assert "test_kernel[attention(T=63,S=63,Hq=2,Hkv=1,D=16,in=bf16,mask=causal,seed=7)] PASSED" in out
    assert "numprobe: attention out of bounds" in out and "worst rows" in out
