"""SGD whose gradient reduction and update are split across the ranks."""
import torch
import torch.distributed as dist


class SplitSGD(torch.optim.Optimizer):
    def __init__(self, params, lr: float) -> None:
        super().__init__(params, dict(lr=lr))

    @torch.no_grad()
    def step(self) -> None:
        world, rank = dist.get_world_size(), dist.get_rank()
        pending = []
        for group in self.param_groups:
            for p in group["params"]:
                part = torch.empty(p.numel() // world)
                fut = dist.reduce_scatter_tensor(part, p.grad.flatten(), async_op=True).get_future()
                pending.append((fut, p, part, group["lr"]))
        gathers = []
        for fut, p, part, lr in pending:
            fut.wait()
            n = part.numel()
            mine = p.detach().flatten()[rank * n:(rank + 1) * n] - lr * part / world
            full = torch.empty(p.numel())
            work = dist.all_gather_into_tensor(full, mine, async_op=True)
            gathers.append(work.get_future().then(lambda f, p=p, full=full: p.detach().copy_(full.view_as(p))))
        torch.futures.collect_all(gathers).wait()
