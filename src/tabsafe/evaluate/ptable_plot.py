"""A picture of a p-table: one panel per original value ``i``, ``p`` against the noise ``v``.

The panels show what seed 000 §5.4 (Table 5.16) tabulates: for each original count, which
perturbed values it may take and how likely each is; a panel's title gives the variance the row
reached (METHODS.md §2), so a row that stays below the ``V`` aimed at shows at a glance.
"""

from __future__ import annotations

import math
import os
from pathlib import Path
from typing import TYPE_CHECKING

import numpy as np

from tabsafe.errors import InputError

if TYPE_CHECKING:  # pragma: no cover
    from tabsafe.io import Outputs
    from tabsafe.protect.ptable import PTable

__all__ = ["check_plot_path", "plot_ptable", "render_ptable_plot"]


def check_plot_path(path: str | os.PathLike[str]) -> Path:
    """A plot is a PNG image: refuse any other name before anything is drawn."""
    target = Path(path)
    if target.suffix.lower() != ".png":
        raise InputError(f"a plot is a PNG image: give a .png name; got {target.suffix or 'no extension'}",
                         where=str(target))
    return target


def render_ptable_plot(ptable: PTable, target: str | os.PathLike[str]) -> None:
    """Draw ``ptable`` and save it as PNG to ``target`` as is (callers make it atomic)."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    i_col, v_col, p_col = ptable.column("i"), ptable.column("v"), ptable.column("p")
    reports = {r.i: r for r in ptable.row_reports}
    values = np.unique(i_col).tolist()
    ncols = min(4, len(values))
    nrows = math.ceil(len(values) / ncols)
    fig, axes = plt.subplots(nrows, ncols, figsize=(3.2 * ncols, 2.4 * nrows), squeeze=False, sharex=True)
    d = int(np.abs(v_col).max())
    try:
        for ax, i in zip(axes.flat, values):
            sel = i_col == i
            ax.bar(v_col[sel], p_col[sel], width=0.8, color="#3a6ea5")
            label = f"i>={i}" if i == ptable.i_max else f"i={i}"
            ax.set_title(f"{label}  var={reports[i].variance:.3f}", fontsize=9)
            ax.set_xlim(-d - 0.6, d + 0.6)
            ax.set_ylim(0, 1)
        for ax in list(axes.flat)[len(values):]:
            ax.set_visible(False)
        fig.supxlabel("noise v = j - i")
        fig.supylabel("p")
        fig.tight_layout()
        fig.savefig(target, format="png", dpi=100)
    finally:
        plt.close(fig)


def plot_ptable(ptable: PTable, path: str | os.PathLike[str], *, outputs: Outputs | None = None) -> Path:
    """Write the PNG of ``ptable`` to ``path`` (a ``.png`` name).

    With ``outputs`` the file joins that transaction (``path`` planned there); without, it is
    written on its own, atomically.
    """
    target = check_plot_path(path)
    if outputs is not None:
        with outputs.open(target) as tmp:
            render_ptable_plot(ptable, tmp)
        return target
    from tabsafe.io import atomic_path

    with atomic_path(target) as tmp:
        render_ptable_plot(ptable, tmp)
    return target
