"""A ZeRO-2 style optimizer that overlaps communication through Work.get_future(), written for NCCL, run on gloo.

Modelled on nanochat's distributed optimizers: gradients are reduce-scattered with
`reduce_scatter_tensor(..., async_op=True).get_future()`, each rank updates its shard, the shards are
all-gathered back with `all_gather_into_tensor(..., async_op=True).get_future()` and everything is joined
with `torch.futures.collect_all`. `exchange_extras` uses the other shapes seen in the wild: a chain split over
lines, a dict comprehension, a Work kept in a variable whose future is chained later, isend/irecv.

On gloo (torch 2.13) the first get_future() raises `RuntimeError: Work::getFuture not implemented.`
Expected cause: gloo_missing_feature.  Fixed by the patch gloo_future_shim.
"""
from datetime import timedelta

import torch
import torch.distributed as dist


class ShardedSGD(torch.optim.Optimizer):
    """SGD whose gradient reduction and parameter update are sharded across ranks."""

    def __init__(self, params, lr: float) -> None:
        super().__init__(params, dict(lr=lr))

    @torch.no_grad()
    def step(self) -> None:
        world, rank = dist.get_world_size(), dist.get_rank()
        grad_futures, shards = [], []
        for group in self.param_groups:
            for p in group["params"]:
                grad_slice = torch.empty(p.numel() // world)
                grad_futures.append(dist.reduce_scatter_tensor(grad_slice, p.grad.flatten(), async_op=True).get_future())
                shards.append((p, grad_slice, group["lr"]))
        gather_futures = []
        for fut, (p, grad_slice, lr) in zip(grad_futures, shards):
            fut.wait()
            n = grad_slice.numel()
            new_slice = p.detach().flatten()[rank * n:(rank + 1) * n] - lr * grad_slice / world
            full = torch.empty(p.numel())
            gather_futures.append(
                dist.all_gather_into_tensor(full, new_slice, async_op=True)
                .get_future()
                .then(lambda f, p=p, full=full: p.detach().copy_(full.view_as(p)))
            )
        torch.futures.collect_all(gather_futures).wait()


def exchange_extras(rank: int, world: int) -> float:
    """Other get_future() shapes; returns a value every rank must agree on."""
    inputs = [torch.full((2,), float(rank + i)) for i in range(world)]
    out = torch.empty(2)
    fut = dist.reduce_scatter(
        out, inputs, async_op=True
    ).get_future()
    fut.wait()
    outs = {k: torch.empty(1) for k in ("a", "b")}
    grads = {"a": torch.ones(world), "b": torch.arange(world, dtype=torch.float32)}
    by_name = {k: dist.reduce_scatter_tensor(outs[k], grads[k], async_op=True).get_future() for k in outs}
    for f in by_name.values():
        f.wait()
    single = torch.empty(1)
    work = dist.reduce_scatter_tensor(single, torch.ones(world), async_op=True)
    doubled = work.get_future().then(lambda f: f.value()[0] * 2).wait()
    buf = torch.full((1,), 7.0) if rank == 0 else torch.zeros(1)
    if rank == 0:
        dist.isend(buf, 1).get_future().wait()
    elif rank == 1:
        got = dist.irecv(buf, 0).get_future().value()[0]
        assert got.item() == 7.0, got
    total = torch.tensor([out.sum() + outs["a"].sum() + doubled.sum() + buf.sum()])
    dist.all_reduce(total)
    return total.item()


def main() -> None:
    dist.init_process_group("gloo", timeout=timedelta(seconds=20))
    rank, world = dist.get_rank(), dist.get_world_size()
    torch.manual_seed(0)
    model = torch.nn.Sequential(torch.nn.Linear(8, 16), torch.nn.Tanh(), torch.nn.Linear(16, 4))
    opt = ShardedSGD(model.parameters(), lr=0.1)
    torch.manual_seed(1 + rank)
    for _ in range(3):
        x, y = torch.randn(16, 8), torch.randn(16, 4)
        loss = torch.nn.functional.mse_loss(model(x), y)
        loss.backward()
        opt.step()
        opt.zero_grad(set_to_none=False)
    extra = exchange_extras(rank, world)
    checksum = sum(p.detach().double().sum().item() for p in model.parameters()) + extra
    print(f"DISTDOCTOR_OK rank={rank} checksum={checksum!r}", flush=True)
    dist.destroy_process_group()


if __name__ == "__main__":
    main()
