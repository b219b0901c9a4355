"""Raw Criteo lines as CTR-DNN's inputs for QueueDataset / InmemoryDataset (runner.pipe_command:
`python queuedataset_reader.py`): a MultiSlotDataGenerator run on each file, given the config's
path and the folder of PaddleRec's `common` helpers, as PaddleRec's trainers run it."""

import sys

from criteo_reader import parse_line

import fleet


class Reader(fleet.MultiSlotDataGenerator):
    def init(self, config):
        self.sparse_feature_number = config.get("hyper_parameters.sparse_feature_number")
        self.transform = config.get("hyper_parameters.dense_transform", "log")

    def generate_sample(self, line):
        def wrapper():
            label, ids, dense = parse_line(line, self.sparse_feature_number, self.transform)
            sample = [("label", [label])]
            sample += [(f"C{i + 1}", [v]) for i, v in enumerate(ids)]
            sample.append(("dense_input", dense))
            yield sample

        return wrapper


if __name__ == "__main__":
    yaml_path, utils_path = sys.argv[1], sys.argv[2]
    sys.path.append(utils_path)
    import common

    reader = Reader()
    reader.init(common.YamlHelper().load_yaml(yaml_path))
    reader.run_from_stdin()
