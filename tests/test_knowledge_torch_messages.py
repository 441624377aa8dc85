"""Signatures for torch 2.13's own distributed messages (found by `python -m distdoctor.evals.torch_messages
--torch-root PATH --coverage --uncovered`). Each template is the message as torch's source builds it (the file is
named); its fields are filled the ways a run fills them, with and without the log prefixes torchrun adds, and the
diagnosis must name the cause confidently from the signature. The real lines are quoted in the entries (produced
here, or the torch v2.13.0 source for the GPU-only ones) and committed under tests/data/logs/gen_*."""

from __future__ import annotations

from pathlib import Path

import pytest

from distdoctor.diagnose import diagnose_text

# (torch source file, template with {} fields, fillings, cause)
CASES = [
    ("torch/distributed/launcher/api.py (_get_addr_and_port)",
     "{}ValueError: port is missing in endpoint: {}. Try to specify --master-port",
     [["", "localhost"], ["[rank0]: ", "10.1.2.3"], ["", "node-001.cluster"]], "launcher_args"),
    ("torch/distributed/elastic/rendezvous/api.py (RendezvousParameters.get_as_bool / get_as_int)",
     "{}ValueError: The rendezvous configuration option '{}' does not represent a valid {} value.",
     [["", "is_host", "boolean"], ["", "join_timeout", "integer"], ["E1127 09:00:00.123 1 run.py:1] ", "read_timeout", "integer"]],
     "launcher_args"),
    ("torch/distributed/elastic/rendezvous/dynamic_rendezvous.py (RendezvousTimeout._set_timeouts)",
     "ValueError: The {} timeout ({}) must be positive.",
     [["join", "-1 day, 23:59:55"], ["last_call", "0:00:00"], ["close", "-1 day, 23:59:30"]], "launcher_args"),
    ("torch/distributed/elastic/rendezvous/c10d_rendezvous_backend.py (create_backend, C10dRendezvousBackend)",
     "{}ValueError: {}",
     [["", "Invalid store type given. Currently only supports file and tcp."],
      ["[default0]: ", "The read timeout must be a positive integer."]], "launcher_args"),
    ("torch/distributed/elastic/multiprocessing/api.py (DefaultLogsSpecs, to_map)",
     "{}{}",
     [["", "NotADirectoryError: log_dir: /etc/hostname is a file"],
      ["", "NotADirectoryError: log_dir: /scratch/my runs/log.txt is a file"],
      ["", r"ValueError: 0:3,1 does not match: <^[0123]$> or <^(\d:[0123],)*(\d:[0123])$>"],
      ["[W] ", r"ValueError: 7 does not match: <^[0123]$> or <^(\d:[0123],)*(\d:[0123])$>"]], "launcher_args"),
    ("torch/distributed/distributed_c10d.py (monitored_barrier)",
     "{}ValueError: monitored_barrier is only implemented for GLOO backend.",
     [[""], ["[rank0]: "], ["[rank7]: "]], "backend_missing_collective"),
    ("torch/csrc/distributed/c10d/ProcessGroupNCCL.cpp (getNcclReduceOp)",
     "{}ValueError: Cannot use ReduceOp.{} with NCCL",
     [["", "BAND"], ["[rank3]: ", "BOR"], ["", "BXOR"]], "backend_missing_collective"),
    ("torch/csrc/distributed/c10d/ProcessGroupNCCL.cpp (allreduce_sparse)",
     "{}RuntimeError: NCCL does not support all_reduce with sparse tensors. Please use dense tensors instead.",
     [[""], ["[rank0]: "]], "backend_missing_collective"),
    ("torch/distributed/fsdp/_init_utils.py (_check_module_states_for_sync_module_states)",
     "{}ValueError: The module has CPU parameters or buffers when `sync_module_states=True`, which requires them to be "
     "on GPU. Please specify the `device_id` argument or move the module to GPU before passing it to FSDP.",
     [[""], ["[rank5]: "]], "device_mismatch"),
    ("torch/distributed/distributed_c10d.py (init_process_group's device_id check)",
     "{}ValueError: device_id is an int, but no accelerator support is found from the current compilation. "
     "Please use a different compiled version that supports your accelerator.",
     [[""], ["[rank1]: "]], "nccl_without_cuda"),
    ("torch/distributed/distributed_c10d.py (init_process_group's device_id check, no index)",
     "{}ValueError: Please use a device_id with index.",
     [[""], ["[rank2]: "], ["    "]], "local_rank_device"),
    ("torch/distributed/device_mesh.py (_setup_world_group_and_device)",
     "{}RuntimeError: DeviceMesh only support homogeneous hardware, but found {} ranks and {} {} devices!",
     [["", "6", "4", "cuda"], ["[rank3]: ", "12", "8", "cuda"], ["", "3", "2", "xpu"]], "local_rank_device"),
    ("torch/distributed/fsdp/_init_utils.py (_check_single_device_module)",
     "{}RuntimeError: {}",
     [["", "To support a module with both CPU and GPU params, please pass in device_id argument."],
      ["[rank0]: ", "FSDP only supports single device modules but got params on "
                    "{device(type='cuda', index=0), device(type='cuda', index=1)}"]], "device_mismatch"),
]


