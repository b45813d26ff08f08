"""Text to LaTeX that pdflatex typesets with no package beyond the kernel: the ten special
characters escaped, and every non-ASCII character written as a LaTeX command, so the report's
.tex files are plain ASCII and a paper needs no `inputenc`, `fontenc` or `newunicodechar`
setting to `\\input` them.

A character is written, in this order, by the table below (Greek letters, dashes, quotes,
mathematical signs, ligature letters), as its base letter with LaTeX accents (NFD: `é` ->
`\\'{e}`), as its compatibility decomposition (NFKD: `ﬁ` -> `fi`), and otherwise as a visible
`[U+XXXX]` with a warning in the log: a character LaTeX cannot show is never dropped silently.

Code in the report's texts, a `span` in backticks or a command-line option (`--literature`),
is set in typewriter type with its hyphens apart, and so is every other "--": TeX would set two
hyphens as an en dash (`--literature` printed as "–literature").
"""

from __future__ import annotations

import logging
import re
import unicodedata

logger = logging.getLogger(__name__)

SPECIAL = {
    "\\": r"\textbackslash{}",
    "&": r"\&",
    "%": r"\%",
    "$": r"\ensuremath{\$}",  # the text \$ takes a TS1 font (a bitmap in pdflatex)
    "#": r"\#",
    "_": r"\_",
    "{": r"\{",
    "}": r"\}",
    "~": r"\textasciitilde{}",
    "^": r"\textasciicircum{}",
    # In the default OT1 font encoding these three print as other glyphs (¡ ¿ —), and their
    # text commands take a TS1 font, which pdflatex would have to draw as a bitmap.
    "<": r"\ensuremath{<}",
    ">": r"\ensuremath{>}",
    "|": r"\ensuremath{|}",
    "\n": " ",
    "\t": " ",
    "\r": " ",
}
_GREEK = (
    "alpha beta gamma delta epsilon zeta eta theta iota kappa lambda mu nu xi omicron pi rho "
    "varsigma sigma tau upsilon phi chi psi omega"
).split()
_MATH_UPPER = {
    "Gamma",
    "Delta",
    "Theta",
    "Lambda",
    "Xi",
    "Pi",
    "Sigma",
    "Upsilon",
    "Phi",
    "Psi",
    "Omega",
}


def _greek() -> dict[str, str]:
    table = {}
    for i, name in enumerate(_GREEK):
        lower = chr(0x3B1 + i)
        # omicron has no command of its own: it is the Latin o
        table[lower] = "o" if name == "omicron" else rf"\ensuremath{{\{name}}}"
        if name == "varsigma":
            continue
        upper = chr(0x391 + i)
        cap = name.capitalize()
        # Greek capitals that look like Latin ones (A, B, E, ...) have no LaTeX command
        table[upper] = rf"\ensuremath{{\{cap}}}" if cap in _MATH_UPPER else _latin_capital(name)
    table["\u00b5"] = r"\ensuremath{\mu}"  # the micro sign
    return table


def _latin_capital(name: str) -> str:
    return {"eta": "H", "chi": "X", "rho": "P", "iota": "I", "kappa": "K", "tau": "T"}.get(
        name, name[0].upper()
    )


