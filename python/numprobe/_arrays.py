"""Array conversion at the binding's edge: anything with __array__ or __dlpack__ (NumPy,
PyTorch CPU or CUDA tensors, JAX, CuPy) becomes a C-contiguous float64 NumPy array.

torch is never imported here; a tensor is recognised by its type's module. CUDA tensors are
copied to the host. bfloat16 has no NumPy dtype, so a bf16 tensor is widened to float32 first:
every bf16 value is exactly a float32 (bf16 is float32's upper 16 bits), so the detour is exact.
"""
import numpy as np


def _from_torch(x):
    x = x.detach()
    if x.device.type != "cpu":
        x = x.cpu()
    if str(x.dtype) == "torch.bfloat16":
        x = x.float()  # exact: bf16 -> f32 only appends zero bits
    return x.numpy()


def is_torch(x):
    return type(x).__module__.startswith("torch")


def dtype_name(x):
    """The numprobe dtype name of an input array's element type (None when it has none)."""
    if is_torch(x):
        return {"torch.bfloat16": "bf16", "torch.float16": "f16", "torch.float32": "f32",
                "torch.float64": "f64"}.get(str(x.dtype))
    dt = getattr(x, "dtype", None)
    if dt is None:
        return None
    name = str(dt)
    return {"bfloat16": "bf16", "float16": "f16", "float32": "f32", "float64": "f64"}.get(name)


def as_f64(x, name, ndim=None):
    """x as a C-contiguous float64 array; ValueError naming `name` when it is not numeric or
    has the wrong number of dimensions."""
    if x is None:
        raise ValueError(f"{name}: expected an array, got None")
    try:
        if is_torch(x):
            a = _from_torch(x)
        elif hasattr(x, "__array__") or isinstance(x, (list, tuple, float, int, np.ndarray)):
            a = np.asarray(x)
        elif hasattr(x, "__dlpack__"):
            a = np.from_dlpack(x)
        else:
            raise TypeError(type(x).__name__)
        a = np.ascontiguousarray(a, dtype=np.float64)
    except (TypeError, ValueError) as e:
        raise ValueError(f"{name}: expected a numeric array ({e})") from None
    if ndim is not None and a.ndim not in ((ndim,) if isinstance(ndim, int) else ndim):
        raise ValueError(f"{name}: expected {ndim} dimensions, got shape {a.shape}")
    return a
