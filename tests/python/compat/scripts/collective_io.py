# A Paddle 1.x collective (data-parallel) script, ported by its imports: fluid layers, the 1.x
# collective fleet, rank 0 saving with fluid.io. argv: out dir.
import os
import sys

import numpy as np

import fleet
import fleet as fluid  # was: import paddle.fluid as fluid
from fleet import role_maker  # was: from paddle.fluid.incubate.fleet.base import role_maker

out = sys.argv[1]
fleet.init(role_maker.PaddleCloudRoleMaker(is_collective=True))
x = fluid.layers.data(name="x", shape=[4], dtype="float32")
y = fluid.layers.data(name="y", shape=[1], dtype="float32")
pred = fluid.layers.fc(input=x, size=1)
diff = fluid.layers.elementwise_sub(pred, y)
loss = fluid.layers.mean(fluid.layers.elementwise_mul(diff, diff))
optimizer = fleet.distributed_optimizer(fluid.optimizer.SGD(learning_rate=0.05))
optimizer.minimize(loss)

exe = fluid.Executor(fluid.CPUPlace())
exe.run(fluid.default_startup_program())
rng = np.random.default_rng(fleet.worker_index())
w = np.array([[1.0], [-2.0], [0.5], [3.0]], np.float32)
for step in range(60):
    xs = rng.standard_normal((16, 4)).astype(np.float32)
    exe.run(fleet.main_program, feed={"x": xs, "y": xs @ w}, fetch_list=[loss])
if fleet.worker_index() == 0:
    fluid.io.save_persistables(exe, os.path.join(out, "ckpt"), fleet.main_program)
    fluid.io.save_inference_model(os.path.join(out, "export"), ["x"], [pred], exe)
fleet.barrier_worker()
