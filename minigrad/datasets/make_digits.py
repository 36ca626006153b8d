"""Regenerate digits.npz from scikit-learn's digits.csv.gz (run by hand, never at import).

    python -m minigrad.datasets.make_digits path/to/sklearn/datasets/data/digits.csv.gz

The csv has one image per line: 64 pixel counts (0..16, row-major 8x8) then the label (0..9).
The npz holds X uint8 (1797, 64) and y uint8 (1797,), compressed. See README.md in this folder.
"""
from __future__ import annotations

import gzip
import sys
from pathlib import Path

import numpy as np

OUT = Path(__file__).with_name("digits.npz")


def convert(csv_gz: str | Path, out: str | Path = OUT) -> Path:
    """Read the csv.gz, check it is the 1,797-image set, and write X, y as a compressed npz."""
    with gzip.open(csv_gz, "rt") as f:
        table = np.loadtxt(f, delimiter=",", dtype=np.int64)
    if table.shape != (1797, 65):
        raise ValueError(f"{csv_gz}: expected 1797 rows of 64 pixels + 1 label, got shape "
                         f"{table.shape}. Pass sklearn/datasets/data/digits.csv.gz.")
    X, y = table[:, :64], table[:, 64]
    if X.min() < 0 or X.max() > 16 or y.min() < 0 or y.max() > 9:
        raise ValueError(f"{csv_gz}: pixels must be 0..16 and labels 0..9; got pixels "
                         f"{X.min()}..{X.max()}, labels {y.min()}..{y.max()}.")
    np.savez_compressed(out, X=X.astype(np.uint8), y=y.astype(np.uint8))
    return Path(out)


if __name__ == "__main__":
    if len(sys.argv) not in (2, 3):
        sys.exit("usage: python -m minigrad.datasets.make_digits DIGITS_CSV_GZ [OUT_NPZ]")
    print(convert(*sys.argv[1:]))
