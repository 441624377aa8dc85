"""Readings that separate neighbouring causes on real text: what the description says about the run (it meets
`when` / `unless` conditions as a log line does), where a failure happened (a checkpoint load, the first
barrier, a store call), which side of a connection closed, and short accounts without any error line."""

import json
import os
import subprocess
import sys
from pathlib import Path

from distdoctor import paths
from distdoctor.diagnose import diagnose_text, store_wait
from distdoctor.diagnose.retrieval import retrieval_tokens
from distdoctor.diagnose.structure import failure_of_text, similarity

# Produced here: python -m torch.distributed.run --standalone --nproc_per_node=2 evals/programs/fail_code_not_synced.py
# (tests/data/logs/gen_code_not_synced.log), torch 2.13.0+cpu, gloo
DDP_MODELS = ("[rank1]: RuntimeError: DDP expects same model across all ranks, but Rank 1 has 4 params, while rank 0 "
              "has inconsistent 6 params.\n")
# https://github.com/wenet-e2e/wekws/issues/172
C10D_STORE = ("torch.distributed.elastic.rendezvous.api.RendezvousConnectionError: The connection to the C10d store "
              "has failed. See inner exception for details.\n")
# https://github.com/showlab/Tune-A-Video/issues/90
PORT_TAKEN = ("RuntimeError: The server socket has failed to listen on any local network address. The server socket "
              "has failed to bind to [::]:29500 (errno: 98 - Address already in use). The server socket has failed "
              "to bind to 0.0.0.0:29500 (errno: 98 - Address already in use).\n")
# https://github.com/Lightning-AI/pytorch-lightning/issues/19219
OOM_16 = "torch.cuda.OutOfMemoryError: CUDA out of memory. Tried to allocate 16.\n"
# https://github.com/MIC-DKFZ/nnUNet/issues/593
BARRIER_OOM = (
    "Traceback (most recent call last):\n"
    '  File "run/run_training_DDP.py", line 184, in <module>\n'
    "    main()\n"
    '  File "/afs/crc.nd.edu/user/y/ypeng4/nnUnet/nnunet/training/network_training/nnUNetTrainerV2_DDP.py", '
    "line 160, in initialize\n"
    "    distributed.barrier()\n"
    '  File "/afs/crc.nd.edu/user/y/ypeng4/.local/lib/python3.7/site-packages/torch/distributed/distributed_c10d.py", '
    "line 2420, in barrier\n"
    "    work = default_pg.barrier(opts=opts)\n"
    "RuntimeError: CUDA error: out of memory\n")


def _top(text: str, context: str | None = None) -> dict:
    return diagnose_text(text, context=context)["causes"][0]


def test_models_that_differ_are_that_cause_unless_the_run_shows_its_nodes_differ():
    assert _top(DDP_MODELS)["id"] == "model_differs_across_ranks"
    assert _top(DDP_MODELS, "torchrun --standalone --nproc_per_node=2 train.py")["id"] == "model_differs_across_ranks"
    copied = "two nodes, code and configs copied to each by hand; the second node's copy is older"
    assert _top(DDP_MODELS, copied)["id"] == "environment_mismatch"


def test_a_lost_store_is_a_shared_port_when_several_jobs_share_the_machine():
    assert _top(C10D_STORE)["id"] == "rendezvous_unreachable"
    top = _top(C10D_STORE, "several single-GPU jobs submitted at once on one machine")
    assert top["id"] == "port_in_use" and top["level"] == "signature"


def test_a_taken_port_under_srun_tasks_that_each_run_a_launcher_has_the_slurm_launch_next():
    """The labelling rule (evals/corpus/README.md): the setting alone never picks the cause; the launch line makes
    slurm_launch the runner-up of the port the log shows taken."""
    assert _top(PORT_TAKEN)["id"] == "port_in_use"
    assert _top(PORT_TAKEN, "srun --ntasks-per-node=1 torchrun --nproc_per_node=8 train.py")["id"] == "port_in_use"
    nested = "sbatch --nodes=2 --ntasks-per-node=8, srun torchrun --nproc_per_node=$SLURM_NTASKS_PER_NODE"
    r = diagnose_text(PORT_TAKEN, context=nested)
    assert r["verdict"] == "confident" and [c["id"] for c in r["causes"][:2]] == ["port_in_use", "slurm_launch"]


def test_oom_while_resuming_a_checkpoint_is_the_load_without_map_location():
    assert _top(OOM_16)["id"] == "oom_one_rank"
    assert _top(OOM_16, "Lightning, 4 GPUs, resuming a GAN from a checkpoint with load_from_checkpoint")["id"] \
        == "torch_load_no_map_location"
    # https://github.com/lopuhin/transformer-lm/issues/21: the traceback itself shows the load
    lopuhin = ("    optimizer.load_state_dict(torch.load(optimizer_path))\n"
               '  File "/home/ubuntu/anaconda3/envs/pytorch_p36/lib/python3.6/site-packages/torch/serialization.py", '
               "line 99, in _cuda_deserialize\n"
               "    return storage_type(obj.size())\n"
               "RuntimeError: CUDA out of memory. Tried to allocate 20.00 MiB (GPU 0; 11.17 GiB total capacity; "
               "962.69 MiB already allocated; 17.19 MiB f\n")
    assert _top(lopuhin)["id"] == "torch_load_no_map_location"


def test_a_cuda_error_oom_at_the_first_barrier_is_every_rank_on_one_gpu():
    assert _top(BARRIER_OOM)["id"] == "local_rank_device"


def test_a_wrapper_exception_without_a_message_matches_no_known_failure():
    bare = failure_of_text("torch.multiprocessing.spawn.ProcessRaisedException:")
    assert not bare.says and similarity(bare, bare) == 0.0
    said = failure_of_text("torch.multiprocessing.spawn.ProcessRaisedException: RuntimeError: boom")
    assert said.says and similarity(said, said) == 1.0
    # https://github.com/tczhangzhi/pytorch-distributed/issues/18: the log stops after the wrapper's line
    r = diagnose_text("    raise ProcessRaisedException(msg, error_index, failed_process.pid)\n"
                      "torch.multiprocessing.spawn.ProcessRaisedException:\n\n"
                      "-- Process 1 terminated with the following error:\n")
    assert r["verdict"] != "confident"


