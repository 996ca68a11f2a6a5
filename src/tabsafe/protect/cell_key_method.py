"""The cell key method on tables: method ``ckm`` of the registry.

Every cell of the table — inner cells, margins and subtotals alike — is perturbed on its own
from its count and its cell key (seed 000 §5.4; METHODS.md §2): the same set of records gives
the same key, hence the same noise, in every table and every run. Margins are therefore not
sums of perturbed inner cells: the table is not additive, by design.

Magnitudes (sums of a numeric variable) get noise from the same cell key by R cellKey's flex
design (:class:`~tabsafe.protect.cell_key.MagnitudeParams`); means are published as perturbed
magnitude over perturbed count (seed 000 §5.7, Tables 5.23/5.24), never over the true count.
"""

from __future__ import annotations

import argparse
from dataclasses import dataclass
from typing import Any, ClassVar

import numpy as np

from tabsafe.errors import InputError
from tabsafe.model.result import Protection, Report
from tabsafe.model.spec import DEFAULT_KEY_DIGITS, KeySpec
from tabsafe.model.table import Table
from tabsafe.protect.cell_key import (
    MagnitudeParams,
    abs_lookup,
    abs_lookup_table,
    lookup_noise,
    perturb_magnitudes,
    perturbed_mean,
)
from tabsafe.protect.ptable import PTable, PTableParams, generate_ptable
from tabsafe.registry import Needs, register_method


def add_arguments(parser: argparse.ArgumentParser) -> None:
    g = parser.add_argument_group("p-table (give a file, or parameters to generate one)")
    g.add_argument("--ptable", metavar="FILE", help="p-table CSV (i,j,p,v,p_int_lb,p_int_ub)")
    g.add_argument("--max-noise", type=int, metavar="D", help="maximum absolute noise")
    g.add_argument("--variance", type=float, metavar="V", help="noise variance")
    g.add_argument("--js", type=int, default=0, metavar="J", help="perturbed values 1..J never occur (default 0)")
    g.add_argument("--pstay", type=float, metavar="P", help="lower bound of the probability of no change")
    k = parser.add_argument_group("record keys")
    k.add_argument("--key", default="rkey", metavar="COLUMN", help="record-key column (default rkey)")
    k.add_argument("--key-digits", type=int, default=DEFAULT_KEY_DIGITS, help="decimal digits of the keys")
    k.add_argument("--abs-modulus", type=int, metavar="M",
                   help="ABS integer form: keys are integers 0..M-1, cell key = sum mod M (e.g. 256)")
    m = parser.add_argument_group("magnitudes and means")
    m.add_argument("--magnitude", metavar="VAR", help="also perturb the sum of VAR and publish its mean")
    m.add_argument("--flex-point", type=float, metavar="FP", help="flex point of the magnitude noise")
    m.add_argument("--p-small", type=float, default=0.10, help="relative noise below the flex point (0.10)")
    m.add_argument("--p-large", type=float, default=0.02, help="relative noise for large values (0.02)")
    m.add_argument("--mag-max-noise", type=int, default=3, help="D of the magnitude p-table (3)")
    m.add_argument("--mag-variance", type=float, default=1.0, help="V of the magnitude p-table (1.0)")


def from_args(args: argparse.Namespace) -> CellKeyMethod:
    if args.ptable and (args.max_noise is not None or args.variance is not None):
        raise InputError("give either --ptable or --max-noise/--variance, not both")
    if args.ptable:
        ptable = PTable.from_csv(args.ptable)
    elif args.max_noise is not None and args.variance is not None:
        ptable = generate_ptable(PTableParams(max_noise=args.max_noise, variance=args.variance, js=args.js,
                                              pstay=args.pstay))
    else:
        raise InputError("the cell key method needs --ptable FILE or --max-noise D --variance V [--js J]")
    magnitude = None
    if args.magnitude:
        if args.flex_point is None:
            raise InputError("--magnitude needs --flex-point FP (where relative noise starts to fall)")
        mag_ptable = generate_ptable(PTableParams(max_noise=args.mag_max_noise, variance=args.mag_variance, js=0))
        magnitude = MagnitudeParams(ptable=mag_ptable, fp=args.flex_point, p_small=args.p_small,
                                    p_large=args.p_large, key_digits=args.key_digits)
    return CellKeyMethod(ptable=ptable, key=args.key, key_digits=args.key_digits, abs_modulus=args.abs_modulus,
                         magnitude_variable=args.magnitude, magnitude=magnitude)


@register_method("ckm", add_arguments=add_arguments, from_args=from_args,
                 summary="cell key method: the same cell gets the same noise in every table")
