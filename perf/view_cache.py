"""The problems view as a cache, side by side with an older commit's code in one run (issue 33,
item 1): a store of --settings settings (models x the paper's 60), then, each command in a fresh
process and each code with its own PYTHONPATH, alternating codes in every round:

    report md,csv,json (no view)            what the report costs without its view
    report md,csv,json,html, the first      `report` into a folder without a view
    report md,csv,json,html, views cached   `report` again over its own earlier output
    first full view                         `view` into a folder that does not exist
    second view, nothing changed            `view` again into the same folder
    bad option refused                      `report --baseline template=instrct` (exit 2)

each with its wall time (the process: interpreter start, imports, the work), its CPU time (user
and system, its processes included: less moved by the machine's load than the wall time) and its
peak memory: the process's own peak (VmHWM) plus the peak of every process it started (the older
code's view workers), read from /proc while they run. Then, on a store of --equal-at settings,
whether both codes write the same report files (md, csv, json, tex), timestamps aside.

    python perf/view_cache.py                          # 6,000 settings against 0de84ea
    python perf/view_cache.py --reuse --rounds 2       # the stores already under --root
    python perf/view_cache.py --base f2c2b51^ --settings 660

The older code is the commit's tree (`git archive`) under --root. The stores are built by the
older code's perf/store_scale.py (`build`): this code reads an older store, an older code does
not read a newer one. Timings vary with the machine's load (printed with each round); read the
ratios of one run.
"""

from __future__ import annotations

import argparse
import contextlib
import io
import os
import re
import resource
import shutil
import subprocess
import sys
import tarfile
import tempfile
import threading
import time
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
BAD = ("--baseline", "template=instrct")
GENERATED = re.compile(rb"generated(_at\": \"| )[0-9T:+-]+")  # a report's time stamp


# -- in the measured process ---------------------------------------------------------------


def _hwm_mb(pid: int | str) -> float:
    """A process's peak resident memory (VmHWM), MB; 0 once it is gone."""
    try:
        for line in Path(f"/proc/{pid}/status").read_text().splitlines():
            if line.startswith("VmHWM:"):
                return int(line.split()[1]) / 1024
    except OSError:
        pass
    return 0.0


def _children(parent: int) -> list[int]:
    """The processes `parent` started (what its threads list in /proc/<pid>/task/*/children)."""
    found = []
    for task in Path(f"/proc/{parent}/task").iterdir():
        with contextlib.suppress(OSError):
            found += [int(pid) for pid in (task / "children").read_text().split()]
    return found


def child(args: list[str]) -> None:
    """Run `reprogrid ARGS` in this process (the code PYTHONPATH names) and print its exit status,
    its own peak memory and the sum of the peaks of the processes it started."""
    peaks: dict[int, float] = {}
    stop = threading.Event()

    def watch() -> None:
        while not stop.wait(0.1):
            for pid in _children(os.getpid()):
                peaks[pid] = max(peaks.get(pid, 0.0), _hwm_mb(pid))

    watcher = threading.Thread(target=watch, daemon=True)
    watcher.start()
    from orchestrator.cli.main import main

    with contextlib.redirect_stdout(io.StringIO()), contextlib.redirect_stderr(io.StringIO()):
        code = main(args)
    stop.set()
    watcher.join()
    print(f"MEASURED exit {code}")
    print(f"MEASURED own_mb {_hwm_mb('self'):.0f}")
    print(f"MEASURED children_mb {sum(peaks.values()):.0f}")


# -- the driver --------------------------------------------------------------------------


def git(*args: str) -> str:
    return subprocess.run(
        ["git", *args], cwd=REPO, capture_output=True, text=True, check=True
    ).stdout.strip()