def test_rank0_store_waiting_for_clients_is_an_unreachable_rendezvous():
    """A real rank 0 whose peer never connects (the store's side of an unreachable rendezvous)."""
    code = ("import datetime, torch.distributed as dist; "
            "dist.init_process_group('gloo', timeout=datetime.timedelta(seconds=3))")
    env = {**os.environ, "MASTER_ADDR": "127.0.0.1", "MASTER_PORT": "29794", "RANK": "0", "WORLD_SIZE": "2",
           "OMP_NUM_THREADS": "1"}
    out = subprocess.run([sys.executable, "-c", code], env=env, capture_output=True, text=True, timeout=120)
    assert out.returncode != 0 and "clients joined" in out.stderr
    top = _top(out.stderr)
    assert top["id"] == "rendezvous_unreachable" and top["level"] == "signature"


def test_the_agents_store_call_and_a_vain_store_wait_point_at_the_rendezvous():
    # https://github.com/meta-pytorch/torchx/issues/540 (cut at the raise)
    torchx = ("(CommandActor pid=552, ip=10.130.6.168)   File \"/home/ray/anaconda3/lib/python3.9/site-packages/torch/"
              "distributed/elastic/rendezvous/c10d_rendezvous_backend.py\", line 115, in _call_store\n"
              "(CommandActor pid=552, ip=10.130.6.168)     raise\n")
    assert _top(torchx)["id"] == "rendezvous_unreachable"
    # https://github.com/modelscope/ms-swift/issues/3343
    swift = ("[W228 18:45:15.741177013 socket.cpp:487] [c10d] waitForInput: socket SocketImpl(fd=11, "
             "addr=[xxxxxx.com]:38674, remote=[::ffff:33.148.62.162]:23456) timed out after 900000ms\n")
    assert _top(swift)["id"] == "rendezvous_unreachable"


def test_a_failed_fabric_manager_is_a_fabric_fault():
    # https://github.com/haotian-liu/LLaVA/issues/683
    assert _top("RuntimeError: Unexpected error from cudaGetDeviceCount(). Did you run some cuda functions before "
                "calling NumCudaDevices() that might have already set an error? Error 802: system not yet "
                "initialized\n")["id"] == "fabric_fault"
    # https://github.com/pytorch/pytorch/issues/129749
    assert _top("    Process: 444114 ExecStart=/usr/bin/nv-fabricmanager -c /usr/share/nvidia/nvswitch/fabricmanager.cfg "
                "(code=exited, status=1/FAILURE)\n")["id"] == "fabric_fault"


def test_ncc_socket_closed_by_the_peer_is_an_echo_of_its_death():
    # https://github.com/NVIDIA/nccl/issues/795
    top = _top("a100-st-p4d24xlarge-22:183006:183220 [1] misc/socket.cc:518 NCCL WARN Net : Call to recv from "
               "10.200.84.247<58355> failed : Broken pipe\n")
    assert top["id"] == "peer_died_first"


def test_a_short_account_without_an_error_line_counts_its_words():
    # https://github.com/pytorch/pytorch/issues/31771
    account = ("When using the torch.utils.data.distributed.DistributedSampler () function, the data set cannot be "
               "shuffled, and each epoch samples the data in the same order.\n")
    r = diagnose_text(account)
    top = r["causes"][0]
    assert top["id"] == "sampler_set_epoch_missing" and r["verdict"] == "candidates"
    assert any(ev["kind"] == "keyword" and ev["file"] == "<log>" for ev in top["evidence"])
    # the same words inside a long quiet output are a program's, not an account: not read as keywords
    quiet = "".join(f"step {i}: loss 1.0\n" for i in range(40)) + account
    causes = diagnose_text(quiet)["causes"]
    assert not any(ev["file"] == "<log>" for c in causes for ev in c["evidence"])


def test_retrieval_reads_library_frames_and_skips_traceback_boilerplate():
    text = ("Traceback (most recent call last):\n"
            '  File "train.py", line 3, in <module>\n'
            '  File "/usr/lib/python3.10/site-packages/torch/distributed/elastic/rendezvous/'
            'c10d_rendezvous_backend.py", line 115, in _call_store\n'
            "RuntimeError: boom\n")
    toks = retrieval_tokens(text)
    assert "c10d_rendezvous_backend" in toks and "_call_store" in toks
    assert not {"traceback", "recent", "file", "line", "train"} & set(toks)


SPAWN_KILL = """
import os, signal
import torch.multiprocessing as mp
def work(i):
    if i == 1:
        os.kill(os.getpid(), signal.SIGKILL)
    import time; time.sleep(2)
if __name__ == "__main__":
    mp.spawn(work, nprocs=2)
"""
LOADER_KILL = """
import os, signal
from torch.utils.data import DataLoader, Dataset
class D(Dataset):
    def __len__(self): return 8
    def __getitem__(self, i):
        os.kill(os.getpid(), signal.SIGKILL)
for b in DataLoader(D(), num_workers=1):
    pass
"""


def test_a_process_killed_from_outside_under_spawn_or_in_a_loader_worker_is_memory(tmp_path):
    """Real processes that die of SIGKILL, as the OOM killer kills them."""
    for name, code in (("spawnkill.py", SPAWN_KILL), ("loaderkill.py", LOADER_KILL)):
        script = tmp_path / name
        script.write_text(code)
        out = subprocess.run([sys.executable, str(script)], capture_output=True, text=True, timeout=120,
                             env={**os.environ, "OMP_NUM_THREADS": "1"})
        assert out.returncode != 0 and ("SIGKILL" in out.stderr or "Killed" in out.stderr)
        top = _top(out.stderr)
        assert top["id"] == "oom_one_rank" and top["level"] == "signature", name


def test_a_fresh_torch_tensor_passed_to_a_collective_is_a_cpu_tensor():
    # https://github.com/ssbuild/chatglm_finetuning/issues/76 (a rich traceback cut before its message)
    line = "│ ❱ 138 │   │   total_length = training_type.reduce(torch.tensor(local_length) │\n"
    assert _top(line)["id"] == "cpu_tensor_nccl_group"
    placed = line.replace("torch.tensor(local_length)", "torch.tensor(local_length, device=self.root_device)")
    # placed on a device: no signature (the corpus case itself may still come back as a similar log)
    assert all(c["level"] != "signature" for c in diagnose_text(placed)["causes"] if c["id"] == "cpu_tensor_nccl_group")


# Round two (issue 13, grown corpus): failures that older releases, other launchers or frameworks print in
# their own words. Each text is quoted from the public thread named above it.

# https://github.com/open-mmlab/mmaction/issues/181
KEYERROR_RANK = ("    rank = int(os.environ['RANK'])\n"
                 '  File "/usr/local/src/python37/lib/python3.7/os.py", line 678, in __getitem__\n'
                 "    raise KeyError(key) from None\nKeyError: 'RANK'\n")
