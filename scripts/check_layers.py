#!/usr/bin/env python3
"""Fails when a library layer includes a layer it may not know (docs/architecture.md).

    scripts/check_layers.py [--root DIR] [--table FILE] [--stage-map]

The allowed arrows are read from the layer table of docs/architecture.md (the row format is
described there), so the documentation and the check cannot drift apart. Inside the probes
layer, the probe-folder table of the same file says which folder may include which: command
families meet only through shared folders named for what they share. "Knows about" is
transitive: a layer may include every layer reachable through its arrows. Every #include
"..." (and every #include <...> that names a file of the tree) in the layer folders is
resolved the way the compiler does (the including file's folder, then include/, then the
repository root) and its target mapped to a layer by the longest matching folder.

--stage-map prints, instead of checking, what each layer may see, for the build to stage
per-layer include directories of symlinks (cmake/numprobe_layers.cmake; docs/architecture.md,
"Include directories per layer"). Tab-separated lines:
    owner  LAYER  PREFIX       a folder (ending in /) or file of LAYER, from the table
    stage  LAYER  LINK  PATH   LINK (relative to LAYER's directory) -> PATH (root-relative)
    watch  DIR                 a folder staged file by file (it holds another layer's folder)
A folder of a visible layer is one symlink unless another layer's folder lies inside it
(src/kernels/ holds src/kernels/emu/); then its entries are staged one by one, without
that folder. Paths under include/ are staged without the include/ prefix, so the spellings
stay numprobe/formats/x.hpp, src/formats/x.hpp, probes/<family>/x.hpp.

Exit status: 0 when no include crosses a missing arrow, 1 with one line per violation
(file:line includes X (layer A may not include layer B)), 2 when the table cannot be read.
Standard library only.
"""
import argparse
import os
import re
import sys

TABLE_HEADER = re.compile(r"^\|\s*layer\s*\|\s*folders\s*\|\s*knows about\s*\|\s*$")
INCLUDE = re.compile(r'^\s*#\s*include\s*([<"])([^>"]+)[>"]')
BACKTICKED = re.compile(r"`([^`]+)`")
SOURCE_SUFFIXES = (".h", ".hpp", ".cpp", ".cu", ".cuh", ".inc")

# ---------------------------------------------------------------- KNOWN PENDING EXCEPTIONS
# Includes that break a layer rule in files other work was rewriting when the check was
# introduced (issue 16). Each entry is (including file, included file), both relative to the
# root; they are reported as "pending" and do not fail the check. Remove an entry as soon as
# its include is gone: the check warns about entries that no longer match anything.
KNOWN_PENDING: set = set()  # empty since the rne_block_quantizer rewrite landed
# ------------------------------------------------------------ END KNOWN PENDING EXCEPTIONS


class TableError(Exception):
    pass


FAMILY_HEADER = re.compile(r"^\|\s*probe folder\s*\|\s*kind\s*\|\s*answers\s*\|\s*may include\s*\|\s*$")


def read_families(path):
    """{folder: (kind, set(short names it may include))} from the probe-folder table.

    Inside the probes layer every command family has a folder (`probes/<name>/`, kind
    `family`), and what several families use lives in a folder named for what it shares (kind
    `shared`). A folder may include its own files and those of the shared folders it lists,
    transitively; a family is never listed, so families meet only through shared folders."""
    with open(path, encoding="utf-8") as f:
        lines = f.read().splitlines()
    start = next((i for i, l in enumerate(lines) if FAMILY_HEADER.match(l)), None)
    if start is None:
        return {}
    rows = {}
    for n, line in enumerate(lines[start + 2:], start + 3):
        if not line.startswith("|"):
            break
        cells = [c.strip() for c in line.strip().strip("|").split("|")]
        if len(cells) != 4:
            raise TableError(f"{path}:{n}: a probe-folder row has 4 cells")
        names = BACKTICKED.findall(cells[0])
        if len(names) != 1 or not re.fullmatch(r"probes/[a-z_]+/", names[0]):
            raise TableError(f"{path}:{n}: the first cell names one `probes/<name>/` folder")
        kind = cells[1].strip("` ")
        if kind not in ("family", "shared"):
            raise TableError(f"{path}:{n}: kind is `family` or `shared`, not '{cells[1]}'")
        rows[names[0].split("/")[1]] = (kind, set(BACKTICKED.findall(cells[3])))
    for name, (_, allowed) in rows.items():
        for other in allowed:
            if other not in rows:
                raise TableError(f"{path}: probes/{name}/ may include `{other}`, which is no probe folder")
            if rows[other][0] != "shared":
                raise TableError(f"{path}: probes/{name}/ lists the family `{other}`: families meet "
                                 "only through shared folders")
    return rows


