"""Write tests/data/trackio_images: traces with images logged by trackio itself
(``python tests/make_trackio_image_fixtures.py tests/data`` in a venv with ``trackio`` and ``pillow``; trackio
0.43.0 made the committed copy).

``trackio.log({"rollouts": [trackio.Trace(messages, metadata)]}, step=N)`` with a ``trackio.Image`` as a
content part of a user turn and of a tool turn (a browser tool's screenshot), and an inline ``image_url``
data URL part. trackio saves each ``trackio.Image`` under ``TRACKIO_DIR/media/<project>/<run>/<step>/<uuid>.png``
re-encoded as RGBA, and stores the part in the ``traces`` table's messages as ``{"_type": "trackio.image",
"file_path": "<project>/<run>/<step>/<uuid>.png", "caption": ...}``. ``TRACES`` are what was fed."""

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
    trackio.finish()
    for extra in [*root.glob("*.db-*"), *root.glob("*.lock")]:  # no writer left: the log is checkpointed
        extra.unlink()
    return root


if __name__ == "__main__":
    print(main(Path(sys.argv[1] if len(sys.argv) > 1 else "tests/data")))