# https://github.com/microsoft/AzureML-BERT/issues/48
KEYERROR_MPI = ("    os.environ['MASTER_ADDR'] = os.environ['AZ_BATCHAI_MPI_MASTER_NODE']\n"
                '  File "/opt/conda/lib/python3.6/os.py", line 669, in __getitem__\n'
                "    raise KeyError(key) from None\nKeyError: 'AZ_BATCHAI_MPI_MASTER_NODE'\n")
# https://github.com/pytorch/gloo/pull/456
GLOO_PREAMBLE = ("gloo::EnforceNotMet: [enforce fail at fbcode/gloo/transport/tcp/pair.cc:456] "
                 "op.preamble.length <= op.nbytes. 194478720 vs 4\n")
# https://github.com/NVIDIA/nccl/issues/296
NCCL_MISMATCHED = ("init.cc:1247 NCCL WARN Mismatched collective detected, please check your collective calls at and "
                   "around rank 39. You can use NCCL_DEBUG=INFO and NCCL_DEBUG_SUBSYS=COLL to see the collective logs\n")
# https://github.com/pytorch/pytorch/issues/15592
GLOO_127_0_1_1 = ("terminate called after throwing an instance of 'gloo::IoException'\n"
                  "  what():  [/opt/conda/conda-bld/pytorch_1544084119927/work/third_party/gloo/gloo/transport/tcp/"
                  "pair.cc:724] connect [127.0.1.1]:3210: Connection refused\nAborted (core dumped)\n")
# https://github.com/pytorch/pytorch/issues/17357
FORK_INIT = ('  File "/home/shenli/local/miniconda/lib/python3.7/multiprocessing/process.py", line 297, in _bootstrap\n'
             "    self.run()\n"
             '  File "dist_bug.py", line 5, in run\n    torch.cuda.set_device(rank)\n'
             "RuntimeError: cuda runtime error (3) : initialization error at ../torch/csrc/cuda/Module.cpp:33\n")
# https://github.com/pytorch/pytorch/issues/69197
CONNECT_TIMED_OUT = ('  File "/home/ubuntu/miniconda3/envs/py39/lib/python3.9/site-packages/torch/distributed/elastic/'
                     'rendezvous/c10d_rendezvous_backend.py", line 155, in _create_tcp_store\n'
                     "    store = TCPStore(\nRuntimeError: connect() timed out. Original timeout was 60000 ms.\n")
# https://github.com/pytorch/ignite/issues/2048
IGNITE_SLURM = ("RuntimeError: Defined env variables '['RANK', 'LOCAL_RANK', 'WORLD_SIZE']' should not be specified "
                "with SLURM. Typically, this happens when `torch.distributed.launch` or `torch.multiprocessing.spawn` "
                "are used. Please be sure to use the `sr\n")
# https://github.com/NVIDIA/nccl-tests/issues/185
IBV_FAILED = ("dgxh100-3:225140:225355 [0] misc/ibvwrap.cc:187 NCCL WARN Call to ibv_modify_qp failed with error "
              "Network is unreachable\n"
              "dgxh100-3:225140:225289 [0] misc/socket.cc:49 NCCL WARN socketProgress: Connection closed by remote "
              "peer dgxh100-3<41109>\n")
# https://github.com/pytorch/pytorch/issues/63662
NO_DEFAULT_PG = ("RuntimeError: Default process group has not been initialized, please make sure to call "
                 "init_process_group.\n")
# https://github.com/torchmd/torchmd-net/issues/10
HPARAMS_SET = ("    self.hparams = hparams\n"
               '  File "/home/peastman/miniconda3/envs/torchmd/lib/python3.7/site-packages/torch/nn/modules/module.py",'
               " line 995, in __setattr__\n    object.__setattr__(self, name, value)\nAttributeError: can't set attribute\n")
# https://github.com/schmidt-ju/crat-pred/issues/2
TRAINER_ATTR = ("    self.trainer.accelerator_backend.setup_optimizers(self.trainer)\n"
                "AttributeError: 'Trainer' object has no attribute 'accelerator_backend'\n")
# https://github.com/NVIDIA/apex/issues/1857
TORCH_API_MISSING = ("    if torch.jit.is_tracing() or torch.jit.is_scripting() or torch.compiler.is_compiling() or not "
                     "input.is_cuda:\nAttributeError: module 'torch.compiler' has no attribute 'is_compiling'\n")
# https://github.com/pytorch/pytorch/issues/20380
NO_DISTRIBUTED = (">>> dist.init_process_group\nTraceback (most recent call last):\n"
                  '  File "<stdin>", line 1, in <module>\n'
                  "AttributeError: module 'torch.distributed' has no attribute 'init_process_group'\n")
# https://github.com/vllm-project/vllm/issues/18362
MACOS_STORE = ("[W519 18:43:28.514281000 TCPStore.cpp:125] [c10d] recvValue failed on SocketImpl(fd=22, "
               "addr=[<redacted>]:58160, remote=[<redacted>]:58159): Connection reset by peer\n"
               "frame #3: c10d::TCPStore::ping() + 200 (0x116b4e68c in libtorch_cpu.dylib)\n")


def _confident(text: str, context: str | None = None) -> str:
    top = _top(text, context)
    assert top["level"] == "signature", top
    return top["id"]


def test_a_missing_launcher_variable_names_the_launcher_the_script_expected():
    assert _confident(KEYERROR_RANK) == "single_process_launch"
    assert _confident(KEYERROR_MPI) == "mpi_launcher_env"
    # under the old torch.distributed.launch a missing LOCAL_RANK is the launcher's argument, not a missing launcher
    launched = "python -m torch.distributed.launch --nproc_per_node=2 train.py\nKeyError: 'LOCAL_RANK'\n"
    assert _top(launched)["id"] != "single_process_launch"


def test_size_checks_of_older_gloo_and_nccl_point_at_the_collectives_tensors():
    assert _confident(GLOO_PREAMBLE) == "collective_shape_mismatch"
    assert _confident(NCCL_MISMATCHED) == "collective_shape_mismatch"


def test_older_wordings_of_loopback_fork_and_store_failures():
    assert _confident(GLOO_127_0_1_1) == "gloo_hostname_loopback"
    assert _confident(FORK_INIT) == "cuda_init_before_fork"
    # the same CUDA error outside a child process says nothing about fork
    bare = _top("RuntimeError: cuda runtime error (3) : initialization error at Module.cpp:33\n")
    assert bare["level"] != "signature"
    assert _confident(CONNECT_TIMED_OUT) == "rendezvous_unreachable"


