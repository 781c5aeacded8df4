"""MLflow tracking of run records: one experiment per study, three levels of runs.

    experiment <study>
      setting run   "<setting>"                          (figures of the setting)
        group run   "<problem>/<method>"                 (params; final metrics mean/std over seeds)
          seed run  "<problem>/<method>/seed<k>"         (params, per-evaluation metrics, curve artifact)

Per-evaluation metrics use ``step = number of function evaluations``. Tags carry the config
hash, the git revision that produced the record and, inside DVC, the stage/experiment.
Logging is idempotent (a record whose config hash is already logged is skipped) and safe
under concurrency: with the default SQLite store every logging call holds an exclusive
file lock next to the database, so parallel loggers neither lose writes nor create duplicate
parent runs. The tracking URI is ``MLFLOW_TRACKING_URI`` if set, else ``sqlite:///mlflow.db``.
"""
from __future__ import annotations

import contextlib
import csv
import fcntl
import io
import os
import tempfile
import time
from pathlib import Path

import numpy as np

from .config import RunConfig

DEFAULT_URI = "sqlite:///mlflow.db"
TAG = "sabo_bench"


def tracking_uri() -> str:
    return os.environ.get("MLFLOW_TRACKING_URI") or DEFAULT_URI


def _flatten(prefix: str, obj, out: dict) -> dict:
    if isinstance(obj, dict):
        for k, v in obj.items():
            _flatten(f"{prefix}.{k}" if prefix else str(k), v, out)
    else:
        out[prefix] = obj
    return out


def _finite(x) -> bool:
    return isinstance(x, (int, float)) and x == x and abs(x) != float("inf")