SYMBOLS = {
    "\u2013": "--",
    "\u2014": "---",
    "\u2212": r"\ensuremath{-}",
    "\u2018": "`",
    "\u2019": "'",
    "\u201c": "``",
    "\u201d": "''",
    "\u00ab": r"\ensuremath{\ll}",  # \guillemotleft needs the T1 encoding
    "\u00bb": r"\ensuremath{\gg}",
    "\u2026": r"\ldots{}",
    "\u00a0": "~",
    "\u2009": r"\,",
    "\u00b7": r"\ensuremath{\cdot}",
    "\u2022": r"\ensuremath{\bullet}",
    "\u00d7": r"\ensuremath{\times}",
    "\u00f7": r"\ensuremath{\div}",
    "\u00b1": r"\ensuremath{\pm}",
    "\u2264": r"\ensuremath{\leq}",
    "\u2265": r"\ensuremath{\geq}",
    "\u2260": r"\ensuremath{\neq}",
    "\u2248": r"\ensuremath{\approx}",
    "\u2192": r"\ensuremath{\rightarrow}",
    "\u2190": r"\ensuremath{\leftarrow}",
    "\u2194": r"\ensuremath{\leftrightarrow}",
    "\u221e": r"\ensuremath{\infty}",
    "\u00b0": r"\ensuremath{^\circ}",
    "\u00b2": r"\ensuremath{^2}",
    "\u00b3": r"\ensuremath{^3}",
    "\u00b9": r"\ensuremath{^1}",
    "\u2032": r"\ensuremath{'}",
    # \S, \P, \copyright and \dag take a TS1 font; their math forms do not
    "\u00a7": r"\ensuremath{\mathsection}",
    "\u00b6": r"\ensuremath{\mathparagraph}",
    "\u00a9": "(c)",
    "\u2020": r"\ensuremath{\dagger}",
    "\u2021": r"\ensuremath{\ddagger}",
    "\u00df": r"\ss{}",
    "\u00e6": r"\ae{}",
    "\u00c6": r"\AE{}",
    "\u0153": r"\oe{}",
    "\u0152": r"\OE{}",
    "\u00f8": r"\o{}",
    "\u00d8": r"\O{}",
    "\u0142": r"\l{}",
    "\u0141": r"\L{}",
    "\u0131": r"\i{}",
    "\u00a1": r"\textexclamdown{}",
    "\u00bf": r"\textquestiondown{}",
    **_greek(),
}
# Combining marks (NFD) -> the LaTeX accent command that puts them on a letter.
ACCENTS = {
    "\u0300": "`",
    "\u0301": "'",
    "\u0302": "^",
    "\u0303": "~",
    "\u0304": "=",
    "\u0306": "u",
    "\u0307": ".",
    "\u0308": '"',
    "\u030a": "r",
    "\u030b": "H",
    "\u030c": "v",
    "\u0327": "c",
}  # no ogonek: \k needs the T1 font encoding


def _accented(ch: str) -> str | None:
    """`é` -> `\\'{e}`, `ǘ` -> `\\'{\\"{u}}`; None when the character is not an ASCII letter
    with accents LaTeX has."""
    decomposed = unicodedata.normalize("NFD", ch)
    base, marks = decomposed[0], decomposed[1:]
    if not marks or not base.isascii() or not base.isalpha():
        return None
    if any(m not in ACCENTS for m in marks):
        return None
    text = r"\i" if base == "i" else r"\j" if base == "j" else base
    for mark in marks:
        command = ACCENTS[mark]
        # a letter accent (\c, \v, ...) needs braces; so does every accent, for uniformity
        text = f"\\{command}{{{text}}}"
    return text


def _char(ch: str) -> str:
    if ch in SPECIAL:
        return SPECIAL[ch]
    if ch.isascii():
        return ch
    if ch in SYMBOLS:
        return SYMBOLS[ch]
    accented = _accented(ch)
    if accented is not None:
        return accented
    compat = unicodedata.normalize("NFKD", ch)
    if compat != ch and all(c.isascii() or c in SYMBOLS for c in compat):
        return "".join(_char(c) for c in compat)
    logger.warning(
        "LaTeX: no form for the character %r (U+%04X %s); written as [U+%04X]",
        ch,
        ord(ch),
        unicodedata.name(ch, "unnamed"),
        ord(ch),
    )
    return f"[U+{ord(ch):04X}]"


# What the report's texts write as code: a `span` in backticks (md's code) and a command-line
# option (--literature), both set in typewriter type.
CODE = re.compile(r"`([^`\n]+)`|(?<![\w-])(--[A-Za-z][\w-]*)")


def _escape(text: str, start: int, end: int) -> str:
    """text[start:end] escaped, read in the whole text (a quote's side depends on what is
    before it). A straight double quote opens (``) at the start or after a space or bracket,
    else closes (''). A hyphen before another is "-{}": TeX would set two as an en dash."""
    out = []
    for i in range(start, end):
        ch = text[i]
        if ch == '"':
            opens = i == 0 or text[i - 1].isspace() or text[i - 1] in "([{"
            out.append("``" if opens else "''")
        elif ch == "-" and i + 1 < end and text[i + 1] == "-":
            out.append("-{}")
        else:
            out.append(_char(ch))
    return "".join(out)


def tex_escape(text: str) -> str:
    """`text` as LaTeX source that prints it: plain ASCII, no package needed (see above). Code
    (a `span` in backticks, a --option) is set in typewriter type, its hyphens kept apart; so
    is every "--" of the text: an en dash is only ever the character (U+2013)."""
    out, at = [], 0
    for match in CODE.finditer(text):
        span = match.span(1) if match.group(1) is not None else match.span(2)
        out += [_escape(text, at, match.start()), r"\texttt{", _escape(text, *span), "}"]
        at = match.end()
    out.append(_escape(text, at, len(text)))
    return "".join(out)