@dataclass(frozen=True, kw_only=True)
class CellKeyMethod:
    """Perturb every cell from its cell key (seed 000 §5.4; ABS integer form 004 §3.3).

    Attributes:
        ptable: the noise distributions (a :class:`PTable`, or :class:`PTableParams` to
            generate one).
        key: the record-key column the cell keys are summed from.
        key_digits: decimal digits of U[0,1) record keys.
        abs_modulus: use the ABS integer form instead: integer keys ``0..m-1``, ``ck = Σ rk mod m``
            and a look-up table of ``m`` columns built from the p-table.
        magnitude_variable: numeric variable whose cell sums are perturbed too (``sum_<var>``),
            with its mean published as ``mean_<var>`` = perturbed sum / perturbed count.
        magnitude: the magnitude noise design (required with ``magnitude_variable``).
    """

    name: ClassVar[str] = "ckm"
    ptable: PTable | PTableParams
    key: str = "rkey"
    key_digits: int = DEFAULT_KEY_DIGITS
    abs_modulus: int | None = None
    magnitude_variable: str | None = None
    magnitude: MagnitudeParams | None = None

    def __post_init__(self) -> None:
        if isinstance(self.ptable, PTableParams):
            object.__setattr__(self, "ptable", generate_ptable(self.ptable))
        if not isinstance(self.ptable, PTable):
            raise InputError(f"parameter 'ptable' must be a PTable or PTableParams; got {type(self.ptable).__name__}")
        if (self.magnitude_variable is None) != (self.magnitude is None):
            raise InputError("parameters 'magnitude_variable' and 'magnitude' go together")
        if self.abs_modulus is not None and self.abs_modulus < 2:
            raise InputError(f"parameter 'abs_modulus' must be an integer >= 2; got {self.abs_modulus}")

    @property
    def key_spec(self) -> KeySpec:
        if self.abs_modulus is not None:
            return KeySpec(column=self.key, modulus=self.abs_modulus)
        return KeySpec(column=self.key, digits=self.key_digits)

    def needs(self) -> Needs:
        sums = (self.magnitude_variable,) if self.magnitude_variable else ()
        return Needs(key=self.key_spec, sums=sums, microdata=True)

    def protect(self, table: Table, *, seed: int | None = None) -> Protection:
        """Perturbed counts for every cell; ``seed`` is not used (the keys are the randomness)."""
        if "ckey" not in table.cells.columns:
            raise InputError("the cell key method needs a table tabulated with record keys (a 'ckey' column)")
        assert isinstance(self.ptable, PTable)
        counts = table.counts
        if self.abs_modulus is not None:
            lut = abs_lookup_table(self.ptable, modulus=self.abs_modulus)
            noise = abs_lookup(counts, table.column("ckey_int"), lut)
        else:
            noise = lookup_noise(counts, table.column("ckey"), self.ptable)
        perturbed = counts + noise
        columns: dict[str, Any] = {"count": perturbed, "original": counts.copy()}
        release = ["count"]
        figures: dict[str, Any] = {
            "cells": table.n_cells,
            "cells_changed": int(np.count_nonzero(noise)),
            "share_changed": round(float(np.count_nonzero(noise)) / table.n_cells, 4),
            "mean_abs_noise": round(float(np.abs(noise).mean()), 4),
            "max_abs_noise": int(np.abs(noise).max(initial=0)),
        }
        if self.magnitude_variable:
            assert self.magnitude is not None
            col = f"sum_{self.magnitude_variable}"
            values = table.column(col)
            pert = perturb_magnitudes(values, table.column("ckey"), self.magnitude)
            columns[col] = pert
            columns[f"original_{col}"] = values.copy()
            columns[f"mean_{self.magnitude_variable}"] = perturbed_mean(pert, perturbed)
            release += [col, f"mean_{self.magnitude_variable}"]
            nz = values != 0
            figures["magnitude_mean_relative_deviation"] = round(
                float(np.mean(np.abs(pert[nz] - values[nz]) / np.abs(values[nz]))) if nz.any() else 0.0, 5
            )
        params: dict[str, Any] = {"key": self.key, "key_digits": self.key_digits, "abs_modulus": self.abs_modulus,
                                  "i_max": self.ptable.i_max}
        if self.ptable.params is not None:
            p = self.ptable.params
            params.update(max_noise=p.max_noise, variance=p.variance, js=p.js, pstay=p.pstay)
        if self.magnitude_variable:
            params["magnitude_variable"] = self.magnitude_variable
        return Protection(
            table=table.with_values(**columns),
            report=Report(method=self.name, params=params, seed=None, figures=figures,
                          notes=("margins are perturbed as cells of their own: the table is not additive",)),
            release_columns=tuple(release),
        )
