"""The problems view: a static folder a browser opens from disk (`index.html`), written by
`reprogrid view` and by `reprogrid report` (into `<report>/problems/`, which the report's setting
keys link to).

    index.html, problems.js, problems.css     the page (orchestrator/report/view/assets/)
    data/index.js                             the models, the folder of each, and which model
                                              holds each setting
    data/<name>/matrix.js, data/<name>/p/...  one model's files (modelfiles.py), the folder
                                              named by the hash of what they are made of
                                              (identity.py)

The view is a cache: `write_view` builds the folders of the models that are missing (plan.py
finds them from one listing of each table) and reuses the rest, then writes the index and the
page, and removes the folders no model names any more. Data files are scripts calling
`reprogridView.receive(id, payload)`: a page opened from file:// may load scripts from its folder
but not fetch() files, and nothing is requested from anywhere else. Opening the page loads the
first five files only (`first_page`); a model's texts load per problem file, on demand.
"""

from __future__ import annotations

import logging
import os
import re
import shutil
from collections.abc import Sequence
from dataclasses import dataclass, field
from datetime import UTC, datetime
from importlib import resources
from pathlib import Path

from orchestrator.analysis.paired import DEFAULT_CONFIDENCE, DEFAULT_RESAMPLES, DEFAULT_SEED
from orchestrator.report.view.modelfiles import BUILDING, build_models, script
from orchestrator.report.view.plan import MATRIX, Group, ViewPlan, plan_view
from storage.damage import StoreDamage
from storage.store import Store

logger = logging.getLogger(__name__)

VIEW_DIR = "problems"  # the view's folder inside a report's output folder
ASSETS = {
    "problems.html": "index.html",
    "problems.js": "problems.js",
    "problems.css": "problems.css",
}
# What of data/ is the view's own, and removed once no model names it: a model's folder, one
# being built (a build that was killed), an older index being replaced, and the m<i> folders
# of views written before their folders were named by their content.
OURS = re.compile(rf"[0-9a-f]{{16,64}}|{re.escape(BUILDING)}.*|\.index-.*|m\d+")


@dataclass(frozen=True)
class Resampling:
    """What the page resamples with when asked for an interval (the report's options, `compare`'s
    defaults): its own draws, seeded, never the report's numbers."""

    n_resamples: int = DEFAULT_RESAMPLES
    confidence: float = DEFAULT_CONFIDENCE
    seed: int = DEFAULT_SEED


@dataclass(frozen=True)
class ViewOptions:
    out: Path  # the view's folder (created)
    report_link: str | None = None  # the report page relative to `out`, in the header
    skip_damaged: bool = False  # leave out the settings of damaged files (else refuse)
    resampling: Resampling = field(default_factory=Resampling)
    generated_at: str | None = None  # None: now


@dataclass(frozen=True)
class ViewSummary:
    out: str
    groups: tuple[str, ...]  # group labels
    keys: frozenset[str]  # the settings it shows
    n_settings: int
    n_problem_files: int
    first_page: tuple[str, ...]  # what opening the page loads, relative to `out`
    first_page_bytes: int
    built: tuple[str, ...]  # the labels of the models whose folders were written
    removed: int  # folders no model names any more, removed
    damage: StoreDamage  # the damaged files found; their settings are not shown


def first_page(groups: Sequence[Group]) -> tuple[str, ...]:
    """The files a browser loads when it opens index.html (without a #setting= link): the page,
    its script and style, the index, and the first group's matrix."""
    first = (f"data/{groups[0].id}/{MATRIX}",) if groups else ()
    return ("index.html", "problems.js", "problems.css", "data/index.js", *first)


def index_payload(store: Store, groups: Sequence[Group], options: ViewOptions) -> dict[str, object]:
    """data/index.js: the store, the models and their folders, each setting's model, and the
    page's resampling options (the one file every view rewrites)."""
    r = options.resampling
    return {
        "store": store.uri,
        "generated_at": options.generated_at or datetime.now(UTC).strftime("%Y-%m-%d %H:%M UTC"),
        "report": options.report_link,
        "resampling": {"n_resamples": r.n_resamples, "confidence": r.confidence, "seed": r.seed},
        "groups": [
            {"id": g.id, "label": g.label, "model": g.model, "n_settings": len(g.settings)}
            for g in groups
        ],
        "keys": {str(s["setting_key"]): g.id for g in groups for s in g.settings},
    }


def _replace(path: Path, text: str) -> None:
    """Write `text` to `path` through a temporary file renamed over it."""
    temp = path.with_name(f".index-{os.getpid()}.tmp")
    temp.write_text(text, encoding="utf-8")
    os.replace(temp, path)


def _assets(root: Path) -> None:
    folder = resources.files("orchestrator.report.view") / "assets"
    for name, target in ASSETS.items():
        (root / target).write_text(folder.joinpath(name).read_text(encoding="utf-8"), "utf-8")


def remove_unnamed(data: Path, groups: Sequence[Group]) -> int:
    """Remove what of the view's own in `data` no model names (`OURS`); returns how many."""
    named = {g.id for g in groups}
    removed = 0
    for entry in sorted(os.scandir(data), key=lambda e: e.name) if data.is_dir() else ():
        if entry.name in named or not OURS.fullmatch(entry.name):
            continue
        if entry.is_dir(follow_symlinks=False):
            shutil.rmtree(entry.path)
        else:
            os.unlink(entry.path)
        removed += 1
    return removed


def _problem_files(data: Path, groups: Sequence[Group]) -> int:
    return sum(len(os.listdir(data / g.id / "p")) for g in groups if (data / g.id / "p").is_dir())


def write_view(store: Store, options: ViewOptions, plan: ViewPlan | None = None) -> ViewSummary:
    """Write the problems view of every generated setting of `store` into `options.out`:
    build the models `plan` (`plan_view`, made here when not given) finds missing, then the
    index and the page, then remove the folders no model names. Raises StoreDamaged as
    `plan_view` does."""
    root = Path(options.out)
    if plan is None:
        plan = plan_view(store, root, options.skip_damaged)
    data = root / "data"
    data.mkdir(parents=True, exist_ok=True)
    built = build_models(store, plan, data)
    for group in built:
        logger.info("problems view: %s (%d settings) built", group.label, len(group.settings))
    _replace(data / "index.js", script("index", index_payload(store, plan.groups, options)))
    _assets(root)
    removed = remove_unnamed(data, plan.groups)
    page = first_page(plan.groups)
    return ViewSummary(
        out=str(root),
        groups=tuple(g.label for g in plan.groups),
        keys=plan.keys,
        n_settings=len(plan.keys),
        n_problem_files=_problem_files(data, plan.groups),
        first_page=page,
        first_page_bytes=sum((root / f).stat().st_size for f in page),
        built=tuple(g.label for g in built),
        removed=removed,
        damage=plan.damage,
    )