def code_of(revision: str, root: Path) -> Path:
    """The tree of `revision` under `root` (extracted once)."""
    commit = git("rev-parse", "--short", revision)
    folder = root / f"code-{commit}"
    if not (folder / "orchestrator").is_dir():
        shutil.rmtree(folder, ignore_errors=True)
        folder.mkdir(parents=True)
        archive = subprocess.run(
            ["git", "archive", "--format=tar", commit], cwd=REPO, capture_output=True, check=True
        ).stdout
        with tarfile.open(fileobj=io.BytesIO(archive)) as tar:
            tar.extractall(folder, filter="data")
    return folder


def environment(code: Path) -> dict[str, str]:
    return {**os.environ, "PYTHONPATH": str(code)}


def build_store(code: Path, root: Path, n_settings: int) -> None:
    """The store of `n_settings` settings, by `code`'s perf/store_scale.py."""
    script = (
        "import sys; from pathlib import Path; sys.path.insert(0, 'perf'); import store_scale; "
        f"print(store_scale.build(Path({str(root)!r}), {n_settings // 60}, False))"
    )
    started = time.perf_counter()
    done = subprocess.run(
        [sys.executable, "-c", script], cwd=code, env=environment(code), capture_output=True
    )
    if done.returncode != 0:
        raise RuntimeError(f"building {root} failed:\n{done.stderr.decode()[-3000:]}")
    print(f"built {root} in {time.perf_counter() - started:.0f} s", flush=True)


def measured(code: Path, args: list[str]) -> dict[str, float]:
    """`reprogrid ARGS` with `code` in a fresh process: wall s, exit, peak MB (own + children)."""
    used = resource.getrusage(resource.RUSAGE_CHILDREN)
    started = time.perf_counter()
    done = subprocess.run(
        [sys.executable, str(Path(__file__).resolve()), "--child", "--", *args],
        cwd=code,
        env=environment(code),
        capture_output=True,
        text=True,
    )
    wall = time.perf_counter() - started
    now = resource.getrusage(resource.RUSAGE_CHILDREN)  # its processes', once each is reaped
    cpu = now.ru_utime + now.ru_stime - used.ru_utime - used.ru_stime
    values = {
        line.split()[1]: float(line.split()[2])
        for line in done.stdout.splitlines()
        if line.startswith("MEASURED ")
    }
    if done.returncode != 0 or "own_mb" not in values:
        raise RuntimeError(f"{args[:4]} failed ({done.returncode}):\n{done.stderr[-3000:]}")
    return {
        "wall_s": wall,
        "cpu_s": cpu,
        **values,
        "peak_mb": values["own_mb"] + values["children_mb"],
    }


def round_of(code: Path, store: Path, work: Path) -> dict[str, dict[str, float]]:
    """One round of the four measurements with `code`, in `work` (emptied)."""
    shutil.rmtree(work, ignore_errors=True)
    report = ["report", "--store", str(store), "--out", str(work / "report")]
    html = [*report, "--format", "md,csv,json,html"]
    view = ["view", "--store", str(store), "--out", str(work / "view")]
    out = {"files": measured(code, [*report, "--format", "md,csv,json"])}
    out["first_report"] = measured(code, html)  # the report's first run writes its view
    out |= {"report": measured(code, html), "first_view": measured(code, view)}
    out["second_view"] = measured(code, view)
    out["bad_option"] = measured(code, [*html, *BAD])
    if out["bad_option"]["exit"] != 2:
        raise RuntimeError(f"the bad option exited {out['bad_option']['exit']}, not 2")
    return out


ROWS = (
    ("files", "report md,csv,json (no view)"),
    ("first_report", "report md,csv,json,html, the first"),
    ("report", "report md,csv,json,html, views cached"),
    ("first_view", "first full view"),
    ("second_view", "second view, nothing changed"),
    ("bad_option", "bad option (--baseline template=instrct)"),
)


