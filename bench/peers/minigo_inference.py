"""Same-machine peer for the inference line of `trainbench bench minigo`: MiniGo's network in Debian's
python3-torch evaluating the batch one self-play driver sends (concurrent_games / threads games x
virtual_losses leaves), as trainbench's evaluator does it: uint8 planes in, converted to float, softmax
probabilities and tanh values copied out as numpy arrays.

    /usr/bin/python3 bench/peers/minigo_inference.py --preset mini --threads 2 --steps 64

The median of --steps calls after --warmup untimed ones, as trainbench's bench times its calls.
"""
import torch

import step_timing
from minigo_selfplay import Net


def main():
    args, config = step_timing.setup("minigo", __doc__)
    size = config["board_size"]
    net = Net(size, config["filters"], config["trunk_blocks"], config["fc_width"]).eval()
    batch = max(1, config["concurrent_games"] // args.threads) * config["virtual_losses"]
    planes = torch.randint(0, 2, (batch, 13, size, size), dtype=torch.uint8)

    def call():
        with torch.inference_mode():
            policy, values = net(planes.float())
            return policy.numpy().copy(), values.numpy().copy()

    median = step_timing.median_call_seconds(args, call)
    print(f"python3-torch {torch.__version__}: inference {batch / median:10.1f} positions/s  (batch {batch}: "
          f"{config['concurrent_games']} games / {args.threads} threads x {config['virtual_losses']} virtual losses, "
          f"{args.threads} threads, median of {args.steps} calls: {median:.5f} s/call)")


if __name__ == "__main__":
    main()
