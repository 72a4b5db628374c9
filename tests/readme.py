"""The README's code examples, for the tests that run them: each is a python block whose first line names
it (``# train.py``, ``# upload.py``, ...)."""

from __future__ import annotations

import re
from pathlib import Path

README = Path(__file__).parents[1] / "README.md"


def readme_example(first_line: str) -> str:
    """The README's one python code block that starts with `first_line`."""
    blocks = re.findall(r"```python\n(.*?)```", README.read_text(), flags=re.DOTALL)
    examples = [block for block in blocks if block.startswith(first_line)]
    assert len(examples) == 1, (
        f"README.md should hold exactly one python example starting with {first_line!r}"
    )
    return examples[0]
