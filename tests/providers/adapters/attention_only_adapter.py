"""An attention-only worker adapter (compute, no main): a softmax case sent to it must fail
with ERR naming the op, and the worker must stay up."""


def compute(case, q, k, v):
    raise RuntimeError("not an attention test")
