"""Worker-mode test adapter: the NumPy reference, except at the seq named by
NUMPROBE_TEST_FAIL_SEQ, where it raises (NUMPROBE_TEST_FAIL_MODE=raise, the worker answers
ERR and stays up) or exits (=exit, the worker dies and numprobe must start a new one)."""
import os
import sys

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(HERE, "..", "..", "..", "examples", "exec"))
import numpy_reference  # noqa: E402

print("worker adapter imported (stdout noise the protocol must survive)")


def compute(case, q, k, v):
    if str(case["seq"]) == os.environ.get("NUMPROBE_TEST_FAIL_SEQ", ""):
        if os.environ.get("NUMPROBE_TEST_FAIL_MODE") == "exit":
            os._exit(5)
        raise ValueError("refusing seq %d on purpose" % case["seq"])
    return numpy_reference.compute(case, q, k, v)

# Count process starts independently of numprobe's own counter.
if os.environ.get("NUMPROBE_TEST_START_LOG"):
    with open(os.environ["NUMPROBE_TEST_START_LOG"], "a") as f:
        f.write("start %d\n" % os.getpid())
