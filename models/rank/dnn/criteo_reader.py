"""Raw Criteo lines as CTR-DNN's inputs, for the DataLoader reader (runner.reader_type:
DataLoader; PaddleRec's criteo_reader.py, reading raw Criteo instead of PaddleRec's
pre-processed slot files).

A line is `label I1..I13 C1..C26`, TAB-separated, an empty field missing. A sample is
[label, C1, ..., C26, dense_input], in the order of StaticModel.create_feeds():
* label int64 [1];
* C1..C26 int64 [1] each: the 8-hex-digit value hashed with its slot into
  [0, sparse_feature_number) (SplitMix64 of (slot + 1) << 32 | value; a missing value is one
  fixed id per slot), the hash of examples/ctr_dnn/criteo_reader.py, so both read the same ids;
* dense_input float32 [13]: log(1 + max(x, 0)), missing = 0; or, with
  `hyper_parameters.dense_transform: minmax` (DeepFM, whose factorisation machine multiplies
  the raw values), (x - min) / (max - min) with PaddleRec's Criteo ranges, missing = 0.
"""

import math

import numpy as np

from fleet.io import IterableDataset

NUM_DENSE, NUM_SPARSE = 13, 26
# PaddleRec's Criteo ranges of I1..I13 (models/rank/deepfm's reader).
DENSE_MIN = [0, -3, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0]
DENSE_MAX = [20, 600, 100, 50, 64000, 500, 100, 50, 500, 10, 10, 10, 50]
_MASK = (1 << 64) - 1
_MISSING = 1 << 40


def mix64(z):
    """SplitMix64's finaliser (Steele et al., OOPSLA 2014) on a Python int."""
    z = (z + 0x9E3779B97F4A7C15) & _MASK
    z = ((z ^ (z >> 30)) * 0xBF58476D1CE4E5B9) & _MASK
    z = ((z ^ (z >> 27)) * 0x94D049BB133111EB) & _MASK
    return z ^ (z >> 31)


def dense_value(index, text, transform):
    if not text:
        return 0.0
    if transform == "minmax":
        return (int(text) - DENSE_MIN[index]) / (DENSE_MAX[index] - DENSE_MIN[index])
    return math.log1p(max(int(text), 0))


def parse_line(line, sparse_feature_number, transform="log"):
    """(label, [26 ids], [13 floats]) of one raw Criteo line."""
    fields = line.rstrip("\n").split("\t")
    if len(fields) != 1 + NUM_DENSE + NUM_SPARSE:
        raise ValueError(f"a Criteo line has 40 TAB-separated fields, got {len(fields)}")
    label = int(fields[0])
    dense = [dense_value(i, v, transform) for i, v in enumerate(fields[1 : 1 + NUM_DENSE])]
    ids = []
    for slot, value in enumerate(fields[1 + NUM_DENSE :]):
        key = (slot + 1) << 32
        key |= int(value, 16) if value else _MISSING
        ids.append(mix64(key) % sparse_feature_number)
    return label, ids, dense


class RecDataset(IterableDataset):
    """Iterates the samples of `file_list`; `config` gives sparse_feature_number."""

    def __init__(self, file_list, config):
        super().__init__()
        self.file_list = file_list
        self.sparse_feature_number = config.get("hyper_parameters.sparse_feature_number")
        self.transform = config.get("hyper_parameters.dense_transform", "log")

    def __iter__(self):
        for path in self.file_list:
            with open(path) as f:
                for line in f:
                    label, ids, dense = parse_line(line, self.sparse_feature_number, self.transform)
                    sample = [np.array([label], dtype="int64")]
                    sample += [np.array([i], dtype="int64") for i in ids]
                    sample.append(np.array(dense, dtype="float32"))
                    yield sample
