"""Tiny helper to write a notebook from a list of ("md"|"code"|"params", text) cells, stored
without outputs.  Used by the scripts that generate the workbook's notebooks."""
from __future__ import annotations

import sys

import nbformat


def build(cells, path):
    nb = nbformat.v4.new_notebook()
    nb.metadata["kernelspec"] = {"name": "python3", "display_name": "Python 3", "language": "python"}
    nb.metadata["language_info"] = {"name": "python"}
    for kind, text in cells:
        text = text.strip("\n")
        if kind == "md":
            nb.cells.append(nbformat.v4.new_markdown_cell(text))
        else:
            c = nbformat.v4.new_code_cell(text)
            if kind == "params":
                c.metadata["tags"] = ["parameters"]
            nb.cells.append(c)
    for i, c in enumerate(nb.cells):  # stable ids keep diffs quiet
        c["id"] = f"c{i:03d}"
    nbformat.validate(nb)
    nbformat.write(nb, path)
    print(f"wrote {path} ({len(nb.cells)} cells)", file=sys.stderr)
