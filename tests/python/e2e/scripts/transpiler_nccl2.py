"""Paddle's nccl2-mode DistributeTranspiler example, ported by its import line: each trainer
transpiles with config.mode = "nccl2", its trainer id and every trainer's endpoint
(PADDLE_TRAINER_ID, PADDLE_TRAINER_ENDPOINTS, PADDLE_CURRENT_ENDPOINT), runs the startup program
and trains its half of each batch; the ranks average their gradients over Gloo on CPU. Writes
the parameters and the collective ops of the programs to $OUT_DIR/trainer.<id>.json."""

import json
import os

import numpy as np
import transpiler_manual  # the model and data of the pserver example, beside this file

import fleet as fluid


def main():  # noqa: ANN201
    fluid.default_startup_program().random_seed = 9
    loss = transpiler_manual.build(fluid)
    trainer_id = int(os.getenv("PADDLE_TRAINER_ID", "0"))
    trainers = os.getenv("PADDLE_TRAINER_ENDPOINTS")
    current_endpoint = os.getenv("PADDLE_CURRENT_ENDPOINT")

    config = fluid.DistributeTranspilerConfig()
    config.mode = os.getenv("TRANSPILER_MODE", "nccl2")  # the test runs "collective" too
    t = fluid.DistributeTranspiler(config=config)
    t.transpile(
        trainer_id,
        trainers=trainers,
        current_endpoint=current_endpoint,
        startup_program=fluid.default_startup_program(),
    )
    exe = fluid.Executor(fluid.CPUPlace())
    exe.run(fluid.default_startup_program())
    for step in range(transpiler_manual.STEPS):
        feed = transpiler_manual.batch(step, trainer_id)
        exe.run(fluid.default_main_program(), feed=feed, fetch_list=[loss])
    scope = fluid.global_scope()
    out = {n: np.array(scope.find_var(n).get_tensor()).tolist() for n in ("w1", "b1", "w2", "emb")}
    out["ops"] = sorted(
        {
            op.type
            for program in (fluid.default_main_program(), fluid.default_startup_program())
            for op in program.global_block().ops
            if op.type.startswith("c_")
        }
    )
    with open(os.path.join(os.environ["OUT_DIR"], f"trainer.{trainer_id}.json"), "w") as f:
        json.dump(out, f)


if __name__ == "__main__":
    main()
