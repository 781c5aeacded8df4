"""params.yaml's comments give the advice of docs/studies/dvc.md ("One study at a time"): switch a profile by editing
the file and running `dvc repro`, not `dvc exp run -S` (an experiment deletes records that dvc.lock does not list)."""
import re
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]


def comments() -> list[str]:
    return [line.split("#", 1)[1] for line in (ROOT / "params.yaml").read_text().splitlines() if "#" in line]


def test_no_comment_recommends_an_experiment_run():
    for text in comments():
        if "dvc exp run" in text:
            assert re.search(r"\bnot\b", text, re.IGNORECASE), f"params.yaml recommends `dvc exp run`: {text.strip()}"


def test_the_profile_comments_name_dvc_repro():
    text = "\n".join(comments())
    assert "dvc repro synthetic" in text and "dvc repro prompt_report" in text
    page = (ROOT / "docs" / "studies" / "dvc.md").read_text()  # the wording this follows
    assert "dvc repro synthetic" in page and "dvc repro prompt_report" in page and "not\nwith `dvc exp run -S`" in page