def table(labels: list[str], rounds: list[dict[str, dict[str, dict[str, float]]]]) -> str:
    head = f"{'':40}" + "".join(f"{label:>32}" for label in labels)
    lines = [head, f"{'':40}" + "".join(f"{'wall s, CPU s (peak MB)':>32}" for _ in labels)]
    for key, name in ROWS:
        cells = []
        for label in labels:
            seen = [r[label][key] for r in rounds]
            walls = "/".join(f"{m['wall_s']:.1f}" for m in seen)
            cpus = "/".join(f"{m['cpu_s']:.1f}" for m in seen)
            peaks = "/".join(f"{m['peak_mb']:.0f}" for m in seen)
            cells.append(f"{walls}, {cpus} ({peaks})")
        lines.append(f"{name:40}" + "".join(f"{c:>32}" for c in cells))
    return "\n".join(lines)


def same_files(codes: dict[str, Path], store: Path, work: Path) -> list[str]:
    """Each code's report files (md, csv, json, tex) of `store`, compared, time stamps aside."""
    written = {}
    for label, code in codes.items():
        out = work / f"equal-{label}"
        shutil.rmtree(out, ignore_errors=True)
        args = ["report", "--store", str(store), "--out", str(out), "--format", "md,csv,json,tex"]
        measured(code, args)
        written[label] = {
            str(p.relative_to(out)): GENERATED.sub(b"generated", p.read_bytes())
            for p in sorted(out.rglob("*"))
            if p.is_file() and p.suffix in (".md", ".csv", ".json", ".tex")
        }
    first, second = written.values()
    lines = [f"{len(first)} and {len(second)} files"]
    for name in sorted(set(first) | set(second)):
        if first.get(name) != second.get(name):
            lines.append(f"  differs: {name}")
    if len(lines) == 1:
        lines.append("  every file the same (time stamps aside)")
    return lines


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--base", default="0de84ea", help="the older commit (default 0de84ea)")
    parser.add_argument("--settings", type=int, default=6000, help="settings (models of 60)")
    parser.add_argument("--equal-at", type=int, default=660, help="settings of the files' check")
    parser.add_argument("--rounds", type=int, default=1, help="rounds, codes alternating")
    parser.add_argument(
        "--root",
        default=os.path.join(tempfile.gettempdir(), "view-cache-bench"),
        help="stores, codes, output (default: view-cache-bench in the temporary folder)",
    )
    parser.add_argument("--reuse", action="store_true", help="keep the stores under --root")
    parser.add_argument("--child", action="store_true", help=argparse.SUPPRESS)
    parser.add_argument("rest", nargs="*", help=argparse.SUPPRESS)
    args = parser.parse_args(argv)
    if args.child:
        child(args.rest)
        return 0
    root = Path(args.root)
    base = code_of(args.base, root)
    this = f"this ({git('rev-parse', '--short', 'HEAD')})"
    codes = {f"{args.base} ({base.name[5:]})": base, this: REPO}
    stores = {n: root / f"store-{n}" for n in {args.settings, args.equal_at}}
    for n, store in stores.items():
        if not (args.reuse and store.is_dir()):
            shutil.rmtree(store, ignore_errors=True)
            build_store(base, store, n)
    rounds = []
    for number in range(args.rounds):
        found: dict[str, dict[str, dict[str, float]]] = {}
        for label, code in codes.items():
            load = os.getloadavg()[0]
            found[label] = round_of(code, stores[args.settings], root / "work")
            print(f"round {number + 1}, {label}: load average {load:.1f} before", flush=True)
        rounds.append(found)
        print(table(list(codes), rounds[-1:]), flush=True)
    print(f"\n{args.settings:,} settings, {os.cpu_count()} cores, {args.rounds} round(s):")
    print(table(list(codes), rounds))
    print(f"\nreport files at {args.equal_at:,} settings, {' vs '.join(codes)}:")
    print("\n".join(same_files(codes, stores[args.equal_at], root / "work")))
    return 0


if __name__ == "__main__":
    sys.exit(main())
