"""nccl_cumem_host_numa (references/long-tail-platform.md): NCCL's cuMem host buffers read as a /dev/shm name of
size 0 are this cause, a signature answer; a small /dev/shm that cannot hold a segment of a real size stays
shm_too_small."""

from __future__ import annotations

from distdoctor.corpus import CORPUS, split_of
from distdoctor.diagnose.engine import diagnose_text
from distdoctor.diagnose.retrieval import excluding

# https://github.com/hiyouga/EasyR1/issues/505 (the line as the thread prints it)
ATTACH_SIZE_0 = ("[2025-09-18 23:23:41] is-dbtgkffan5rbutzq-devmachine-0:30332:30423 [0] misc/shmutils.cc:129 NCCL WARN "
                 "Error while attaching to shared memory segment /dev/shm/nccl-Ќ (size 0), error: No such file or "
                 "directory (2)\n")
# https://github.com/NVIDIA/nccl/issues/342 (shm_too_small's quote: Docker's small /dev/shm)
SMALL_SHM = ("include/shm.h:28 NCCL WARN Call to posix_fallocate failed: No space left on device\n"
             "include/shm.h:48 NCCL WARN Error while creating shared memory segment "
             "nccl-shm-recv-250a7cc850ba9298-0-1-3 (size 9637888)\n")


def test_train_case_is_a_signature_answer() -> None:
    """The train corpus case (its own log left out of retrieval, as the eval does) is answered confidently."""
    case = "hiyouga-easyr1-505"
    assert split_of(case) == "train"
    with excluding({f"corpus:{case}"}):
        got = diagnose_text((CORPUS / f"{case}.log").read_text(encoding="utf-8"))
    assert got["causes"][0]["id"] == "nccl_cumem_host_numa" and got["causes"][0]["level"] == "signature", got["causes"][:2]
    assert got["verdict"] == "confident"


def test_size_0_attach_line_alone() -> None:
    got = diagnose_text(ATTACH_SIZE_0)["causes"]
    assert got[0]["id"] == "nccl_cumem_host_numa" and got[0]["level"] == "signature", got[:2]


def test_small_dev_shm_stays_shm_too_small() -> None:
    got = diagnose_text(SMALL_SHM)["causes"]
    assert got[0]["id"] == "shm_too_small" and got[0]["level"] == "signature", got[:2]
    assert all(c["level"] != "signature" for c in got if c["id"] == "nccl_cumem_host_numa"), got


# https://github.com/NVIDIA/nccl/issues/1838 (4x L4, NCCL 2.27.3; passes with NCCL_CUMEM_HOST_ENABLE=0)
SHM_PEER_ACCESS = ("[2025-09-09 23:51:24] 9b405963aa12:774:854 [0] transport/shm.cc:590 NCCL WARN Cuda failure 217 "
                   "'peer access is not supported between these two devices'\n")
# references/long-tail-platform.md, nccl_p2p_broken's quote: the P2P transport's CUDA IPC open, not SHM
P2P_PEER_ACCESS = ("emu:80510:81733 [0] transport/p2p.cc:276 NCCL WARN failed to open CUDA IPC handle : 217 peer access "
                   "is not supported between these two devices\n")


def test_shm_transport_peer_access_failure_is_cumem_host() -> None:
    got = diagnose_text(SHM_PEER_ACCESS)["causes"]
    assert got[0]["id"] == "nccl_cumem_host_numa" and got[0]["level"] == "signature", got[:2]


def test_p2p_transport_peer_access_failure_stays_p2p() -> None:
    got = diagnose_text(P2P_PEER_ACCESS)["causes"]
    assert got[0]["id"] == "nccl_p2p_broken", got[:2]
    assert all(c["level"] != "signature" for c in got if c["id"] == "nccl_cumem_host_numa"), got
