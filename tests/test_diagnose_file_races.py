"""Several ranks touching the same files: whose files they are names the cause. A checkpoint directory moved or
deleted by more than one rank is checkpoint_all_ranks, a logger's run files or log directory is
logger_init_all_ranks, any other shared directory or download is download_race. Real text only (URLs below)."""

from distdoctor.diagnose import diagnose_text

# https://github.com/modelscope/ms-swift/issues/3031 (transformers 4.49.0.dev0 Trainer on 4 GPUs)
TMP_CHECKPOINT_RENAME = (
    '[rank3]:   File "/root/paddlejob/workspace/zhangfan52/system/transformers/src/transformers/trainer.py", '
    "line 3157, in _save_checkpoint\n"
    "[rank3]:     os.renames(output_dir, checkpoint_dir)\n"
    '[rank3]:   File "<frozen os>", line 272, in renames\n'
    "[rank3]: OSError: [Errno 39] Directory not empty: "
    "'/root/paddlejob/workspace/ms-swift/output/v5-20250208-084624/tmp-checkpoint-djiermq4' -> "
    "'/root/paddlejob/workspace/zhangfan52/ms-swift/output/v5-20250208-084624/checkpoint-100'\n")
# https://github.com/bigcode-project/starcoder/issues/155 (save_pretrained called from every process)
CHECKPOINT_FILE_REMOVED = (
    "    os.remove(full_filename)\n"
    "FileNotFoundError: [Errno 2] No such file or directory: 'checkpoint-100/model-00001-of-00003.safetensors'\n")
# https://github.com/som-shahlab/hf_ehr/issues/7 (wandb initialised on every DDP rank)
WANDB_RUN_FILE = (
    '  File "/home/hf_ehr/hf_env_miguel/lib/python3.10/site-packages/wandb/sdk/internal/datastore.py", line 87, '
    "in open_for_write\n"
    "    self._fp = open(fname, open_flags)\n"
    "FileExistsError: [Errno 17] File exists: '/share/pi/nigam/migufuen/hf_ehr/cache/ru\n")
# https://github.com/hiyouga/LlamaFactory/issues/3010 (2 nodes, one shared output directory)
TRAINER_LOG = "FileExistsError: [Errno 17] File exists: '/mnt/afs/Output/Qwen1.5-14B/trainer_log.jsonl'\n"
# Produced here (references/data-logging-checkpoints.md#download_race): torchrun, 2 ranks os.mkdir one path, gloo
MKDIR_RACE = ('[rank0]:     os.mkdir("/tmp/h3/racedir")\n'
              "[rank0]: FileExistsError: [Errno 17] File exists: '/tmp/h3/racedir'\n")
# https://github.com/mosaicml/llm-foundry/issues/1848 (a shared download's signal file)
SIGNAL_FILE = ("[rank0]:     os.remove(signal_file_path)\n"
               "[rank0]: FileNotFoundError: [Errno 2] No such file or directory: '._signal_file_node0_QVBHXW'\n")


def _top(text: str) -> dict:
    return diagnose_text(text)["causes"][0]


def test_a_checkpoint_directory_moved_by_several_ranks_is_checkpoint_all_ranks():
    top = _top(TMP_CHECKPOINT_RENAME)
    assert (top["id"], top["level"]) == ("checkpoint_all_ranks", "signature")
    assert any("Directory not empty" in e["text"] for e in top["evidence"])


def test_checkpoint_files_removed_by_another_rank_are_checkpoint_all_ranks():
    top = _top(CHECKPOINT_FILE_REMOVED)
    assert (top["id"], top["level"]) == ("checkpoint_all_ranks", "signature")


def test_a_file_the_logger_creates_twice_is_the_logger_not_a_download_race():
    for text in (WANDB_RUN_FILE, TRAINER_LOG):
        causes = [c["id"] for c in diagnose_text(text)["causes"]]
        assert causes[0] == "logger_init_all_ranks", causes
        assert "download_race" not in causes[:1]


def test_other_shared_files_stay_a_download_race():
    assert _top(MKDIR_RACE)["id"] == "download_race"
    assert _top(SIGNAL_FILE)["id"] == "download_race"


# https://github.com/fastai/fastai2/issues/13 (a TensorBoard writer in every DDP process)
TENSORBOARD_DIR = (
    '  File "/opt/conda/lib/python3.6/site-packages/torch/utils/tensorboard/writer.py", line 221, in __init__\n'
    "    mkdir(name, mode)\n"
    "FileExistsError: [Errno 17] File exists: 'runs/Dec01_17-51-15_job-28573-chief-0'\n")
# https://github.com/deepspeedai/DeepSpeedExamples/issues/372 (the final model save's folder made by two ranks)
SAVE_DIR = (
    '  File ".../applications/DeepSpeed-Chat/training/utils/utils.py", line 51, in save_hf_format\n'
    "    os.makedirs(output_dir)\n"
    '  File "/usr/lib/python3.8/os.py", line 223, in makedirs\n'
    "    mkdir(name, mode)\n"
    "FileExistsError: [Errno 17] File exists: '.../output/actor/'\n")


def test_a_tensorboard_writer_per_rank_is_the_logger_and_a_save_functions_folder_the_checkpoint():
    assert _top(TENSORBOARD_DIR)["id"] == "logger_init_all_ranks"
    assert _top(SAVE_DIR)["id"] == "checkpoint_all_ranks"
