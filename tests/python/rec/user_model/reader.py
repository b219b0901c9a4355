import numpy as np

from fleet.io import IterableDataset


def parse(line, slots, dense_dim):
    """PaddleRec's slot format: `click:1 dense_feature:0.5 ... 1:17 2:40 ...`."""
    label, dense, ids = 0, [], [[] for _ in range(slots)]
    for item in line.split():
        slot, value = item.split(":")
        if slot == "click":
            label = int(value)
        elif slot == "dense_feature":
            dense.append(float(value))
        else:
            ids[int(slot) - 1].append(int(value))
    dense += [0.0] * (dense_dim - len(dense))
    return label, dense, [i or [0] for i in ids]


class RecDataset(IterableDataset):
    def __init__(self, file_list, config):
        super().__init__()
        self.file_list = file_list
        self.slots = config.get("hyper_parameters.slots")
        self.dense_dim = config.get("hyper_parameters.dense_dim")

    def __iter__(self):
        for name in self.file_list:
            with open(name) as f:
                for line in f:
                    label, dense, ids = parse(line, self.slots, self.dense_dim)
                    yield (
                        [np.array(dense, dtype="float32")]
                        + [np.array(i, dtype="int64") for i in ids]
                        + [np.array([label], dtype="int64")]
                    )
