# PaddleRec 1.7 word2vec trained in one process with a QueueDataset and the pipe_command
# reader, then exported for inference. Ported by the import and nothing else.
# argv: train files (comma-separated), dict file, dict size, model dir.
import sys

from net import optimizer, word2vec_net

import fleet as fluid  # was: import paddle.fluid as fluid

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
optimizer(learning_rate=5.0, decay_steps=100000, decay_rate=0.999).minimize(avg_cost)

exe = fluid.Executor(fluid.CPUPlace())
exe.run(fluid.default_startup_program())
dataset = fluid.DatasetFactory().create_dataset()
dataset.set_use_var(inputs)
dataset.set_pipe_command(f"python reader.py {dict_path} {neg_num} {window_size}")
dataset.set_batch_size(100)
dataset.set_thread(1)
dataset.set_filelist(train_files)
for epoch in range(2):
    exe.train_from_dataset(
        program=fluid.default_main_program(),
        dataset=dataset,
        fetch_list=[avg_cost],
        fetch_info=["loss"],
        print_period=200,
        debug=False,
    )
fluid.io.save_inference_model(model_dir, [v.name for v in inputs], [true_logits, neg_logits], exe)