def test_a_framework_that_detects_nested_launchers_under_slurm():
    assert _confident(IGNITE_SLURM) == "slurm_launch"


def test_a_failed_verbs_call_is_the_fabric_not_the_peer_that_closed_after_it():
    assert _confident(IBV_FAILED) == "fabric_fault"


def test_no_default_group_beside_syncbn_is_syncbn():
    assert _top(NO_DEFAULT_PG)["id"] == "single_process_launch"
    assert _confident(NO_DEFAULT_PG, "python tools/train.py config.py, config with SyncBN, one GPU") == \
        "syncbn_without_gpu_ddp"


def test_apis_a_release_renamed_or_removed_are_framework_versions():
    top = _top(HPARAMS_SET)  # read from its structure: the KB quotes the same template
    assert (top["id"], top["level"]) == ("framework_version_mismatch", "structural")
    assert _confident(TRAINER_ATTR) == "framework_version_mismatch"
    assert _confident(TORCH_API_MISSING) == "framework_version_mismatch"


def test_platform_builds_without_distributed_or_with_macos_frames():
    assert _confident(NO_DISTRIBUTED) == "tcpstore_libuv_windows"
    # a single macOS frame is a hint beside the echo of a reset connection, not yet the answer
    assert "tcpstore_libuv_windows" in [c["id"] for c in diagnose_text(MACOS_STORE)["causes"][:3]]


# https://github.com/megvii-model/DetNAS/issues/35 (torch 1.x's wording)
NO_DEFAULT_PG_OLD = "AssertionError: Default process group is not initialized\n"
# https://github.com/pytorch/pytorch/issues/54232
P2P_UNSUPPORTED = ("emu:80510:81733 [0] transport/p2p.cc:276 NCCL WARN failed to open CUDA IPC handle : 217 peer "
                   "access is not supported between these two devices\n")


def test_torch_1x_wording_of_a_missing_default_group():
    assert _confident(NO_DEFAULT_PG_OLD) == "single_process_launch"
    assert _confident(NO_DEFAULT_PG_OLD, "one GPU, the config uses SyncBN") == "syncbn_without_gpu_ddp"


def test_cuda_refusing_peer_access_is_broken_p2p():
    assert _confident(P2P_UNSUPPORTED) == "nccl_p2p_broken"


def test_nccl_socket_transport_without_an_interface():
    # the message of WARN("NET/Socket : no interface found") in NCCL's src/transport/net_socket.cc, with the
    # "NCCL WARN" tag its logger adds
    assert _confident("NCCL WARN NET/Socket : no interface found\n") == "nccl_socket_ifname"


# https://github.com/chemprop/chemprop/issues/853
LIGHTNING_UNUSED = ("RuntimeError: It looks like your LightningModule has parameters that were not used in producing "
                    "the loss returned by training_step. If this is intentional, you must enable the detection of "
                    "unused parameters in DDP, either by setting the string value "
                    "`strategy='ddp_find_unused_parameters_true'` or by setting the flag in the strategy with "
                    "`strategy=DDPStrategy(find_unused_parameters=True)`.\n")


def test_lightnings_wording_of_unused_parameters():
    assert _confident(LIGHTNING_UNUSED) == "unused_parameters"


# https://github.com/snap-research/EfficientFormer/issues/48 (mm*'s non-distributed wrapper on the way to the error)
MM_NO_DEFAULT_PG = ("Traceback (most recent call last):\n"
                    '  File "/root/miniconda3/lib/python3.8/site-packages/mmcv/parallel/data_parallel.py", line 77, '
                    "in train_step\n    return self.module.train_step(*inputs[0], **kwargs[0])\n" + NO_DEFAULT_PG)


def test_no_default_group_under_mm_data_parallel_is_syncbn_without_a_description():
    assert _confident(MM_NO_DEFAULT_PG) == "syncbn_without_gpu_ddp"


# Generic causes that yield to the specific one when the run names its launcher or its shape (sigs3). A fact of
# the description meets `when` / `unless` as a log line does.

# Produced here: python -c "import torch.distributed as dist; dist.init_process_group('gloo')" with RANK,
# WORLD_SIZE, MASTER_ADDR, MASTER_PORT unset, torch 2.13.0+cpu; https://github.com/rwth-i6/i6_core/issues/444
# quotes the same line from a job started by mpirun
ENV_RANK_UNSET = ("ValueError: Error initializing torch.distributed using env:// rendezvous: environment variable "
                  "RANK expected, but not set\n")


def test_env_rendezvous_without_rank_is_the_mpi_launcher_when_mpirun_started_it():
    assert _confident(ENV_RANK_UNSET) == "single_process_launch"
    assert _confident(ENV_RANK_UNSET, "python train.py on one GPU box") == "single_process_launch"
    assert _confident(ENV_RANK_UNSET, "launched with mpirun -np 4 python train.py, DDP") == "mpi_launcher_env"


# https://github.com/huggingface/accelerate/issues/2246 (node qgpu2018 of a Slurm job)
DUPLICATE_GPU = ("qgpu2018:59522:59993 [0] init.cc:795 NCCL WARN Duplicate GPU detected : rank 6 and rank 4 both on "
                 "CUDA device 31000\n")


def test_two_ranks_on_one_gpu_in_a_slurm_job_keeps_the_device_binding_first():
    """The corpus's labelling rule (evals/corpus/README.md): the setting alone never picks the cause. Two ranks on
    one GPU is a device binding; under Slurm the task-to-GPU mapping is the runner-up, not the answer."""
    assert _confident(DUPLICATE_GPU) == "local_rank_device"
    assert _confident(DUPLICATE_GPU, "torchrun --nproc_per_node=2 train.py") == "local_rank_device"
    r = diagnose_text(DUPLICATE_GPU, context="accelerate multi-node training on a Slurm cluster (2 GPUs per node)")
    assert [c["id"] for c in r["causes"][:2]] == ["local_rank_device", "slurm_launch"]


# https://github.com/deepspeedai/DeepSpeed/issues/3916 (srun -n 8, each task starting the deepspeed launcher)
PORT_TAKEN_WRAPPED = ("RuntimeError: The server socket has failed to listen on any local network\n"
                      "address. The server socket has failed to bind to [::]:29600 (errno: 98 - Address\n"
                      "already in use). The server socket has failed to bind to 0.0.0.0:29600 (errno:\n"
                      "98 - Address already in use).\n")
