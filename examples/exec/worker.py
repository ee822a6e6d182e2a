#!/usr/bin/env python3
"""numprobe exec worker: one Python process for a whole sweep.

    numprobe drift ... --backend exec-worker:'python3 examples/exec/worker.py numpy_reference'

The argument names an adapter module (a name importable from this folder or a path to a .py
file) exposing compute(case, q, k, v) -> (o, lse or None); compute raises NotImplementedError (e.g.
numprobe_exec.Unsupported) for a case it does not implement, which is answered UNSUPPORTED:
numprobe reports the case as unsupported, not as an error. Start-up (imports, CUDA context,
compilation caches) is paid once.

Other ops (case.json "op": "softmax", as in `numprobe softmax --backend exec-worker:'python3
examples/exec/worker.py numpy_softmax'`): the adapter's main([name, directory, *extra]) runs
the case as its one-shot form would, extra being the worker's arguments after the adapter
(e.g. --probs-only); a non-zero return is an ERR.

Protocol (lines over stdin/stdout, see src/providers/exec_provider_worker.hpp):
    worker -> numprobe   READY 1
    numprobe -> worker   RUN <dir>        inputs in <dir>; write o.npy [lse.npy] there
    worker -> numprobe   OK | ERR <message> | UNSUPPORTED <reason>
    numprobe -> worker   QUIT
stdout carries only the protocol: anything the adapter prints goes to stderr, which numprobe
captures and quotes in its errors.
"""
import importlib
import importlib.util
import json
import os
import sys
import traceback

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)
import numprobe_exec  # noqa: E402


def load_adapter(name):
    if name.endswith(".py"):
        spec = importlib.util.spec_from_file_location("numprobe_adapter", name)
        mod = importlib.util.module_from_spec(spec)
        spec.loader.exec_module(mod)
        return mod
    return importlib.import_module(name)


def main(argv):
    protocol = sys.stdout
    sys.stdout = sys.stderr  # stray prints must not corrupt the protocol
    if len(argv) < 2:
        print("usage: worker.py ADAPTER_MODULE_OR_PATH", file=sys.stderr)
        return 2
    adapter = load_adapter(argv[1])

    def say(line):
        protocol.write(line + "\n")
        protocol.flush()

    say("READY 1")
    for raw in sys.stdin:
        line = raw.rstrip("\n")
        if line == "QUIT":
            break
        if not line.startswith("RUN "):
            say("ERR unknown request " + line[:80])
            continue
        directory = line[4:]
        try:
            with open(os.path.join(directory, "case.json")) as f:
                op = json.load(f).get("op", "attention")
            if op == "attention":
                case, q, k, v = numprobe_exec.load_case(directory)
                o, lse = adapter.compute(case, q, k, v)
                numprobe_exec.save_output(directory, o, lse)
            else:
                if not hasattr(adapter, "main"):
                    raise RuntimeError("the adapter has no main(argv) for op " + op)
                rc = adapter.main([argv[1], directory] + argv[2:])
                if rc:
                    raise RuntimeError("the adapter's main returned %s for op %s" % (rc, op))
            say("OK")
        except NotImplementedError as e:  # a declared refusal: the case is unsupported
            say("UNSUPPORTED " + (str(e) or type(e).__name__).replace("\n", " ")[:500])
        except Exception as e:  # one failed case must not end the sweep
            traceback.print_exc(file=sys.stderr)
            say("ERR " + (type(e).__name__ + ": " + str(e)).replace("\n", " ")[:500])
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
