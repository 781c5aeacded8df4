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

Connecting is bounded in time (``SABO_BENCH_TRACKING_TIMEOUT`` seconds, default 15): a locked
or broken database or an unreachable server makes ``Tracker()`` raise instead of hanging, so
the command line can carry on without tracking. Tag values are never spliced raw into MLflow
filter strings (see ``_tag_clause``): names with quotes are looked up correctly.
"""
from __future__ import annotations

import contextlib
import csv
import fcntl
import io
import os
import tempfile
import threading
import time
from pathlib import Path

import numpy as np

from .config import RunConfig

DEFAULT_URI = "sqlite:///mlflow.db"
TAG = "sabo_bench"
DEFAULT_TIMEOUT_S = 15.0     # connecting (lock wait included): a locked sqlite db fails in ~5 s
LOG_LOCK_TIMEOUT_S = 120.0   # waiting for another logger's file lock while logging one record


def tracking_uri() -> str:
    return os.environ.get("MLFLOW_TRACKING_URI") or DEFAULT_URI


def connect_timeout() -> float:
    try:
        return float(os.environ.get("SABO_BENCH_TRACKING_TIMEOUT") or DEFAULT_TIMEOUT_S)
    except ValueError:
        return DEFAULT_TIMEOUT_S


# MLflow's filter syntax has no escape: a value is whatever lies between its quotes, and the
# tokenizer (sqlparse) treats a backslash before a quote as an escaped quote. Values made of
# other characters are quoted as they are; any other value is matched with LIKE, each of these
# characters replaced by the one-character wildcard ``_``, and the hits are filtered exactly.
_UNQUOTABLE = ("'", '"', "\\")


def _tag_clause(key: str, value) -> str:
    """A filter clause selecting runs whose tag ``key`` is ``value`` (a superset when it holds quotes)."""
    value = str(value)
    if not any(c in value for c in _UNQUOTABLE):
        return f"tags.`{key}` = '{value}'"
    pattern = "".join("_" if c in _UNQUOTABLE else c for c in value)
    return f"tags.`{key}` LIKE '{pattern}'"


def _flatten(prefix: str, obj, out: dict) -> dict:
    if isinstance(obj, dict):
        for k, v in obj.items():
            _flatten(f"{prefix}.{k}" if prefix else str(k), v, out)
    else:
        out[prefix] = obj
    return out


def _finite(x) -> bool:
    return isinstance(x, (int, float)) and x == x and abs(x) != float("inf")


def _flock_until(fh, deadline: float) -> bool:
    """Lock ``fh`` exclusively, waiting until ``deadline`` (monotonic); False if it did not get it.

    The wait is a blocking ``flock`` (the kernel wakes waiters on release: polling with
    LOCK_NB starves against loggers that take the lock back at once) in a helper thread. On
    timeout ``fh`` is closed: should that flock still succeed, the lock goes with the closed
    file description as soon as the call returns.
    """
    try:
        fcntl.flock(fh, fcntl.LOCK_EX | fcntl.LOCK_NB)
        return True
    except BlockingIOError:
        pass
    if deadline <= time.monotonic():
        return False
    got = threading.Event()

    def wait():
        with contextlib.suppress(OSError, ValueError):
            fcntl.flock(fh, fcntl.LOCK_EX)
            got.set()

    threading.Thread(target=wait, name="mlflow-lock", daemon=True).start()
    if got.wait(max(0.0, deadline - time.monotonic())):
        return True
    fh.close()  # releases the lock should the helper get it after all
    return False


def _forget_cached_engine(uri: str) -> None:
    """Drop MLflow's cached SQLAlchemy engine of ``uri`` (best effort, private MLflow API).

    MLflow keeps one engine per database URI for the life of the process, pooled connections
    included; after a failure (say a corrupt file since replaced) a later Tracker in the same
    process must open the database afresh rather than reuse a connection to the old file.
    """
    try:
        from mlflow.store.tracking.sqlalchemy_store import SqlAlchemyStore

        engine = SqlAlchemyStore._engine_map.pop(uri, None)
        if engine is not None:
            engine.dispose()
    except Exception:  # an MLflow without this cache needs nothing dropped
        pass


class Tracker:
    """Logs records and report artifacts to MLflow (imported lazily: it is slow to import)."""

    def __init__(self, uri: str | None = None, *, timeout: float | None = None):
        """Connect to the tracking store; raises (never hangs) if it is unusable.

        ``timeout`` (default ``SABO_BENCH_TRACKING_TIMEOUT``, else 15 s) bounds the whole
        connection: waiting for the lock file, creating/migrating the database, the first query.
        """
        from mlflow.tracking import MlflowClient  # slow import: outside the deadline

        self.uri = uri or tracking_uri()
        self.timeout = connect_timeout() if timeout is None else float(timeout)
        self._lock_file = None
        if self.uri.startswith("sqlite:///"):
            db = Path(self.uri[len("sqlite:///"):])
            self._lock_file = db.with_name(db.name + ".lock")
        self.client = self._connect(MlflowClient)

    def _connect(self, client_class):
        """The client, after a first query, within ``self.timeout`` seconds.

        The connection runs in a daemon thread: MLflow may block far longer than we want (an
        HTTP server that does not answer is retried for minutes); on timeout the thread is left
        behind and dies with the process.
        """
        deadline = time.monotonic() + self.timeout
        outcome: dict = {}

        def connect():
            try:
                with self._locked(deadline=deadline):  # the first access creates/migrates the db: one process at a time
                    client = client_class(tracking_uri=self.uri)
                    client.search_experiments(max_results=1)
                outcome["client"] = client
            except BaseException as exc:  # handed to the caller's thread
                _forget_cached_engine(self.uri)
                outcome["error"] = exc

        thread = threading.Thread(target=connect, name="mlflow-connect", daemon=True)
        thread.start()
        thread.join(max(0.0, deadline - time.monotonic()) + 0.5)
        if "client" in outcome:
            return outcome["client"]
        if "error" in outcome:
            raise outcome["error"]
        raise TimeoutError(f"no answer from {self.uri} within {self.timeout:g} s")

    @contextlib.contextmanager
    def _locked(self, deadline: float | None = None):
        """Hold the lock file next to a SQLite store; TimeoutError past ``deadline`` (monotonic)."""
        if self._lock_file is None:
            yield
            return
        if deadline is None:
            deadline = time.monotonic() + LOG_LOCK_TIMEOUT_S
        self._lock_file.parent.mkdir(parents=True, exist_ok=True)
        with open(self._lock_file, "a") as fh:
            if not _flock_until(fh, deadline):
                raise TimeoutError(f"{self._lock_file} is held by another process")
            try:
                yield
            finally:
                fcntl.flock(fh, fcntl.LOCK_UN)

    # ------------------------------------------------------------------ lookup helpers
    def _experiment_id(self, study: str) -> str:
        exp = self.client.get_experiment_by_name(study)
        return exp.experiment_id if exp is not None else self.client.create_experiment(study)

    def _search(self, exp_id: str, tags: dict) -> list:
        """Runs of the experiment whose tags equal ``tags`` exactly (keys are full tag names)."""
        query = " and ".join(_tag_clause(k, v) for k, v in tags.items())
        runs, token = [], None
        while True:
            page = self.client.search_runs([exp_id], filter_string=query, max_results=1000, page_token=token)
            runs += [r for r in page if all(r.data.tags.get(k) == str(v) for k, v in tags.items())]
            token = page.token
            if not token:
                return runs

    def _find(self, exp_id: str, **tags) -> list:
        return self._search(exp_id, {f"{TAG}_{k}": v for k, v in tags.items()})

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
            metrics += [Metric(f"final_{k}", float(v), now, 0)
                        for k, v in record["result"]["final"].items() if _finite(v)]
            metrics += [Metric(f"final_eval_{k}", float(v), now, 0)
                        for k, v in record["result"].get("final_evaluation", {}).items() if _finite(v)]
            metrics += [Metric("wall_time_s", float(record["provenance"]["wall_time_s"]), now, 0)]
            metrics += [Metric(f"stats_{k}", float(v), now, 0)
                        for k, v in record["result"]["stats"].items() if _finite(v)]
            all_params = [Param(k, str(v)[:6000]) for k, v in {**params, "seed": config.seed}.items()]
            for i in range(0, max(len(metrics), len(all_params)), 900):
                self.client.log_batch(run_id, metrics=metrics[i:i + 900], params=all_params[i:i + 900])
            self._log_curve_artifact(run_id, curve)
            self.client.set_terminated(run_id,
                                       status="FINISHED" if record["result"]["status"] == "completed" else "FAILED")
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

        children = self._search(exp_id, {"mlflow.parentRunId": group_run})
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
