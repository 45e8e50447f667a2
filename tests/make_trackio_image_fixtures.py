"""Write tests/data/trackio_images: traces with images logged by trackio itself
(``python tests/make_trackio_image_fixtures.py tests/data`` in a venv with ``trackio`` and ``pillow``; trackio
0.43.0 made the committed copy).

``trackio.log({"rollouts": [trackio.Trace(messages, metadata)]}, step=N)`` with a ``trackio.Image`` as a
content part of a user turn and of a tool turn (a browser tool's screenshot), and an inline ``image_url``
data URL part; then TRL's ``completions`` table with an ``image`` column of ``trackio.Image`` lists, logged as
``GRPOTrainer.log`` logs it with ``report_to="trackio"``. trackio saves each ``trackio.Image`` under ``TRACKIO_DIR/media/<project>/<run>/<step>/<uuid>.png``
re-encoded as RGBA, and stores the part in the ``traces`` table's messages as ``{"_type": "trackio.image",
"file_path": "<project>/<run>/<step>/<uuid>.png", "caption": ...}`` (a table's in the ``metrics`` table's
row). ``TRACES`` and ``COMPLETIONS`` are what was fed."""

import base64
import io
import os
import shutil
import sys
from pathlib import Path

NAME = "trackio_images"
PROJECT = "vlm"
#: step -> each trace's (reward, [(role, [(kind, value)]) of each message]); an image is (width, height, RGB)
TRACES = {
    1: [(1.0, [("user", [("text", "What colour is this?"), ("image", (30, 20, (255, 0, 0)))]),
               ("assistant", [("text", "Red.")])]),
        (0.0, [("user", [("text", "Open the page.")]),
               ("assistant", [("text", "Taking a screenshot.")]),
               ("tool", [("image", (64, 48, (0, 90, 180))), ("text", "the screen")]),
               ("assistant", [("text", "It is blue.")])])],
    2: [(0.5, [("user", [("data_url", (12, 6, (0, 255, 0))), ("text", "And this one?")]),
               ("assistant", [("text", "Green.")])])],
}


#: TRL's completions table with images (GRPOTrainer.log with report_to="trackio"): step -> each row's
#: (prompt, completion, accuracy_reward, advantage, [(width, height, RGB) of each image])
COMPLETIONS = {
    3: [("What colour?", "red", 1.0, 0.5, [(10, 5, (255, 0, 0))]),
        ("Which two?", "blue, green", 0.0, -0.5, [(3, 4, (0, 0, 255)), (2, 2, (0, 255, 0))])],
}


def png(size, colour) -> bytes:
    from PIL import Image

    out = io.BytesIO()
    Image.new("RGB", size, colour).save(out, "PNG")
    return out.getvalue()


def main(out: Path) -> Path:
    root = out / NAME
    shutil.rmtree(root, ignore_errors=True)
    root.mkdir(parents=True)
    os.environ["TRACKIO_DIR"] = str(root)
    import trackio
    from PIL import Image

    trackio.init(project=PROJECT, name="grpo-vlm")
    for step, traces in TRACES.items():
        logged = []
        for reward, messages in traces:
            built = []
            for role, parts in messages:
                content = []
                for kind, value in parts:
                    if kind == "text":
                        content.append({"type": "text", "text": value})
                    elif kind == "image":
                        content.append(trackio.Image(Image.new("RGB", value[:2], value[2]), caption=role))
                    else:
                        url = "data:image/png;base64," + base64.b64encode(png(value[:2], value[2])).decode()
                        content.append({"type": "image_url", "image_url": {"url": url}})
                built.append({"role": role, "content": content})
            logged.append(trackio.Trace(messages=built, metadata={"reward": reward}))
        trackio.log({"rollouts": logged}, step=step)
    import pandas as pd

    for step, rows in COMPLETIONS.items():  # trl/trainer/grpo_trainer.py log(), line for line
        table = {
            "step": [str(step)] * len(rows),
            "prompt": [r[0] for r in rows],
            "completion": [r[1] for r in rows],
            "accuracy_reward": [r[2] for r in rows],
            "advantage": [r[3] for r in rows],
        }
        df_base = pd.DataFrame(table)
        images = []
        for image_list in [[Image.new("RGB", (w, h), colour) for w, h, colour in r[4]] for r in rows]:
            images.append([trackio.Image(image) for image in image_list])
        df = pd.concat([df_base, pd.Series(images, name="image")], axis=1)
        trackio.log({"completions": trackio.Table(dataframe=df)}, step=step)
    trackio.finish()
    for extra in [*root.glob("*.db-*"), *root.glob("*.lock")]:  # no writer left: the log is checkpointed
        extra.unlink()
    return root


if __name__ == "__main__":
    print(main(Path(sys.argv[1] if len(sys.argv) > 1 else "tests/data")))
