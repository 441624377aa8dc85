"""A collective NCCL has no implementation for, on the default NCCL group: argv[1] picks it.

band: all_reduce with ReduceOp.BAND (bitwise ops are gloo/MPI only); sparse: all_reduce of a sparse tensor;
float8: all_reduce (SUM) of a float8 tensor."""
import os
import sys
from datetime import timedelta

import torch
import torch.distributed as dist

local_rank = int(os.environ["LOCAL_RANK"])
dist.init_process_group("nccl", timeout=timedelta(seconds=60), device_id=torch.device("cuda", local_rank))
how = sys.argv[1]
if how == "band":
    dist.all_reduce(torch.ones(4, dtype=torch.int32, device="cuda"), op=dist.ReduceOp.BAND)
elif how == "sparse":
    dist.all_reduce(torch.eye(4, device="cuda").to_sparse())
else:
    dist.all_reduce(torch.ones(4, device="cuda").to(torch.float8_e4m3fn))
torch.cuda.synchronize()
dist.destroy_process_group()
