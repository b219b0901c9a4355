# The pipe_command reader of Paddle 1.x CTR-DNN. Ported by the import below and nothing else.
import fleet.data_generator as dg  # was: import paddle.fluid.incubate.data_generator as dg

cont_min_ = [0, -3, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0]
cont_max_ = [20, 600, 100, 50, 64000, 500, 100, 50, 500, 10, 10, 10, 50]
cont_diff_ = [20, 603, 100, 50, 64000, 500, 100, 50, 500, 10, 10, 10, 50]
hash_dim_ = 100003
continuous_range_ = range(1, 14)
categorical_range_ = range(14, 40)


class CriteoDataset(dg.MultiSlotDataGenerator):
    def generate_sample(self, line):
        def reader():
            features = line.rstrip("\n").split("\t")
            dense_feature = []
            sparse_feature = []
            for idx in continuous_range_:
                if features[idx] == "":
                    dense_feature.append(0.0)
                else:
                    dense_feature.append(
                        (float(features[idx]) - cont_min_[idx - 1]) / cont_diff_[idx - 1]
                    )
            for idx in categorical_range_:
                sparse_feature.append([hash(str(idx) + features[idx]) % hash_dim_])
            label = [int(features[0])]
            feature_name = ["dense_input"]
            for idx in categorical_range_:
                feature_name.append("C" + str(idx - 13))
            feature_name.append("label")
            yield zip(feature_name, [dense_feature] + sparse_feature + [label])

        return reader


d = CriteoDataset()
d.run_from_stdin()
