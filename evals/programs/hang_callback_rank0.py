"""A Lightning-like Trainer runs its callbacks' `on_epoch_end` hooks on the global-zero rank only; one callback
all_reduces a metric inside its hook, so rank 0 waits in that all_reduce (called from the Trainer's hook runner)
while rank 1 goes on to the end-of-fit barrier. Run with 2 ranks.
Expected: odd rank 0, cause rank_conditional_collective, location: the `if self.is_global_zero:` line."""
from datetime import timedelta

import torch
import torch.distributed as dist


class MeanLossCallback:
    def on_epoch_end(self, trainer: "Trainer") -> None:
        total = torch.tensor([trainer.loss_sum])
        dist.all_reduce(total)
        trainer.logged["mean_loss"] = total.item() / dist.get_world_size()


class Trainer:
    def __init__(self, callbacks: list) -> None:
        self.callbacks = callbacks
        self.is_global_zero = dist.get_rank() == 0
        self.loss_sum = 0.0
        self.logged: dict = {}

    def _call_hook(self, name: str) -> None:
        for cb in self.callbacks:
            getattr(cb, name)(self)

    def fit(self, epochs: int) -> None:
        for epoch in range(epochs):
            self.loss_sum += 1.0 / (epoch + 1)
            if self.is_global_zero:
                self._call_hook("on_epoch_end")
        dist.barrier()


def main() -> None:
    dist.init_process_group("gloo", timeout=timedelta(seconds=300))
    Trainer([MeanLossCallback()]).fit(epochs=2)
    dist.destroy_process_group()


if __name__ == "__main__":
    main()