# https://github.com/hiyouga/LlamaFactory/issues/2574 (mpirun)
BATCH_WORLD_ONE = ("AssertionError: Check batch related parameters. train_batch_size is not equal to micro_batch_per_gpu "
                   "* gradient_acc_step * world_size 16 != 1 * 1 * 1\n")


def test_a_launch_setting_is_the_runner_up_of_the_failure_it_prints():
    """The labelling rule (evals/corpus/README.md): the setting alone never picks the cause. A port taken while srun
    starts one launcher per task is port_in_use with slurm_launch next; DeepSpeed's batch assertion with world size 1
    under mpirun is deepspeed_batch_config with mpi_launcher_env next (signatures gated on the setting are hints)."""
    srun = "srun -n 8 --ntasks-per-node 8 python train.py, where train.py runs the deepspeed launcher"
    r = diagnose_text(PORT_TAKEN_WRAPPED, context=srun)
    assert r["verdict"] == "confident" and [c["id"] for c in r["causes"][:2]] == ["port_in_use", "slurm_launch"]
    assert _confident(PORT_TAKEN_WRAPPED) == "port_in_use"
    r = diagnose_text(BATCH_WORLD_ONE, context="mpirun -np 16 python train.py --deepspeed ds.json")
    assert r["verdict"] == "confident"
    assert [c["id"] for c in r["causes"][:2]] == ["deepspeed_batch_config", "mpi_launcher_env"]


# https://github.com/NVIDIA/nccl/issues/286 (two nodes)
UNHANDLED_SYSTEM = ("RuntimeError: NCCL error in: /pytorch/torch/lib/c10d/ProcessGroupNCCL.cpp:410, unhandled system "
                    "error, NCCL version 2.4.8\n")


def test_an_unhandled_system_error_across_nodes_is_not_read_as_shared_memory():
    assert _top(UNHANDLED_SYSTEM)["id"] == "shm_too_small"
    assert _top(UNHANDLED_SYSTEM, "docker container, one node, 8 GPUs")["id"] == "shm_too_small"
    across = [c["id"] for c in diagnose_text(UNHANDLED_SYSTEM, context="two nodes, PyTorch with NCCL 2.4.8")["causes"]]
    assert "shm_too_small" not in across[:2] and across[0] in ("nccl_socket_ifname", "rendezvous_unreachable")
    assert _top(UNHANDLED_SYSTEM, "torchrun --nnodes=2 --nproc_per_node=8 train.py")["id"] != "shm_too_small"


# https://github.com/huawei-noah/Efficient-Computing/issues/90 (DDP on Windows, gloo); the message is raised by
# torch.distributed.barrier in releases before 2.0 (distributed_c10d.py: device_ids on a group that is not NCCL)
BARRIER_DEVICE_IDS = ("RuntimeError: Function argument device_ids not supported for the selected backend gloo\n"
                      "ERROR:torch.distributed.elastic.multiprocessing.api:failed (exitcode: 1) local_rank: 0 "
                      "(pid: 23812) of binary: E:\\Conda\\envs\\GoldYolo\\python.exe\n")


def test_barrier_device_ids_on_gloo_is_a_missing_gloo_feature():
    assert _confident(BARRIER_DEVICE_IDS) == "gloo_missing_feature"


# https://github.com/pytorch/pytorch/issues/88000: the output of a job that hangs (rank 0 alone in a broadcast);
# ProcessGroupNCCL's set-up dump is all it printed before the hang
NCCL_OPTIONS_ONLY = (
    "$ python -m torch.distributed.run --nproc_per_node=2 test_nccl_timeout.py\n"
    "WARNING: Logging before InitGoogleLogging() is written to STDERR\n"
    "I1028 12:13:38.405081 632355 ProcessGroupNCCL.cpp:843] [Rank 0] NCCL watchdog thread started!\n"
    "I1028 12:13:38.405865 632324 ProcessGroupNCCL.cpp:666] [Rank 0] ProcessGroupNCCL initialized with following "
    "options:\n"
    "NCCL_ASYNC_ERROR_HANDLING: 1\n"
    "NCCL_DESYNC_DEBUG: 0\n"
    "NCCL_BLOCKING_WAIT: 0\n"
    "TIMEOUT(ms): 5000\n"
    "USE_HIGH_PRIORITY_STREAM: 0\n")


def test_a_set_up_dump_is_neither_a_failure_nor_an_account_of_one():
    r = diagnose_text(NCCL_OPTIONS_ONLY)
    # NCCL_ASYNC_ERROR_HANDLING is an option's name, not an error; the banner's "watchdog" and "TIMEOUT" are no
    # one's words about a timeout
    assert r["first_failure"] is None
    assert "collective_timeout" not in [c["id"] for c in r["causes"] if c["level"] == "words"]
    described = ("python -m torch.distributed.run --nproc_per_node=2, init_process_group('nccl', timeout=5 s), "
                 "dist.broadcast called under if dist.get_rank() == 0")
    assert _top(NCCL_OPTIONS_ONLY, described)["id"] == "rank_conditional_collective"


def test_a_timeout_argument_is_a_setting_not_a_symptom():
    words = "init_process_group('gloo', timeout=timedelta(seconds=30)) then training"
    assert "collective_timeout" not in [c["id"] for c in diagnose_text("", context=words)["causes"]]
    assert diagnose_text("", context="the all_reduce times out after 30 minutes")["causes"][0]["id"] \
        == "collective_timeout"


# https://github.com/deepspeedai/Megatron-DeepSpeed/pull/247: the pull request's own words
INIT_EXTERNALLY = ("If calling init_process_group of torch.distributed externally and using Megatron-Deepspeed as a "
                   "package, Checking whether it has been initialized is required.\n")


def test_a_program_that_initialises_the_group_itself_before_a_framework_does_is_init_twice():
    assert diagnose_text(INIT_EXTERNALLY)["causes"][0]["id"] == "process_group_init_twice"
    words = "torch.distributed.launch on two nodes, the script calling init_process_group itself"
    assert diagnose_text("", context=words)["causes"][0]["id"] == "process_group_init_twice"


# https://github.com/NVIDIA/DeepLearningExamples/issues/1092 (Tacotron2 on several nodes)
CHECKPOINT_EXISTS = ('File "train.py", line 229, in save_checkpoint\n'
                     '    print("Updating symlink", symlink_dst, "to point to", symlink_src)\n'
                     "FileExistsError: [Errno 17] File exists: 'checkpoint_Tacotron2_0.pt' -> "
                     "'output/checkpoint_Tacotron2_last.pt'\n")


