# Paddle 1.x parameter-server training of CTR-DNN (the "CPU distributed training best practice"
# order: init_worker() before running the startup program; the first worker saves).
# Ported by replacing these imports and nothing else:
#   import paddle.fluid as fluid -> import fleet as fluid
#   from paddle.fluid.incubate.fleet.parameter_server.distribute_transpiler import fleet
#     -> import fleet
#   from paddle.fluid.incubate.fleet.base import role_maker -> from fleet import role_maker
#   from paddle.fluid.incubate.fleet.parameter_server.distribute_transpiler.distributed_strategy
#     import StrategyFactory -> from fleet import DistributedStrategyFactory as StrategyFactory
import json
import os
import sys

from network_conf import ctr_dnn_model_dataset

import fleet
import fleet as fluid
from fleet import DistributedStrategyFactory as StrategyFactory
from fleet import role_maker

mode, train_files, model_dir = sys.argv[1], sys.argv[2].split(","), sys.argv[3]

avg_cost, auc_var, batch_auc_var, accuracy, predict, data_list = ctr_dnn_model_dataset(8, 100003)

role = role_maker.PaddleCloudRoleMaker()
fleet.init(role)
if mode == "sync":
    strategy = StrategyFactory.create_sync_strategy()
elif mode == "half_async":
    strategy = StrategyFactory.create_half_async_strategy()
elif mode == "geo":
    strategy = StrategyFactory.create_geo_strategy(5)
else:
    strategy = StrategyFactory.create_async_strategy()
optimizer = fluid.optimizer.Adam(learning_rate=1e-3)
optimizer = fleet.distributed_optimizer(optimizer, strategy)
optimizer.minimize(avg_cost)

if fleet.is_server():
    fleet.init_server()
    fleet.run_server()
elif fleet.is_worker():
    fleet.init_worker()
    exe = fluid.Executor(fluid.CPUPlace())
    exe.run(fleet.startup_program)
    dataset = fluid.DatasetFactory().create_dataset()
    dataset.set_use_var(data_list)
    dataset.set_pipe_command("python dataset_generator.py")
    dataset.set_batch_size(64)
    dataset.set_thread(1)
    dataset.set_filelist(train_files[fleet.worker_index() :: fleet.worker_num()])
    exe.train_from_dataset(
        program=fleet.main_program,
        dataset=dataset,
        fetch_list=[auc_var],
        fetch_info=["auc"],
        print_period=50,
        debug=False,
    )
    if fleet.is_first_worker():
        fleet.save_persistables(executor=exe, dirname=os.path.join(model_dir, "checkpoint"))
        fleet.save_inference_model(
            exe, os.path.join(model_dir, "inference"), [v.name for v in data_list[:-1]], [predict]
        )
    with open(os.path.join(os.environ["OUT_DIR"], f"train.{fleet.worker_index()}.json"), "w") as f:
        json.dump({"done": True}, f)
    fleet.stop_worker()