class Tracker:
    """Logs records and report artifacts to MLflow (imported lazily: it is slow to import)."""

    def __init__(self, uri: str | None = None):
        from mlflow.tracking import MlflowClient

        self.uri = uri or tracking_uri()
        self._lock_file = None
        if self.uri.startswith("sqlite:///"):
            db = Path(self.uri[len("sqlite:///"):])
            self._lock_file = db.with_name(db.name + ".lock")
        with self._locked():  # the first access creates/migrates the database: one process at a time
            self.client = MlflowClient(tracking_uri=self.uri)
            self.client.search_experiments(max_results=1)

    @contextlib.contextmanager
    def _locked(self):
        if self._lock_file is None:
            yield
            return
        self._lock_file.parent.mkdir(parents=True, exist_ok=True)
        with open(self._lock_file, "a") as fh:
            fcntl.flock(fh, fcntl.LOCK_EX)
            try:
                yield
            finally:
                fcntl.flock(fh, fcntl.LOCK_UN)

    # ------------------------------------------------------------------ lookup helpers
    def _experiment_id(self, study: str) -> str:
        exp = self.client.get_experiment_by_name(study)
        return exp.experiment_id if exp is not None else self.client.create_experiment(study)

    def _find(self, exp_id: str, **tags) -> list:
        query = " and ".join(f"tags.{TAG}_{k} = '{v}'" for k, v in tags.items())
        return self.client.search_runs([exp_id], filter_string=query, max_results=1000)

    def _find_or_create(self, exp_id: str, name: str, parent: str | None, **tags) -> str:
        found = self._find(exp_id, **tags)
        if found:
            return found[0].info.run_id
        all_tags = {f"{TAG}_{k}": str(v) for k, v in tags.items()}
        all_tags["mlflow.runName"] = name
        if parent is not None:
            all_tags["mlflow.parentRunId"] = parent
        run = self.client.create_run(exp_id, tags=all_tags, run_name=name)
        self.client.set_terminated(run.info.run_id)
        return run.info.run_id

    # ------------------------------------------------------------------ public API
    def is_logged(self, record: dict) -> bool:
        exp = self.client.get_experiment_by_name(record["config"]["study"])
        return exp is not None and bool(self._find(exp.experiment_id, config_hash=record["config_hash"]))

    def log_record(self, record: dict) -> bool:
        """Log one run record; returns False if it was already logged."""
        from mlflow.entities import Metric, Param

        config = RunConfig.from_dict(record["config"])
        with self._locked():
            exp_id = self._experiment_id(config.study)
            if self._find(exp_id, config_hash=record["config_hash"]):
                return False
            problem = config.problem.get("name", "problem")
            setting_run = self._find_or_create(exp_id, config.setting, None, level="setting", setting=config.setting)
            group_run = self._find_or_create(exp_id, f"{problem}/{config.method}", setting_run, level="group",
                                             group_hash=config.group_hash)
            params = _flatten("", {k: v for k, v in config.to_dict().items() if k != "seed"}, {})
            tags = {f"{TAG}_level": "seed", f"{TAG}_config_hash": record["config_hash"],
                    f"{TAG}_group_hash": config.group_hash, "mlflow.runName": f"{config.label}",
                    "mlflow.parentRunId": group_run, f"{TAG}_status": record["result"]["status"],
                    "git_revision": str(record["provenance"].get("git_revision"))}
            for env, tag in (("DVC_STAGE", "dvc_stage"), ("DVC_EXP_NAME", "dvc_exp_name"),
                             ("DVC_EXP_BASELINE_REV", "dvc_exp_baseline_rev")):
                if os.environ.get(env):
                    tags[tag] = os.environ[env]
            run_id = self.client.create_run(exp_id, tags=tags, run_name=config.label).info.run_id
            now = int(time.time() * 1000)
            curve = record["result"]["curve"]
            metrics = [Metric(key, float(value), now, int(step))
                       for key in curve if key not in ("nfev",)
                       for value, step in zip(curve[key], curve["nfev"]) if _finite(value)]
            metrics += [Metric(f"final_{k}", float(v), now, 0) for k, v in record["result"]["final"].items() if _finite(v)]
            metrics += [Metric(f"final_eval_{k}", float(v), now, 0)
                        for k, v in record["result"].get("final_evaluation", {}).items() if _finite(v)]
            metrics += [Metric("wall_time_s", float(record["provenance"]["wall_time_s"]), now, 0)]
            metrics += [Metric(f"stats_{k}", float(v), now, 0) for k, v in record["result"]["stats"].items() if _finite(v)]
            all_params = [Param(k, str(v)[:6000]) for k, v in {**params, "seed": config.seed}.items()]
            for i in range(0, max(len(metrics), len(all_params)), 900):
                self.client.log_batch(run_id, metrics=metrics[i:i + 900], params=all_params[i:i + 900])
            self._log_curve_artifact(run_id, curve)
            self.client.set_terminated(run_id, status="FINISHED" if record["result"]["status"] == "completed" else "FAILED")
            self._log_group_summary(exp_id, group_run, params)
            return True

    def _log_curve_artifact(self, run_id: str, curve: dict) -> None:
        buf = io.StringIO()
        writer = csv.writer(buf)
        keys = list(curve)
        writer.writerow(keys)
        writer.writerows(zip(*(curve[k] for k in keys)))
        with tempfile.TemporaryDirectory() as tmp:
            path = Path(tmp) / "curve.csv"
            path.write_text(buf.getvalue())
            self.client.log_artifact(run_id, str(path))

    def _log_group_summary(self, exp_id: str, group_run: str, params: dict) -> None:
        """Params of the group and final metrics aggregated over its seed runs logged so far."""
        from mlflow.entities import Metric, Param

        children = self.client.search_runs([exp_id], filter_string=f"tags.mlflow.parentRunId = '{group_run}'")
        finals: dict[str, list[float]] = {}
        for child in children:
            for key, value in child.data.metrics.items():
                if key.startswith("final_"):
                    finals.setdefault(key, []).append(value)
        now = int(time.time() * 1000)
        metrics = [Metric("n_seeds", float(len(children)), now, 0)]
        for key, values in finals.items():
            with np.errstate(all="ignore"):  # diverged runs reach 1e300: aggregates may overflow
                mean = float(np.mean(values))
                std = float(np.std(values, ddof=1)) if len(values) > 1 else 0.0
            metrics += [Metric(f"{key}_{stat}", v, now, 0) for stat, v in (("mean", mean), ("std", std)) if _finite(v)]
        existing = self.client.get_run(group_run).data.params
        new_params = [Param(k, str(v)[:6000]) for k, v in params.items() if k not in existing]
        self.client.log_batch(group_run, metrics=metrics, params=new_params)

    def log_setting_artifacts(self, study: str, setting: str, paths: list[str | os.PathLike]) -> None:
        """Attach report files (figures) to the setting's run."""
        with self._locked():
            exp_id = self._experiment_id(study)
            run_id = self._find_or_create(exp_id, setting, None, level="setting", setting=setting)
            for path in paths:
                self.client.log_artifact(run_id, str(path), artifact_path="report")
