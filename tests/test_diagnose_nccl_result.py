"""Structural matching never takes one NCCL result for another: NCCL's wrapper line is the same for every failure
but its result ("unhandled cuda error", "unhandled system error", "invalid usage"), so two wrappers with different
results are not the same failure, however alike their other words are. Lines quoted from public threads."""

from distdoctor.diagnose.retrieval import STRUCTURAL_MIN
from distdoctor.diagnose.structure import failure_of_text, nccl_result, similarity

# https://github.com/pytorch/pytorch/issues/111187
CUDA = ("torch.distributed.DistBackendError: NCCL error in: ../torch/csrc/distributed/c10d/ProcessGroupNCCL.cpp:1331, "
        "unhandled cuda error (run with NCCL_DEBUG=INFO for details)")
# https://github.com/NVIDIA/nccl/issues/286 and https://github.com/NVIDIA/nccl/issues/473 (references/long-tail-platform.md)
SYSTEM = "RuntimeError: NCCL error in: /pytorch/torch/lib/c10d/ProcessGroupNCCL.cpp:410, unhandled system error, NCCL version 2.4.8"
SYSTEM_CODE = "RuntimeError: NCCL Error 2: unhandled system error"
# https://github.com/NVIDIA/nccl/issues/207 (references/multi-node-networking.md)
SYSTEM_OLD = "NCCL error in: /torch/lib/c10d/ProcessGroupNCCL.cpp:260, unhandled system error"
# https://github.com/MiniMax-AI/MiniMax-01/issues/42 and the ms-swift FAQ (Q49), without their rank prefixes
SYSTEM_VLLM = ("torch.distributed.DistBackendError: NCCL error in: /pytorch/torch/csrc/distributed/c10d/NCCLUtils.hpp:268, "
               "unhandled system error (run with NCCL_DEBUG=INFO for details),")
SYSTEM_SWIFT = ("torch.distributed.DistBackendError: NCCL error in:../torch/csrc/distributed/c10d/ProcessGroupNCCL.cpp:1970， "
                "unhandled system error (run with NCCL_DEBUG=INFO for details),NCCL version 2.20.5")


def test_the_result_kind_is_read_from_each_wrapper():
    assert [nccl_result(t) for t in (CUDA, SYSTEM, SYSTEM_CODE, SYSTEM_OLD, SYSTEM_VLLM, SYSTEM_SWIFT)] == \
        ["cuda", "system", "system", "system", "system", "system"]
    assert nccl_result("ncclInvalidUsage: This usually reflects invalid usage of NCCL library.") == "usage"
    assert nccl_result("RuntimeError: Connection reset by peer") is None


def test_wrappers_with_another_result_are_not_the_same_failure():
    for system in (SYSTEM, SYSTEM_CODE, SYSTEM_VLLM, SYSTEM_SWIFT):
        assert similarity(failure_of_text(CUDA), failure_of_text(system)) == 0.0
    # the same result from another file, line and release still reads alike
    assert similarity(failure_of_text(SYSTEM_VLLM), failure_of_text(SYSTEM_SWIFT)) >= STRUCTURAL_MIN
