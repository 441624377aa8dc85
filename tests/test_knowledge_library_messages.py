"""Signatures for the messages the libraries around distributed training print (NCCL, PyTorch Lightning, Accelerate,
DeepSpeed, torchelastic, Horovod). Each template is the message as the library's source builds it (the file is named);
its varying fields are filled the ways a run fills them (hosts, ports, sizes, errno text, log prefixes), and the
diagnosis must name the cause from the signature, confidently, whatever the fillings (an echo, a message that only
reports another rank's failure, names it first among candidates: the cause is that rank's own error). The real printed lines are
quoted, with their thread, in the knowledge-base entries (the validator checks that each signature matches one)."""

from __future__ import annotations

import pytest

from distdoctor.diagnose import diagnose_text

# (library and source file, template with {} fields, fillings, cause)
CASES = [
    ("lightning: fabric/strategies/launchers/multiprocessing.py",
     "RuntimeError: Lightning can't create new processes if CUDA is already initialized. Did you manually call "
     "`torch.cuda.*` functions, have moved the model to the device, or allocated memory on the GPU any other way? "
     "Please remove any such calls, or change the selected strategy.{}",
     [[""], [" You will have to restart the Python kernel."]], "cuda_init_before_fork"),
    ("accelerate: src/accelerate/launchers.py (notebook_launcher)",
     "{}ValueError: To launch a multi-GPU training from your notebook, you need to avoid running any instruction "
     "using `torch.cuda` in any cell. Restart your notebook and make sure no cells use any CUDA function.",
     [[""], ["[rank0]: "]], "cuda_init_before_fork"),
    ("nccl: src/os/linux.cc (ncclShmOpen)",
     "{}:{}:{} [{}] misc/shmutils.cc:88 NCCL WARN Error: failed to extend /dev/shm/nccl-{} to {} bytes{}",
     [["gpu-node-3", "4410", "4502", "1", "a8ZkQ2", "33030148", ", error: No space left on device (28)"],
      ["worker0", "77", "90", "7", "Xy1bcD", "9637892", ""]], "shm_too_small"),
    ("nccl: src/init.cc (a GPU shared by two ranks)",
     "{}:{}:{} [{}] init.cc:{} NCCL WARN Multiple Ranks are using the same GPU/Partition. Set "
     "NCCL_MULTI_RANK_GPU_ENABLE=1 to enable this{}",
     [["node7", "4410", "4502", "1", "1057", "."], ["gpu-a100-03", "88", "120", "0", "1043", " feature."]],
     "local_rank_device"),
    ("accelerate: src/accelerate/accelerator.py (_prepare_deepspeed)",
     "ValueError: When using DeepSpeed{} `accelerate.prepare()` requires you to pass at least one of training or "
     "evaluation dataloaders{} or alternatively set an integer value in `train_micro_batch_size_per_gpu` in the "
     "deepspeed config file or assign integer value to "
     "`AcceleratorState().deepspeed_plugin.deepspeed_config['train_micro_batch_size_per_gpu']`.",
     [["", ""], [",", " with `batch_size` attribute returning an integer value"]], "deepspeed_batch_config"),
    ("deepspeed: deepspeed/launcher/launch.py (sigkill_handler)",
     "[{}] [ERROR] [launch.py:{}:sigkill_handler] ['{}', '-u', '{}', '--local_rank={}'{}] exits with return code = -9",
     [["2024-02-01 09:00:01,123", "321", "/usr/bin/python3", "train.py", "0", ""],
      ["2023-05-15 13:14:32,960", "434", "/opt/conda/bin/python", "main.py", "3", ", '--deepspeed', 'ds.json'"]],
     "oom_one_rank"),
]

# echoes: (library and source file, template, fillings, cause)
ECHOES = [
    ("horovod: horovod/common/operations.cc (SHUT_DOWN_ERROR)",
     "{}Horovod has been shut down. This was caused by an exception on one of the ranks or an attempt to allreduce, "
     "allgather or broadcast a tensor after one of the ranks finished execution. If the shutdown was caused by an "
     "exception, you should see the exception in the log before the first shutdown message.",
     [["[1,3]<stderr>:"], ["tensorflow.python.framework.errors_impl.UnknownError: "], [""]], "peer_died_first"),
    ("torchelastic: torch/distributed/elastic/rendezvous/dynamic_rendezvous.py (a closed rendezvous)",
     "{}torch.distributed.elastic.rendezvous.api.RendezvousClosedError{}",
     [["", ""], ["[rank3]: ", ": "]], "peer_died_first"),
    ("deepspeed: deepspeed/launcher/launch.py (sigkill_handler)",
     "[{}] [INFO] [launch.py:{}:sigkill_handler] Killing subprocess {}",
     [["2021-11-21 08:32:07,148", "131", "250621"], ["2024-01-03 10:00:00,000", "318", "80"]], "peer_died_first"),
]


@pytest.mark.parametrize("where, template, fills, cause", CASES, ids=[c[3] + ":" + c[0].split(":")[0] for c in CASES])
def test_library_message_names_its_cause(where, template, fills, cause):
    for values in fills:
        assert template.count("{}") == len(values), (where, values)
        parts = template.split("{}")
        line = "".join(p + v for p, v in zip(parts, values + [""]))
        r = diagnose_text(line)
        assert [c["id"] for c in r["causes"]][:1] == [cause], (line, [c["id"] for c in r["causes"]][:3])
        assert r["verdict"] == "confident" and r["causes"][0]["level"] == "signature", (line, r["verdict"])


@pytest.mark.parametrize("where, template, fills, cause", ECHOES, ids=[c[3] + ":" + c[0].split(":")[0] for c in ECHOES])
def test_library_echo_names_its_cause_as_a_candidate(where, template, fills, cause):
    for values in fills:
        line = "".join(p + v for p, v in zip(template.split("{}"), values + [""]))
        r = diagnose_text(line)
        assert [c["id"] for c in r["causes"]][:1] == [cause], (line, [c["id"] for c in r["causes"]][:3])
        assert r["verdict"] != "confident", (line, r["verdict"])  # an echo alone does not prove the cause
