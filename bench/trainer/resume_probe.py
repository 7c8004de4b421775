"""Process-start-to-first-resumed-step probe (run as a fresh process by bench_trainer.py).

Prints one JSON line: seconds from process start to imports done, to the Trainer ready
(checkpoint downloaded, verified, restored), and to the end of the first step."""

import time

T0 = time.time()

import json  # noqa: E402
import sys  # noqa: E402

import torch  # noqa: E402

T_IMPORT = time.time()


def main() -> None:
    from foundry.trainer import Trainer

    save_folder, run_dir, steps, width = sys.argv[1], sys.argv[2], int(sys.argv[3]), int(sys.argv[4])
    marks = {}

    class First:
        def batch_end(self, trainer):
            marks.setdefault("first_step", time.time() - T0)

    torch.manual_seed(0)
    model = torch.nn.Sequential(torch.nn.Linear(width, width), torch.nn.ReLU(), torch.nn.Linear(width, 1))
    data = [(torch.randn(32, width), torch.randn(32, 1)) for _ in range(steps)]
    t = Trainer(run_name="probe", model=model, train_dataloader=data, max_duration=f"{steps}ba",
                loss_fn=torch.nn.functional.mse_loss, save_folder=save_folder, save_interval=f"{steps}ba",
                autoresume=True, run_dir=run_dir, device="cpu", progress_bar=False, callbacks=[First()])
    ready = time.time() - T0
    t.fit()
    print(json.dumps({"imports": T_IMPORT - T0, "trainer_ready": ready, "first_step": marks.get("first_step"),
                      "resumed_from": t.checkpoints.resumed_from}))


if __name__ == "__main__":
    main()
