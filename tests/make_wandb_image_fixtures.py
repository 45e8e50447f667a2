"""Write tests/data/wandb_images: TRL's GRPOTrainer logging completions with images to W&B in offline mode
(``python tests/make_wandb_image_fixtures.py tests/data`` in a venv with ``wandb``, ``pandas`` and ``pillow``;
wandb 0.31.0 made the committed copy).

The table is built line for line as trl/trainer/grpo_trainer.py ``log`` builds it (``"step":
[str(self.state.global_step)] * n``, prompt, completion, each reward function's column, advantage, and
``images``: a list of ``wandb.Image`` per row) and logged with ``wandb.log({"completions": wandb.Table(dataframe=df)})``
at two steps. wandb writes ``files/media/table/completions_{step}_{hash}.table.json`` into the run folder with
each image cell as the string "Image"; the pixels go to the ``run_table`` artifact ``run-<id>-completions``,
whose files wandb keeps outside the run folder until it syncs, named by the artifact records of the run's
``.wandb`` log. This script reads those records (LevelDB log blocks of protobuf ``Record``s) and lays each
version out as ``wandb artifact get`` does: ``artifacts/run-<id>-completions:v<N>/completions.table.json`` and
``media/images/*.png``, in the run folder; the log itself, which names the machine, is then removed (the board
does not read it). ``IMAGES`` are what was fed, by step and row."""

import json
import os
import shutil
import struct
import sys
from pathlib import Path

NAME = "wandb_images"
RUN_ID = "trlvlm01"
#: step -> each row's (prompt, completion, reward, advantage, [(width, height, RGB colour) of each image])
IMAGES = {
    1: [("What colour?", "red", 1.0, 0.5, [(30, 20, (255, 0, 0))]),
        ("Which two?", "blue, green", 0.5, -0.5, [(8, 8, (0, 0, 255)), (12, 6, (0, 255, 0))])],
    2: [("What colour now?", "yellow", 0.0, 0.0, [(16, 40, (255, 255, 0))]),
        ("And this?", "white", 1.0, 0.0, [(5, 7, (255, 255, 255))])],
}


def wandb_records(path: Path):
    """The records of a ``.wandb`` log: a 7-byte header (``:W&B``, magic, version), then LevelDB log records
    (crc32c, length, type: full / first / middle / last) in 32 KiB blocks, each a protobuf ``Record``."""
    from wandb.proto import wandb_internal_pb2 as pb

    data, at, pending = path.read_bytes(), 7, b""
    while at + 7 <= len(data):
        if 32768 - at % 32768 < 7:  # a block's tail too short for a header is padding
            at += 32768 - at % 32768
            continue
        _crc, length, kind = struct.unpack("<IHB", data[at:at + 7])
        body, at = data[at + 7:at + 7 + length], at + 7 + length
        if kind in (1, 4):
            record = pb.Record()
            record.ParseFromString(pending + body)
            pending = b""
            yield record
        elif kind in (2, 3):
            pending += body


def main(out: Path) -> Path:
    os.environ["WANDB_MODE"] = "offline"
    os.environ["WANDB_SILENT"] = "true"
    import pandas as pd
    import wandb
    from PIL import Image

    root = out / NAME
    shutil.rmtree(root, ignore_errors=True)
    root.mkdir(parents=True)
    run = wandb.init(project="vlm-grpo", dir=str(root), id=RUN_ID)
    for step, rows in IMAGES.items():
        table = {
            "step": [str(step)] * len(rows),
            "prompt": [r[0] for r in rows],
            "completion": [r[1] for r in rows],
            "accuracy_reward": [r[2] for r in rows],
            "advantage": [r[3] for r in rows],
        }
        table["images"] = []
        for image_list in [[Image.new("RGB", (w, h), colour) for w, h, colour in r[4]] for r in rows]:
            table["images"].append([wandb.Image(image) for image in image_list])
        df = pd.DataFrame(table)
        wandb.log({"completions": wandb.Table(dataframe=df)})
    run.finish()
    folder = next((root / "wandb").glob(f"offline-run-*-{RUN_ID}"))
    version = 0
    for record in wandb_records(folder / f"run-{RUN_ID}.wandb"):
        if record.WhichOneof("record_type") != "artifact" or record.artifact.type != "run_table":
            continue
        target = folder / "artifacts" / f"{record.artifact.name}:v{version}"
        for entry in record.artifact.manifest.contents:
            (target / entry.path).parent.mkdir(parents=True, exist_ok=True)
            shutil.copyfile(entry.local_path, target / entry.path)
        version += 1
    for name in ("requirements.txt", "wandb-metadata.json", "output.log", "config.yaml", "wandb-summary.json"):
        (folder / "files" / name).unlink(missing_ok=True)  # the machine's packages and paths: not ours to commit
    shutil.rmtree(folder / "logs", ignore_errors=True)
    (folder / f"run-{RUN_ID}.wandb").unlink()  # read above; it names this machine's paths and host
    for link in (root / "wandb").iterdir():
        if link.is_symlink():
            link.unlink()
    json.loads((next((folder / "files" / "media" / "table").glob("*.table.json"))).read_text())  # written whole
    return root


if __name__ == "__main__":
    print(main(Path(sys.argv[1] if len(sys.argv) > 1 else "tests/data")))
