"""The bad-input corpus: each case edits a valid study (or the command line) in one way and names the
exact message the CLI must print on stderr before exiting with status 2 and starting nothing.

The cases live in three files by kind (bad_input_study.py, bad_input_values.py, bad_input_files.py; their parts in
bad_input_kit.py); CASES is all of them, in that order.
`python tests/reliability/bad_input_cases.py > docs/bad-input.md` renders the list for the docs; a test
checks the docs match these files, so the documented messages are the tested ones.
"""

from __future__ import annotations

import sys

import bad_input_files
import bad_input_study
import bad_input_values
from bad_input_kit import ROOT, WILD, Case, base_study, prepare

__all__ = ["CASES", "ROOT", "WILD", "Case", "base_study", "prepare", "render"]

CASES: list[Case] = [*bad_input_study.CASES, *bad_input_values.CASES, *bad_input_files.CASES]


def render() -> str:
    """docs/bad-input.md, from the cases above."""
    lines = [
        "# Bad input: what servetune refuses, and what it says",
        "",
        "Every case below is a test (`tests/reliability/test_bad_input.py`): `python -m tuner.run` exits with",
        "status 2, prints exactly this message on stderr (after `error: `), and starts nothing: no engine,",
        "no Ray trial, no MLflow run, no files in the output folder. Messages say *where* (file and key",
        "path, or the command-line flag), *what* is wrong, and *how to fix it* (after `fix:`).",
        "`study.yaml` stands for the study file's path, `<repo>` for the servetune checkout, `<python>` for the",
        "interpreter, `…` for text that comes from the OS, a library, or a list that grows (known GPUs, shapes,",
        "engine arguments).",
        "",
        "Beyond these cases, `tests/reliability/fuzz_inputs.py` replaces every value of the default study and of",
        "the built-in vLLM space, one at a time, with values of the wrong kind (null, empty, text, negative,",
        "infinite, 10^30, lists, a 5,000-character path...): each must end in exit 0 or a clean exit 2, never a",
        "traceback (`tests/reliability/test_fuzz_inputs.py`; `python tests/reliability/fuzz_inputs.py --all` for",
        "every study and space file in the repository).",
        "",
        "| case | mistake | message |",
        "|---|---|---|",
    ]
    for c in CASES:
        msg = c.message.replace("{study}", "study.yaml").replace("{tmp}", "…").replace("{root}", "<repo>")
        msg = msg.replace("{python}", "<python>")
        msg = msg.replace(WILD, "…")
        msg = msg.replace("|", "\\|")
        note = " (message being fixed: the test is an expected failure until then)" if c.bug else ""
        lines.append(f"| `{c.id}` | {c.what}{note} | `{msg}` |")
    lines += ["", f"{len(CASES)} cases. Regenerate with `python tests/reliability/bad_input_cases.py > docs/bad-input.md`.", ""]
    return "\n".join(lines)


if __name__ == "__main__":
    sys.stdout.write(render())
