# PaddleRec 1.7 word2vec as a parameter-server job of Paddle 1.x's fleet (async: the model's
# decayed learning rate is stepped by the servers), init_worker() before the startup program,
# the first worker exporting the model. Ported by replacing these imports and nothing else:
#   import paddle.fluid as fluid -> import fleet as fluid
#   from paddle.fluid.incubate.fleet.parameter_server.distribute_transpiler import fleet
#     -> import fleet
#   from paddle.fluid.incubate.fleet.base import role_maker -> from fleet import role_maker
#   from paddle.fluid.incubate.fleet.parameter_server.distribute_transpiler.distributed_strategy
#     import StrategyFactory -> from fleet import DistributedStrategyFactory as StrategyFactory
# argv: train files (comma-separated), dict file, dict size, model dir.
import json
import os
import sys

from net import optimizer, word2vec_net

import fleet
import fleet as fluid
from fleet import DistributedStrategyFactory as StrategyFactory
from fleet import role_maker

train_files, dict_path, dict_size, model_dir = (
    sys.argv[1].split(","),
    sys.argv[2],
    sys.argv[3],
    sys.argv[4],
)
# PaddleRec's config.yaml values, but a rate of 5.0 (its 1.0 is for the billion-word corpus;
# on 800 sentences 1.0 needs many more epochs).
neg_num, window_size = 5, 5

inputs, avg_cost, true_logits, neg_logits = word2vec_net(int(dict_size), 16, neg_num)

fleet.init(role_maker.PaddleCloudRoleMaker())
strategy = StrategyFactory.create_async_strategy()
sgd = optimizer(learning_rate=5.0, decay_steps=100000, decay_rate=0.999)
fleet.distributed_optimizer(sgd, strategy).minimize(avg_cost)

if fleet.is_server():
    fleet.init_server()
    fleet.run_server()
elif fleet.is_worker():
    fleet.init_worker()
    exe = fluid.Executor(fluid.CPUPlace())
    exe.run(fleet.startup_program)
    dataset = fluid.DatasetFactory().create_dataset()
    dataset.set_use_var(inputs)
    dataset.set_pipe_command(f"python reader.py {dict_path} {neg_num} {window_size}")
    dataset.set_batch_size(100)
    dataset.set_thread(1)
    dataset.set_filelist(train_files[fleet.worker_index() :: fleet.worker_num()])
    for epoch in range(2):
        exe.train_from_dataset(
            program=fleet.main_program,
            dataset=dataset,
            fetch_list=[avg_cost],
            fetch_info=["loss"],
            print_period=200,
            debug=False,
        )
    if fleet.is_first_worker():
        fleet.save_inference_model(
            exe, model_dir, [v.name for v in inputs], [true_logits, neg_logits]
        )
    with open(os.path.join(os.environ["OUT_DIR"], f"train.{fleet.worker_index()}.json"), "w") as f:
        json.dump({"done": True}, f)
    fleet.stop_worker()
