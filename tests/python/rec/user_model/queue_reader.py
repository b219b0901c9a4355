import sys

from reader import parse

import fleet


class Reader(fleet.MultiSlotDataGenerator):
    def init(self, config):
        self.slots = config.get("hyper_parameters.slots")
        self.dense_dim = config.get("hyper_parameters.dense_dim")

    def generate_sample(self, line):
        def wrapper():
            label, dense, ids = parse(line, self.slots, self.dense_dim)
            sample = [("dense_input", dense)]
            sample += [("s%d" % (i + 1), v) for i, v in enumerate(ids)]
            sample.append(("label", [label]))
            yield sample

        return wrapper


if __name__ == "__main__":
    yaml_path, utils_path = sys.argv[1], sys.argv[2]
    sys.path.append(utils_path)
    import common

    r = Reader()
    r.init(common.YamlHelper().load_yaml(yaml_path))
    r.run_from_stdin()
