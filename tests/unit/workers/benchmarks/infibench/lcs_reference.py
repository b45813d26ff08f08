"""The official LCS of InfiBench's blank filling, ported line by line (slow: O(n·m) Python
steps): the oracle the vectorised `workers.benchmarks.infibench.blanks.lcs_align` is checked
against."""

from __future__ import annotations

from workers.benchmarks.infibench.blanks import backtrack


def lcs_align_reference(template: str, response: str) -> tuple[int, list[int]]:
    """Line-by-line port of the official LCS: (f[n-1][m-1], s), the oracle of `lcs_align`."""
    n, m = len(template), len(response)
    f = [[0] * m for _ in range(n)]
    s_all = [[0] * m for _ in range(n)]
    for i in range(n):
        for j in range(m):
            if i * j > 0:
                if template[i] == response[j]:
                    f[i][j] = f[i - 1][j - 1] + 1
                    s_all[i][j] = j
                else:
                    f[i][j] = max(f[i][j - 1], f[i - 1][j])
                    if f[i][j - 1] == f[i - 1][j]:
                        s_all[i][j] = max(s_all[i][j - 1], s_all[i - 1][j])
                    else:
                        left_wins = f[i][j - 1] >= f[i - 1][j]
                        s_all[i][j] = s_all[i][j - 1] if left_wins else s_all[i - 1][j]
            elif template[i] == response[j]:
                f[i][j] = 1
                s_all[i][j] = j
    return f[n - 1][m - 1], backtrack(template, response, s_all)