def test_two_ranks_creating_one_checkpoint_is_every_rank_saving_not_a_download_race():
    assert _confident(CHECKPOINT_EXISTS) == "checkpoint_all_ranks"
    # two ranks creating one cache directory stays the race (produced here: tests/data/logs/gen_makedirs_race.log)
    race = (Path(__file__).parent / "data" / "logs" / "gen_makedirs_race.log").read_text()
    assert _confident(race) == "download_race"


# https://github.com/xljh0520/JOTR/issues/4 (TORCH_DISTRIBUTED_DEBUG=DETAIL, an older release: each rank prints its
# own fingerprint; the lines are wrapped as the reporter pasted them)
OWN_REPORTS = [
    "RuntimeError: Detected mismatch between collectives on ranks. Rank 0 is running inconsistent collective: "
    "CollectiveFingerPrint(OpType=ALLGATHER, TensorShape\n=[41, 256, 8, 8, 8], TensorDtypes=Float, "
    "TensorDeviceTypes=TensorOptions(dtype=float (default), device=cuda, layout=Strided (default), requires_grad=false (\n"
    "default), pinned_memory=false (default), memory_format=(nullopt))\n",
    "RuntimeError: Detected mismatch between collectives on ranks. Rank 1 is running inconsistent collective: "
    "CollectiveFingerPrint(OpType=ALLGATHER, TensorShape\n=[40, 256, 8, 8, 8], TensorDtypes=Float, "
    "TensorDeviceTypes=TensorOptions(dtype=float (default), device=cuda, layout=Strided (default), requires_grad=false (\n"
    "default), pinned_memory=false (default), memory_format=(nullopt))\n"]


def test_ranks_reporting_the_same_collective_each_on_its_own_line_is_a_shape_mismatch():
    top = _top("".join(OWN_REPORTS))
    assert top["id"] == "collective_shape_mismatch" and top["level"] in ("signature", "structural")
    assert "both ran ALLGATHER" in top["evidence"][0]["proves"]
    ids = [c["id"] for c in diagnose_text("".join(OWN_REPORTS))["causes"]]
    assert "rank_conditional_collective" not in ids
    # one rank's report alone does not say what the other ran
    assert _top(OWN_REPORTS[0])["id"] == "rank_conditional_collective"


# https://github.com/RVC-Project/Retrieval-based-Voice-Conversion-WebUI/issues/724 (Windows, a blank host name);
# torch 2.13's libtorch_cpu.so holds the same check as "GlooDeviceFactory::makeTCPDevice(): ..." (strings)
GLOO_NO_HOSTNAME = "RuntimeError: GlooDeviceFactory::makeUVDevice(): interface or hostname can't be empty\n"


def test_gloo_without_an_interface_or_host_name_is_the_gloo_interface():
    assert _confident(GLOO_NO_HOSTNAME) == "gloo_socket_ifname"
    assert _confident(GLOO_NO_HOSTNAME.replace("makeUVDevice", "makeTCPDevice")) == "gloo_socket_ifname"


# https://github.com/horovod/horovod/issues/147 (an older NCCL: no peer address in the completion error)
IB_COMPLETION_OLD = "transport/net_ib.cu:781 WARN NET/IB : Got completion with error 12, opcode 1, len0, vendor err 129\n"
# https://github.com/horovod/horovod/issues/367 (the title: Horovod's stall warning)
HOROVOD_STALL = ("WARNING: One or more tensors were submitted to be reduced, gathered or broadcasted by subset of ranks "
                 "and are waiting for remainder of ranks for more than 60 seconds\n")


def test_horovod_named_as_the_library_is_not_a_launcher_without_its_environment():
    assert _confident(IB_COMPLETION_OLD, "Horovod with NCCL across machines with InfiniBand") == "fabric_fault"
    assert _confident(HOROVOD_STALL, "Horovod, restoring a checkpoint under an is_chief condition") \
        == "rank_conditional_collective"
    # the launcher named as the launcher still counts
    words = [c["id"] for c in diagnose_text("", context="DeepFM training launched through Horovod")["causes"]]
    assert "mpi_launcher_env" in words[:3]
    assert diagnose_text("", context="horovodrun -np 2 python3 test.py")["causes"][0]["id"] == "mpi_launcher_env"


# Produced here: torch.save({"w": torch.ones(3)}, "ck.pt"), the archive rewritten without its data/ records (what a
# reader finds when another rank's write replaced or cut the file), then torch.load("ck_cut.pt"), torch 2.13.0+cpu
ARCHIVE_RECORD_MISSING = ("RuntimeError: PytorchStreamReader failed locating file data/0: file not found. This is an "
                          "internal miniz error. If you are seeing this error, there is a high likelihood that your "
                          "checkpoint file is corrupted.\n")
# https://github.com/kakaobrain/scrl/issues/5 (the older release's wording; every rank saved checkpoint_best.pth)
ARCHIVE_RECORD_MISSING_OLD = "[enforce fail at inline_container.cc:209]. file not found: archive/data/3259494704\n"


def test_a_checkpoint_archive_missing_a_record_is_a_checkpoint_written_over():
    assert _confident(ARCHIVE_RECORD_MISSING) == "checkpoint_all_ranks"
    assert _confident(ARCHIVE_RECORD_MISSING_OLD) == "checkpoint_all_ranks"


# https://github.com/stas00/ml-engineering/issues/1 (3x RTX A6000, training hangs): CUDA's p2pBandwidthLatencyTest
P2P_SLOWER = ("Unidirectional P2P=Disabled Bandwidth Matrix (GB/s)\n"
              "   D\\D     0      1      2 \n"
              "     0 673.20  13.15  13.15 \n"
              "     1  12.99 673.20  22.20 \n"
              "     2  13.00  21.98 673.78 \n"
              "Unidirectional P2P=Enabled Bandwidth (P2P Writes) Matrix (GB/s)\n"
              "   D\\D     0      1      2 \n"
              "     0 673.49   2.60   1.58 \n"
              "     1   2.12 672.33   1.70 \n"
              "     2   2.12   1.60 673.78 \n")
# https://github.com/NVIDIA/nccl/issues/1264 (HGX H100, NVLink: P2P ten times the staged copy), the first rows
P2P_FASTER = ("Unidirectional P2P=Disabled Bandwidth Matrix (GB/s)\n"
              "   D\\D     0      1      2      3      4      5      6      7 \n"
              "     0 2474.76  37.19  37.20  36.91  37.06  37.16  37.28  37.24 \n"
              "     1  36.36 2512.44  37.35  36.32  36.95  37.12  36.74  36.30 \n"
              "Unidirectional P2P=Enabled Bandwidth (P2P Writes) Matrix (GB/s)\n"
              "   D\\D     0      1      2      3      4      5      6      7 \n"
              "     0 2494.76 371.02 376.65 376.60 376.82 375.59 375.94\n")


