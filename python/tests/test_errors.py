"""Bad input raises ValueError naming the argument."""
import numpy as np
import pytest

import numprobe

Q = np.zeros((8, 2, 4))
K = np.zeros((8, 1, 4))


@pytest.mark.parametrize("call,name", [
    (lambda: numprobe.reference.attention(np.zeros((8, 4)), K, K), "q"),
    (lambda: numprobe.reference.attention(Q, K, np.zeros((7, 1, 4))), "v"),
    (lambda: numprobe.reference.attention(Q, K, K, mask="diagonal"), "mask"),
    (lambda: numprobe.reference.attention(Q, K, K, mask="window"), "window"),
    (lambda: numprobe.reference.attention(np.zeros((8, 3, 4)), K.repeat(2, 1), K.repeat(2, 1)), "kv_heads"),
    (lambda: numprobe.reference.attention(Q, "abc", K), "k"),
    (lambda: numprobe.quantize(np.ones((4, 32)), "nvfp5"), "scheme"),
    (lambda: numprobe.quantize(np.ones((4, 32)), "nvfp4", scale_floor="lowest"), "scale_floor"),
    (lambda: numprobe.quantize(np.ones((4, 32)), "nvfp4", colour="red"), "colour"),
    (lambda: numprobe.kl(np.zeros((2, 5)), np.zeros((2, 6))), "cand"),
    (lambda: numprobe.compare_attention(np.zeros((8, 2, 5)), Q, K, K), "o"),
    (lambda: numprobe.compare_attention(Q, Q, K, K, tile=64), "tile"),
    (lambda: numprobe.inputs("attention(T=8,S=8,Hq=3,Hkv=2,D=4,in=bf16,seed=1)"), "kv_heads"),
])
def test_value_error_names_argument(call, name):
    with pytest.raises(ValueError) as e:
        call()
    assert str(e.value).startswith(name), str(e.value)
