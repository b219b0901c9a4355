# Paddle 1.x local training of CTR-DNN with a dataset (train.py of the example), then an
# inference export. Ported by the imports and nothing else.
import sys

from network_conf import ctr_dnn_model_dataset

import fleet as fluid  # was: import paddle.fluid as fluid

train_files, model_dir = sys.argv[1].split(","), sys.argv[2]

avg_cost, auc_var, batch_auc_var, accuracy, predict, data_list = ctr_dnn_model_dataset(8, 100003)
optimizer = fluid.optimizer.Adam(learning_rate=1e-3)
optimizer.minimize(avg_cost)

exe = fluid.Executor(fluid.CPUPlace())
exe.run(fluid.default_startup_program())
dataset = fluid.DatasetFactory().create_dataset()
dataset.set_use_var(data_list)
dataset.set_pipe_command("python dataset_generator.py")
dataset.set_batch_size(64)
dataset.set_thread(2)
dataset.set_filelist(train_files)
exe.train_from_dataset(
    program=fluid.default_main_program(),
    dataset=dataset,
    fetch_list=[auc_var],
    fetch_info=["auc"],
    print_period=50,
    debug=False,
)
fluid.io.save_inference_model(model_dir, [v.name for v in data_list[:-1]], [predict], exe)