def _fill(template: str, values: list[str]) -> str:
    assert template.count("{}") == len(values), (template, values)
    return "".join(p + v for p, v in zip(template.split("{}"), values + [""]))


@pytest.mark.parametrize("where, template, fills, cause", CASES, ids=[c[3] + ":" + c[0].split(" ")[0] for c in CASES])
def test_torch_message_names_its_cause(where, template, fills, cause):
    for values in fills:
        line = _fill(template, values)
        r = diagnose_text(line)
        assert [c["id"] for c in r["causes"]][:1] == [cause], (line, [c["id"] for c in r["causes"]][:3])
        assert r["verdict"] == "confident" and r["causes"][0]["level"] == "signature", (line, r["verdict"])


# the runs that printed them (gen_*: here, tests/data/make_logs.py re-creates them): the whole log names the cause
LOGS = [("gen_launcher_endpoint_no_port", "launcher_args"), ("gen_launcher_rdzv_conf_bool", "launcher_args"),
        ("gen_launcher_rdzv_conf_int", "launcher_args"), ("gen_launcher_rdzv_timeout_negative", "launcher_args"),
        ("gen_launcher_rdzv_store_type", "launcher_args"), ("gen_launcher_rdzv_read_timeout", "launcher_args"),
        ("gen_launcher_log_dir_file", "launcher_args"), ("gen_launcher_redirects_value", "launcher_args"),
        ("gen_monitored_barrier_not_gloo", "backend_missing_collective"), ("gen_gloo_device_id_int", "nccl_without_cuda"),
        # printed on a lent GPU machine (torch 2.11, NCCL 2.28.9; tests/infra/gpu_check.py)
        ("gpu_monitored_barrier_nccl", "backend_missing_collective"), ("gpu_device_id_no_index", "local_rank_device"),
        ("gpu_fsdp_module_cpu_and_gpu", "device_mismatch"), ("gpu_fsdp_module_meta_and_gpu", "device_mismatch"),
        ("gpu_fsdp_sync_module_states_cpu", "device_mismatch"), ("gpu_nccl_reduce_op_band", "backend_missing_collective"),
        ("gpu_nccl_sparse_all_reduce", "backend_missing_collective")]


@pytest.mark.parametrize("name, cause", LOGS)
def test_real_log_of_the_message_names_its_cause(name, cause):
    r = diagnose_text((Path(__file__).parent / "data" / "logs" / f"{name}.log").read_text())
    assert [c["id"] for c in r["causes"]][:1] == [cause] and r["verdict"] == "confident", \
        (name, [c["id"] for c in r["causes"]][:3], r["verdict"])
