"""Per-question hooks: `customized` scorers and `post_handler`s (spec §4.1, §4.2, §4.5).

The official grader imports `cases.handler_<id>` and calls `module.func(...)`. The hook files
are question data that ship with the suite. Running them in-process is limited to the files
whose sha256 is pinned below: the 8 hooks of suite v2.1 and the 2 of the v2.0.0 dev suite,
each read and found to be a pure function of its string/number arguments (they import only
`re`, `string` and `typing`). Any other hook (an edited or third-party suite) runs through the
sandbox with JSON in and out, so suite text is never executed in the grader's process unless it
was reviewed. Responses reach hooks only as string arguments; they are never executed here.
"""

from __future__ import annotations

import json
from functools import lru_cache
from typing import Any

from workers.benchmarks.infibench.criteria import HookRef
from workers.execspec import SandboxLimits
from workers.keys import sha256_hex

# sha256 of the UTF-8 text of each reviewed hook file.
TRUSTED_HOOK_SHA256 = frozenset(
    {
        "e67225826885b97b7c90fa93918102fa46770b569ca803fae5b07aa9329dcdd1",  # handler_0-0-1
        "5c1badb0224c9d326c8faf82452ecb63ee83986e09ec05b1bc15ccd43b1d4e12",  # handler_0-0-14
        "8189d08429ce46ca5fc5b3f6cbdee24dc7c36ff8122bdf95a0d1dc563fc77921",  # handler_0-0-21
        "bee39ea524c74a26d7bea4e8dc131f5dc55147de46bb9e3803512db30dc7e0c3",  # handler_0-0-26
        "722da7a48ca264f37f127592e3c945e4e799f8e0509b10c5af98dc5fe8d500ae",  # handler_0-0-37
        "76a2ab84e81ee14651e31ce5635a42001e06e8081b38d357495bac1347ade640",  # handler_0-0-38
        "73c3a016988bc37e70b70248549e2560bb6e15047c9b33c02b7942aabfca82dc",  # handler_0-0-39
        "48e289ca02f577b0a5c9398409db3ce70a73a3746d5eb635df2445ae76c8c45f",  # handler_0-2-153
    }
)
HOOK_LIMITS = SandboxLimits(timeout_s=30.0, memory_mb=4096)
_RESULT_MARK = "[infibench-hook-result] "
HOOK_RUNNER = f"""\
import json, sys
namespace = {{"__name__": "infibench_hook"}}
with open("hook.py", encoding="utf-8") as fh:
    exec(compile(fh.read(), "hook.py", "exec"), namespace)
with open("args.json", encoding="utf-8") as fh:
    args = json.load(fh)
earned, total, detail = namespace[sys.argv[1]](*args)
print({_RESULT_MARK!r} + json.dumps([earned, total, detail], default=str))
"""


class HookError(RuntimeError):
    """A hook is missing, failed, or returned something other than (earned, total, detail)."""


def is_trusted(hook: HookRef) -> bool:
    return sha256_hex(hook.source) in TRUSTED_HOOK_SHA256


@lru_cache(maxsize=64)
def _load(source: str, filename: str, func: str):
    namespace: dict[str, Any] = {"__name__": filename.removesuffix(".py")}
    exec(compile(source, filename, "exec"), namespace)  # reviewed, hash-pinned suite data
    if func not in namespace or not callable(namespace[func]):
        raise HookError(f"{filename} defines no function {func!r}")
    return namespace[func]


def json_native(value: Any) -> Any:
    """A hook detail as JSON-native values (strings for anything else)."""
    return json.loads(json.dumps(value, default=str))


def call_hook(hook: HookRef, *args: Any) -> tuple[float, float, Any]:
    """Call `hook.func(*args)` and return (earned, total, detail)."""
    if is_trusted(hook):
        out = _load(hook.source, hook.filename, hook.func)(*args)
    else:
        out = _call_sandboxed(hook, args)
    try:
        earned, total, detail = out
        return float(earned), float(total), json_native(detail)
    except (TypeError, ValueError) as e:
        raise HookError(f"{hook.module}.{hook.func} returned {out!r}, not 3 values") from e


def _call_sandboxed(hook: HookRef, args: tuple) -> Any:
    import sys

    from workers.sandbox import run_command

    result = run_command(
        (sys.executable, "_hook_runner.py", hook.func),
        {
            "hook.py": hook.source,
            "args.json": json.dumps(list(args)),
            "_hook_runner.py": HOOK_RUNNER,
        },
        HOOK_LIMITS,
    )
    for line in reversed(result.stdout.splitlines()):
        if line.startswith(_RESULT_MARK):
            return json.loads(line[len(_RESULT_MARK) :])
    raise HookError(
        f"{hook.module}.{hook.func} failed in the sandbox "
        f"(exit {result.exit_code}, timed out {result.timed_out}): {result.stderr[-300:]}"
    )