def test_p2p_slower_than_staged_copies_is_broken_p2p_whatever_the_words():
    top = _top(P2P_SLOWER, "parallel training on one machine with 3x RTX A6000 hangs")
    assert top["id"] == "nccl_p2p_broken" and top["level"] == "structural"
    assert "2.6 GB/s with P2P enabled and 13.15 GB/s" in top["evidence"][0]["proves"]
    assert "nccl_p2p_broken" not in [c["id"] for c in diagnose_text(P2P_FASTER)["causes"] if c["level"] == "structural"]


# https://github.com/meta-pytorch/torchrec/issues/1014 (the description)
UNEVEN_WORDS = ("However it will hangs till NCCL timeout if number of batches are different during **validation** "
                "stage.\n")
# https://github.com/bytedance/ibot/issues/15 (the description)
EVERY_GPU_SAVES = ("in ddp training, every processor(GPU) would save an checkpoint model in disk, this behaviou may "
                   "cause duplicate writing problem and saved checkpoint can not be load by `torch.load` successfully\n")


def test_words_naming_a_cause_outweigh_words_naming_only_the_hang():
    from distdoctor.diagnose.engine import _weigh_keywords
    hits = [("collective_timeout", "hang", "hangs"), ("dataloader_uneven", "batches", "number of batches are different")]
    assert [w for *_, w in _weigh_keywords(hits, 2.0)] == [1.0, 2.0]
    assert [w for *_, w in _weigh_keywords(hits[:1], 2.0)] == [2.0]  # the symptom alone keeps its weight
    causes = diagnose_text(UNEVEN_WORDS)["causes"]
    assert causes[0]["id"] == "dataloader_uneven"
    assert diagnose_text(EVERY_GPU_SAVES)["causes"][0]["id"] == "checkpoint_all_ranks"


def test_words_with_no_log_weigh_the_symptom_as_an_account_does():
    """The same words given as --context with no log: the account is all there is, and its hang is what any cause
    looks like beside words that name a cause; words naming only the symptom keep their weight."""
    causes = diagnose_text("", context=UNEVEN_WORDS)["causes"]
    assert [c["id"] for c in causes][:2] == ["dataloader_uneven", "collective_timeout"]
    assert causes[0]["level"] == "words" and causes[0]["score"] > causes[1]["score"]
    words = {c["id"]: c for c in map(json.loads, (paths.ROOT / "evals" / "cases.jsonl").read_text().splitlines())}
    only_symptom = words["words_collective_timeout_which_rank"]["context"]  # "NCCL watchdog timeout at random steps"
    assert diagnose_text("", context=only_symptom)["causes"][0]["id"] == "collective_timeout"
    assert diagnose_text("", context="the all_reduce times out after 30 minutes")["causes"][0]["id"] \
        == "collective_timeout"


# https://github.com/deepspeedai/DeepSpeed/issues/7599 (the description)
GROWN_WORLD = ("When the world size expands from 2 to 4, then convert to universal checkpoint, and load from universal "
               "checkpoint.\n")
# https://github.com/AMD-AGI/Primus/issues/1063 (the description)
IP_AS_IFNAME = ("get_ip_interface.sh needs iproute2. Where it is missing the fallback put an IP address into "
                "NCCL_SOCKET_IFNAME/GLOO_SOCKET_IFNAME, which take an interface name, and every rank died in Gloo with "
                "\"Unable to find address for: <ip>\".\n")
# https://github.com/pytorch/pytorch/issues/138322 (the description)
OTHERS_HANG = ("When I ran the following program on a machine with 4 GPUs, the process with the rank of 3 will exit as "
               "it does nothing operation, and the other processes will hang on the barrier call.\n")


def test_accounts_in_the_words_people_use():
    assert diagnose_text(GROWN_WORLD)["causes"][0]["id"] == "resume_world_size_change"
    # gloo's own words quoted in the account; "interface" alone names no cause
    ids = [c["id"] for c in diagnose_text(IP_AS_IFNAME, context="setting the socket interface variables")["causes"]]
    assert ids[0] == "gloo_socket_ifname"
    scores = {c["id"]: c["score"] for c in diagnose_text(OTHERS_HANG)["causes"]}
    assert scores["rank_conditional_collective"] > scores.get("collective_timeout", 0)


# https://discuss.pytorch.org/t/training-hangs-on-loss-backward-with-ddp-nnodes-2-nproc-per-node-3/220127 (its title)
NNODES_HANG = "Training hangs on loss.backward() with DDP --nnodes=2 --nproc_per_node=3\n"


def test_a_setting_keyword_beside_a_log_is_context_worth_one_setting_at_most():
    """`--nnodes` says how the job was launched, which any multi-node job's failure shows: beside a log (here a log of
    prose) it adds a candidate at the `context` level, worth SETTING_WEIGHT however often the description and the
    log repeat it, under the log's best neighbour."""
    from distdoctor.diagnose.engine import SETTING_WEIGHT

    causes = diagnose_text(NNODES_HANG, context="DDP over 2 nodes x 3 processes (torchrun --nnodes=2 "
                                                "--nproc_per_node=3)")["causes"]
    rdzv = next(c for c in causes if c["id"] == "rendezvous_unreachable")
    assert rdzv["level"] == "context" and rdzv["score"] == SETTING_WEIGHT
    assert "how the job was set up" in rdzv["evidence"][0]["proves"]
    assert causes[0]["id"] != "rendezvous_unreachable" and causes[0]["level"] == "similar"


def test_a_setting_keyword_with_no_log_is_the_account_and_keeps_its_words_level():
    """With no log the description is all there is: its setting words count as words, in full."""
    from distdoctor.diagnose.engine import KEYWORD_WEIGHT

    causes = diagnose_text("", context="DDP over 2 nodes x 3 processes (torchrun --nnodes=2 --nproc_per_node=3)")
    rdzv = next(c for c in causes["causes"] if c["id"] == "rendezvous_unreachable")
    assert rdzv["level"] == "words" and rdzv["score"] >= KEYWORD_WEIGHT