def family_closure(rows):
    return closure({name: allowed for name, (_, allowed) in rows.items()})


def probe_folder(rel):
    """The probe folder of a root-relative path under probes/ ('' for a file directly there)."""
    parts = rel.split("/")
    return parts[1] if len(parts) > 2 else ""


def read_table(path):
    """Returns ({layer: [folders]}, {layer: set(direct arrows)}) from the first layer table."""
    with open(path, encoding="utf-8") as f:
        lines = f.read().splitlines()
    start = next((i for i, l in enumerate(lines) if TABLE_HEADER.match(l)), None)
    if start is None:
        raise TableError(f"{path}: no table with the header | layer | folders | knows about |")
    folders, arrows = {}, {}
    for n, line in enumerate(lines[start + 2:], start + 3):
        if not line.startswith("|"):
            break
        cells = [c.strip() for c in line.strip().strip("|").split("|")]
        if len(cells) != 3:
            raise TableError(f"{path}:{n}: a layer row has 3 cells")
        names = BACKTICKED.findall(cells[0])
        if len(names) != 1:
            raise TableError(f"{path}:{n}: the layer cell names one `layer`")
        layer = names[0]
        if layer in folders:
            raise TableError(f"{path}:{n}: layer `{layer}` is listed twice")
        folders[layer] = BACKTICKED.findall(cells[1])
        if not folders[layer]:
            raise TableError(f"{path}:{n}: layer `{layer}` has no `folder`")
        arrows[layer] = set(BACKTICKED.findall(cells[2]))
    for layer, knows in arrows.items():
        for other in knows - set(folders):
            raise TableError(f"{path}: layer `{layer}` knows `{other}`, which is not a layer")
    return folders, arrows


def closure(arrows):
    """The layers each layer may include (itself and everything below); rejects cycles."""
    known, state = {}, {}

    def visit(layer, path):
        if state.get(layer) == "open":
            raise TableError("the layer arrows form a cycle: " + " -> ".join(path + [layer]))
        if layer not in known:
            state[layer] = "open"
            reach = {layer}
            for other in arrows[layer]:
                reach |= visit(other, path + [layer])
            known[layer], state[layer] = reach, "done"
        return known[layer]

    for layer in arrows:
        visit(layer, [])
    return known


def layer_of(rel, prefixes):
    """The layer of a root-relative path: the longest folder (or exact file) that holds it."""
    best = None
    for prefix, layer in prefixes:
        hit = rel.startswith(prefix) if prefix.endswith("/") else rel == prefix
        if hit and (best is None or len(prefix) > len(best[0])):
            best = (prefix, layer)
    return best[1] if best else None


def resolve(root, including, spelled, quoted):
    """The root-relative path the compiler would open, or None (a system or external header)."""
    bases = [os.path.dirname(including)] if quoted else []
    bases += ["include", ""]
    for base in bases:
        rel = os.path.normpath(os.path.join(base, spelled))
        if not rel.startswith("..") and os.path.isfile(os.path.join(root, rel)):
            return rel.replace(os.sep, "/")
    return None


def layer_files(root, prefixes):
    for prefix, _ in prefixes:
        full = os.path.join(root, prefix)
        if not prefix.endswith("/"):
            if os.path.isfile(full):
                yield prefix
            continue
        for d, _, names in os.walk(full):
            for name in sorted(names):
                if name.endswith(SOURCE_SUFFIXES):
                    yield os.path.relpath(os.path.join(d, name), root).replace(os.sep, "/")