def test_a_keyword_naming_the_cause_leads_a_setting_keyword_of_the_same_cause():
    """A description with both a setting (`drop_last`) and words naming the cause (a different number of batches):
    the cause's description line is `words`, and the setting adds at most SETTING_WEIGHT."""
    from distdoctor.diagnose.engine import KEYWORD_WEIGHT, SETTING_WEIGHT

    words = "drop_last=False and the ranks get a different number of batches"
    causes = diagnose_text(NNODES_HANG, context=words)["causes"]
    uneven = next(c for c in causes if c["id"] == "dataloader_uneven")
    said = [ev for ev in uneven["evidence"] if ev["file"] == "<context>"]
    assert [ev["level"] for ev in said] == ["words"] and "set up" not in said[0]["proves"]
    assert uneven["score"] <= KEYWORD_WEIGHT + SETTING_WEIGHT + 1.5  # and at most the best neighbour's votes


def test_setting_keywords_are_read_from_the_knowledge_base():
    """An entry's keyword written {regex, level: context} is a keyword and a setting keyword; a plain string is a
    keyword only."""
    from distdoctor.diagnose.matcher import matcher_for
    from distdoctor.diagnose.engine import _settings_aside

    m = matcher_for(None)
    assert ("rendezvous_unreachable", r"\bnnodes\b") in m.settings
    assert ("rendezvous_unreachable", r"\bnnodes\b") in {(c, kw) for c, kw, _ in m.keywords}
    assert not any(c == "mpi_launcher_env" for c, _ in m.settings)  # a launcher named is the cause's own word
    spent: dict = {}
    out = _settings_aside([("a", "x", "x", 2.0), ("a", "y", "y", 2.0), ("b", "z", "z", 2.0)], {("a", "x"), ("a", "y")},
                          spent)
    assert [w for *_, w in out] == [1.0, 0.0, 2.0] and spent == {"a": 1.0}


def test_causes_that_read_one_line_alike_are_candidates_ordered_by_the_neighbours():
    """Across nodes, NCCL's "unhandled system error" is read alike by the interface and the unreachable-peer
    entries (same level, same score): the log cannot tell them apart, so no confident top cause; the tie is ordered
    by the BM25 neighbours' votes, the name only when they give none."""
    from distdoctor.diagnose.engine import _break_tie

    r = diagnose_text(UNHANDLED_SYSTEM, context="two nodes, PyTorch with NCCL 2.4.8")
    top2 = r["causes"][:2]
    assert {c["id"] for c in top2} == {"nccl_socket_ifname", "rendezvous_unreachable"}
    assert top2[0]["score"] == top2[1]["score"] and r["verdict"] == "candidates" and r["fix"] is None
    assert all(c["role"] == "candidate" for c in r["causes"])
    # a cause with the log's own signature alone keeps its confident answer
    assert diagnose_text(DDP_MODELS)["verdict"] == "confident"
    sig = {"a": [{"kind": "first failure", "level": "signature"}], "b": [{"kind": "first failure", "level": "signature"}],
           "c": [{"kind": "similar", "level": "similar"}]}
    ranked = [("a", 2.0), ("b", 2.0), ("c", 2.0)]
    assert _break_tie(ranked, sig, lambda: {"b": 0.6, "c": 1.0}) == [("b", 2.0), ("a", 2.0), ("c", 2.0)]
    assert _break_tie(ranked, sig, lambda: {}) == ranked  # no votes: as ranked
    assert _break_tie([("a", 3.0), ("b", 2.0)], sig, lambda: 1 / 0) == [("a", 3.0), ("b", 2.0)]  # no tie: no lookup


# https://github.com/aws-samples/aws-hpc-tutorials/pull/448 (a Slurm job whose MASTER_ADDR named the head node)
SLURM_SOCKET = ("[E socket.cpp:860] [c10d] The client socket has timed out after 900s while trying to connect to "
                "(ip-192-168-1-95, 12234)\n")


def test_keywords_are_smart_case_per_alternative():
    """A lower-case branch of a keyword ignores case even beside a branch with capitals: `\\bslurm\\b|SLURM_\\w+`
    reads "Slurm"; a branch with capitals (RoCE, SLURM_) matches as written."""
    from distdoctor.diagnose.matcher import _branches, smart_case

    assert _branches(r"\bsrun\b|#SBATCH|(a|b)[|]x|\|y") == [r"\bsrun\b", "#SBATCH", "(a|b)[|]x", r"\|y"]
    rx = smart_case(r"\bslurm\b|SLURM_\w+")
    assert rx.search("a Slurm job") and rx.search("SLURM_PROCID=3") and not rx.search("slurm_procid")
    assert not smart_case(r"infiniband|RoCE").search("process") and smart_case(r"infiniband|RoCE").search("InfiniBand")
    assert smart_case("tensorboard").search("TensorBoard") and not smart_case("LOCAL_RANK").search("local_rank")
    # the setting named in the description adds its cause after the log's own (a Slurm job's socket timeout)
    ids = [c["id"] for c in diagnose_text(SLURM_SOCKET, context="AWS ParallelCluster Slurm job across nodes")["causes"]]
    assert ids[0] == "rendezvous_unreachable" and "slurm_launch" in ids[:3]


# https://github.com/s-JoL/Open-Llama/issues/47 (7 of 8 workers: one rank stalled in its logger's start-up)
BARRIER_SHORT = ("I0510 07:28:04.417845 139863945226048 distributed_c10d.py:337] Waiting in store based barrier to "
                 "initialize process group for rank: 2, key: store_based_barrier_key:2 (world_size=8, worker_count=7, "
                 "timeout=0:30:00)\n")
# https://github.com/ultralytics/yolov5/issues/4574 (8 workers counted for world_size 4)
BARRIER_OVER = ("Waiting in store based barrier to initialize process group for rank: 0, key: store_based_barrier_key:1 "
                "(world_size=4, worker_count=8, timeout=0:30:00)\n")


def test_a_store_barrier_short_of_workers_is_a_symptom_one_counting_more_is_the_world_size():
    """Fewer workers than world_size: some rank has not reached init_process_group (late, stuck, dead: several
    causes), so no confident answer; more workers than world_size is the barrier's own miscount."""
    assert store_wait.short_barrier(BARRIER_SHORT) and not store_wait.short_barrier(BARRIER_OVER)
    r = diagnose_text(BARRIER_SHORT)
    assert r["verdict"] == "candidates" and r["causes"][0]["level"] == "symptom"
    assert "store_barrier_world_size" in [c["id"] for c in r["causes"][:3]]
    assert _confident(BARRIER_OVER) == "store_barrier_world_size"