def check(root, table):
    folders, arrows = read_table(table)
    known = closure(arrows)
    prefixes = [(p, layer) for layer, ps in folders.items() for p in ps]
    families = read_families(table)
    family_known = family_closure(families) if families else {}
    violations, pending, used = [], [], set()
    files = sorted(set(layer_files(root, prefixes)))
    for rel in files:
        src_layer = layer_of(rel, prefixes)
        src_folder = probe_folder(rel) if families and rel.startswith("probes/") else None
        if src_folder is not None and src_folder not in families:
            violations.append(f"{rel}: in no probe folder of the table (probes/<family>/ or a shared one)")
            src_folder = None
        with open(os.path.join(root, rel), encoding="utf-8", errors="replace") as f:
            for n, line in enumerate(f, 1):
                m = INCLUDE.match(line)
                if not m:
                    continue
                quoted, spelled = m.group(1) == '"', m.group(2)
                target = resolve(root, rel, spelled, quoted)
                if target is None:
                    if quoted:  # a quoted include the tree cannot satisfy is a mistake too
                        violations.append(f"{rel}:{n}: includes {spelled}, which is not in the tree")
                    continue
                dst_layer = layer_of(target, prefixes)
                if src_folder is not None and target.startswith("probes/"):
                    dst_folder = probe_folder(target)
                    if dst_folder not in family_known[src_folder]:
                        violations.append(f"{rel}:{n}: includes {spelled} (probes/{src_folder}/ may not "
                                          f"include probes/{dst_folder}/: not a shared folder it lists)")
                    continue
                if dst_layer in known[src_layer]:
                    continue
                dst = dst_layer or "(none: " + target.split("/")[0] + "/ is no library layer)"
                line_text = (f"{rel}:{n}: includes {spelled} "
                             f"(layer {src_layer} may not include layer {dst})")
                if (rel, target) in KNOWN_PENDING:
                    used.add((rel, target))
                    pending.append(line_text)
                else:
                    violations.append(line_text)
    return files, violations, pending, KNOWN_PENDING - used


def stage_entries(root, prefixes, layer):
    """(link, path) pairs for one layer's own folders and files: see --stage-map."""
    def link_of(rel):
        return rel[len("include/"):] if rel.startswith("include/") else rel

    def owned_elsewhere(rel):  # rel ends in / for a folder
        return layer_of(rel, prefixes) != layer

    def nested(folder):
        return any(p != folder and p.startswith(folder) for p, _ in prefixes)

    entries, watched = [], []

    def add(rel):  # rel: a folder (ending in /) or a file of this layer
        if not rel.endswith("/") or not nested(rel):
            entries.append((link_of(rel.rstrip("/")), rel.rstrip("/")))
            return
        watched.append(rel.rstrip("/"))
        for name in sorted(os.listdir(os.path.join(root, rel))):
            child = rel + name
            if os.path.isdir(os.path.join(root, child)):
                child += "/"
            if not owned_elsewhere(child):
                add(child)

    for prefix, owner in prefixes:
        if owner == layer and os.path.exists(os.path.join(root, prefix)):
            add(prefix)
    return entries, watched


def stage_map(root, table):
    """The lines of --stage-map: every layer sees its own entries and those of its closure."""
    folders, arrows = read_table(table)
    known = closure(arrows)
    prefixes = [(p, layer) for layer, ps in folders.items() for p in ps]
    own = {layer: stage_entries(root, prefixes, layer) for layer in folders}
    lines = [f"owner\t{layer}\t{p}" for p, layer in prefixes]
    for layer in folders:
        for other in sorted(known[layer]):
            lines += [f"stage\t{layer}\t{link}\t{path}" for link, path in own[other][0]]
    watched = sorted({d for entries, dirs in own.values() for d in dirs})
    return lines + [f"watch\t{d}" for d in watched]


def main():
    here = os.path.dirname(os.path.abspath(__file__))
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--root", default=os.path.dirname(here), help="repository root")
    ap.add_argument("--table", help="the layer table (default ROOT/docs/architecture.md)")
    ap.add_argument("--stage-map", action="store_true",
                    help="print what each layer may see (for the build), do not check")
    a = ap.parse_args()
    table = a.table or os.path.join(a.root, "docs", "architecture.md")
    if a.stage_map:
        try:
            print("\n".join(stage_map(a.root, table)))
        except (OSError, TableError) as e:
            print(f"check_layers: {e}", file=sys.stderr)
            return 2
        return 0
    try:
        files, violations, pending, stale = check(a.root, table)
    except (OSError, TableError) as e:
        print(f"check_layers: {e}", file=sys.stderr)
        return 2
    for v in violations:
        print(v)
    for p in pending:
        print(f"pending (KNOWN_PENDING in {os.path.basename(__file__)}): {p}", file=sys.stderr)
    for rel, target in sorted(stale):
        print(f"stale KNOWN_PENDING entry, remove it: {rel} no longer includes {target}",
              file=sys.stderr)
    print(f"check_layers: {len(files)} files, {len(violations)} violations, "
          f"{len(pending)} pending", file=sys.stderr)
    return 1 if violations else 0


if __name__ == "__main__":
    sys.exit(main())
