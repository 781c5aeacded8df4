"""MLflow tracking of run records: one experiment per study, group runs with their seed runs.

    experiment <study>
      group run    "<setting>/<function>/<method> [<profile>]"          top level: params, aggregates
        seed run   "<setting>/<function>/<method>/seed<k> [<profile>]"  params, curves, curve.csv
      setting run  "<setting> [<profile>]"                              top level: the report's figures

Every run carries the tags ``sabo_bench_level`` (``group``, ``seed``, ``setting``),
``sabo_bench_profile`` and ``sabo_bench_setting``; group and seed runs also
``sabo_bench_function``, ``sabo_bench_method``, ``sabo_bench_group_hash`` and
``sabo_bench_step = function evaluations``. A method run on a grid in one profile (the image
study's learning rates) names the grid point after the method: ``sabo (lr=0.5, rho=100)``
(:func:`variants`). Seed runs also carry the config hash, the git revision of the record and,
inside DVC, the stage/experiment. A record is logged once per profile (the key is its config
hash and the profile): a config shared by two profiles appears under both, so that filtering
on one profile shows all its runs, and runs of profiles with different budgets never mix.

Why group runs are at the top level: MLflow's runs table nests a child run under its parent
and, when a filter matches children only, shows their parent collapsed (3.17); the filter
``tags.sabo_bench_level = 'group'`` must land on the group runs themselves.

Times (MLflow's Start and Duration): a seed run starts at the record's ``started_utc`` and ends
at its ``finished_utc`` (a resumed run's span includes the time it was interrupted); each curve
point is stamped with the wall time at which the engine recorded it (``provenance
["curve_time_unix_s"]``; records from before it have their curve stamped at ``finished_utc``);
final values, statistics and ``wall_time_s`` at ``finished_utc``. A group run spans its seed
runs, from the earliest start to the latest end.

Metrics are logged against ``step = number of function evaluations`` (MLflow calls the axis
"Step"; the ``sabo_bench_step`` tag and the run and experiment descriptions say so). A group
run holds, over its seed runs: ``n_seeds``, ``n_diverged``; for every final metric ``final_<m>``
its ``_mean``, ``_std`` (from two seeds with finite values on), ``_median`` and ``_geomean`` (the geometric
mean, of non-negative values only) over the seeds where it is finite; and for every curve metric ``<m>`` the median
curve ``<m>_median`` (:func:`median_curve`). The median and the geometric mean are what a
comparison can trust: one diverged seed (BES reaches errors of 1e24) decides the arithmetic
mean alone.

A group run is a function of its seed runs: when a seed run joins, the group run is written
anew (a new run with the same tags and name; the seed runs move under it, the old one is
deleted, which MLflow's UI hides). MLflow can neither delete a metric's points nor move a
run's start: logging a median curve again would add a second point at every step.

Logging is idempotent (a record whose config hash is already logged under the profile is
skipped) and safe under concurrency: with the default SQLite store every logging call holds an
exclusive file lock next to the database, so parallel loggers neither lose writes nor create
duplicate group runs. The tracking URI is ``MLFLOW_TRACKING_URI`` if set, else
``sqlite:///mlflow.db``.

Connecting never hangs: ``SABO_BENCH_TRACKING_TIMEOUT`` seconds (default 15) bound every wait
for something else, so that ``Tracker()`` raises and the command line carries on without
tracking. For a SQLite store that is the wait for another process: for the lock file (another
logger) and for the database's own lock (another writer); a corrupt file fails at once. Work
done in this process is not bounded: creating a new store (MLflow's tables and migrations) and
opening one take seconds, minutes on a loaded machine, and a slow machine is not an unusable
store. A new store is created beside its path and renamed into place (``_create_sqlite_store``),
so that an interrupted creation leaves no half-made database. For any other store (a tracking
server, another database) the timeout bounds the whole connection: its first answer included.
Tag values are never spliced raw into MLflow filter strings (see ``_tag_clause``): names with
quotes are looked up correctly.
"""
from __future__ import annotations

import contextlib
import csv
import fcntl
import functools
import io
import logging
import os
import re
import sqlite3
import tempfile
import threading
import time
import urllib.parse
from datetime import datetime
from pathlib import Path

import numpy as np

from .config import RunConfig, flatten
from .storage import atomic_file, remove_stale_temporaries

DEFAULT_URI = "sqlite:///mlflow.db"
DEFAULT_UI = "http://127.0.0.1:5000"  # where `mlflow ui` serves by default
TAG = "sabo_bench"
STEP = "function evaluations"  # what MLflow's "Step" axis counts in every curve logged here
SEED_NOTE = (f"One run of one seed. Curves (`error`, `f_best`, ...) are logged against Step = {STEP}; "
             "`curve.csv` holds them with the iterations (`nit`) too.")
GROUP_NOTE = (f"The seed runs under this run, aggregated: `<m>_median` curves against Step = {STEP}; "
              "`final_<m>_median`, `_geomean`, `_mean`, `_std` (two finite seeds or more) over seeds; `n_seeds`, "
              "`n_diverged`.")
EXPERIMENT_TAGS = {  # the description MLflow shows above the runs table
    "mlflow.note.content": (
        f"Step = number of {STEP} in every curve of these runs. Compare methods: filter "
        "`tags.sabo_bench_level = 'group' and tags.sabo_bench_profile = '<profile>' and "
        "tags.sabo_bench_setting = '<setting>' and tags.sabo_bench_function = '<function>'`, sort by "
        "`final_error_median`, open the chart view (`sabo-bench track <study> --profile <profile> --setting "
        "<setting> --function <function>` prints the link)."),
}
DEFAULT_TIMEOUT_S = 15.0     # waiting for another process's lock on a SQLite store, or for a server
#: the libraries MLflow's calls go through (its stores: SQLAlchemy, alembic's migrations; a server: urllib3's
#: retries), kept below CRITICAL while a Tracker calls MLflow (:func:`quiet_libraries`)
QUIET_LIBRARIES = ("mlflow", "sqlalchemy", "alembic", "urllib3")
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
    """A filter clause selecting runs whose tag ``key`` is ``value`` (a superset when it holds quotes).

    A key other than a plain identifier is quoted with backticks; our own keys are identifiers,
    so the comparison page's search box shows the filter as docs/mlflow.md writes it.
    """
    value = str(value)
    name = key if re.fullmatch(r"[A-Za-z_]\w*", key) else f"`{key}`"
    if not any(c in value for c in _UNQUOTABLE):
        return f"tags.{name} = '{value}'"
    pattern = "".join("_" if c in _UNQUOTABLE else c for c in value)
    return f"tags.{name} LIKE '{pattern}'"


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


@contextlib.contextmanager
def quiet_libraries():
    """Only CRITICAL records of the :data:`QUIET_LIBRARIES`' loggers (and of their descendants) while the block runs.

    MLflow reports a store it cannot use itself, as well as raising: a locked or damaged SQLite
    store printed 28 to 222 lines (SQLAlchemy's error with the SQL and a traceback at ERROR level
    per try, alembic's migrations, a server's retries) around the one line that says tracking
    is off (``sabo-bench``'s warning, from the exception raised). Descendants that set a level of
    their own (MLflow configures ``sqlalchemy.engine`` and ``alembic``) are raised too; every
    level is put back when the block ends.
    """
    manager = logging.Logger.manager
    loggers = [logging.getLogger(name) for name in QUIET_LIBRARIES]
    loggers += [logger for name, logger in list(manager.loggerDict.items())
                if isinstance(logger, logging.Logger) and logger.level != logging.NOTSET
                and name.partition(".")[0] in QUIET_LIBRARIES]
    levels = {logger: logger.level for logger in loggers}
    for logger in levels:
        logger.setLevel(logging.CRITICAL)
    try:
        yield
    finally:
        for logger, level in levels.items():
            logger.setLevel(level)


def _quiet(method):
    """``method`` run under :func:`quiet_libraries`."""
    @functools.wraps(method)
    def quietly(*args, **kwargs):
        with quiet_libraries():
            return method(*args, **kwargs)
    return quietly


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


def _create_sqlite_store(db: Path, client_class) -> None:
    """A new MLflow store at ``db`` (absent or empty): MLflow creates its tables in a temporary
    file beside ``db``, which is then renamed to ``db`` (:func:`~replication.storage.atomic_file`).

    A creation that is interrupted (Ctrl-C, a kill) leaves no store, rather than one whose
    migrations stopped halfway, which MLflow would refuse to open from then on as out of date.
    Call it holding the store's lock file: the temporary files of a killed creation are removed.
    """
    remove_stale_temporaries(db)
    with atomic_file(db) as tmp:
        uri = f"sqlite:///{tmp}"
        try:
            client_class(tracking_uri=uri).search_experiments(max_results=1)
        finally:
            _forget_cached_engine(uri)  # its connections closed before the file is renamed


def _wait_for_writers(db: Path, deadline: float) -> None:
    """Return once no other connection is writing to the SQLite database ``db``; raises
    ``sqlite3.OperationalError`` (database is locked) past ``deadline`` (monotonic).

    The reserved lock taken here (and given back at once) is the one every write begins with;
    a file that is not a database fails here too, at once.
    """
    connection = sqlite3.connect(db, timeout=max(0.0, deadline - time.monotonic()), isolation_level=None)
    try:
        connection.execute("BEGIN IMMEDIATE")
        connection.execute("ROLLBACK")
    finally:
        connection.close()


class Tracker:
    """Logs records and report artifacts to MLflow (imported lazily: it is slow to import)."""

    @_quiet
    def __init__(self, uri: str | None = None, *, timeout: float | None = None):
        """Connect to the tracking store; raises (never hangs) if it is unusable.

        ``timeout`` (default ``SABO_BENCH_TRACKING_TIMEOUT``, else 15 s) bounds what the
        connection waits for (module docstring): another process's lock on a SQLite store, the
        whole connection to any other store. Creating or opening a SQLite store is not bounded.
        """
        from mlflow.tracking import MlflowClient  # slow import: outside the deadline

        self.uri = uri or tracking_uri()
        self.timeout = connect_timeout() if timeout is None else float(timeout)
        self._lock_file = None
        if self.uri.startswith("sqlite:///"):
            db = Path(self.uri[len("sqlite:///"):])
            self._lock_file = db.with_name(db.name + ".lock")
            self.client = self._open_sqlite(db, MlflowClient)
        else:
            self.client = self._connect(MlflowClient)

    def _open_sqlite(self, db: Path, client_class):
        """The client of the SQLite store ``db``, after a first query; created if it is new.

        Only the waits for other processes are bounded by ``self.timeout``: for the lock file,
        then for a writer holding the database (:func:`_wait_for_writers`). MLflow's own work
        runs in this thread, to its end (a Ctrl-C still stops it).
        """
        deadline = time.monotonic() + self.timeout
        with self._locked(deadline=deadline):  # one process at a time creates the store
            try:
                if not db.exists() or db.stat().st_size == 0:
                    _create_sqlite_store(db, client_class)
                else:
                    _wait_for_writers(db, deadline)
                client = client_class(tracking_uri=self.uri)
                client.search_experiments(max_results=1)
            except BaseException:
                _forget_cached_engine(self.uri)
                raise
        return client

    def _connect(self, client_class):
        """The client of a store other than SQLite, after a first query, within ``self.timeout`` seconds.

        The connection runs in a daemon thread: MLflow may block far longer than we want (an
        HTTP server that does not answer is retried for minutes); on timeout the thread is left
        behind and dies with the process.
        """
        outcome: dict = {}

        def connect():
            try:
                client = client_class(tracking_uri=self.uri)
                client.search_experiments(max_results=1)
                outcome["client"] = client
            except BaseException as exc:  # handed to the caller's thread
                outcome["error"] = exc

        thread = threading.Thread(target=connect, name="mlflow-connect", daemon=True)
        thread.start()
        thread.join(self.timeout)
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
        if exp is None:
            return self.client.create_experiment(study, tags=EXPERIMENT_TAGS)
        for key, value in EXPERIMENT_TAGS.items():  # experiments logged by an older sabo-bench lack them
            if exp.tags.get(key) != value:
                self.client.set_experiment_tag(exp.experiment_id, key, value)
        return exp.experiment_id

    def _search(self, exp_id: str, tags: dict) -> list:
        """Active runs of the experiment whose tags equal ``tags`` exactly (keys are full tag names)."""
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

    # ------------------------------------------------------------------ public API
    @_quiet
    def is_logged(self, record: dict, *, profile: str) -> bool:
        exp = self.client.get_experiment_by_name(record["config"]["study"])
        return exp is not None and bool(self._find(exp.experiment_id, level="seed", profile=profile,
                                                   config_hash=record["config_hash"]))

    @_quiet
    def log_record(self, record: dict, *, profile: str, variant: str = "") -> bool:
        """Log one run record of ``profile``; returns False if it was logged under that profile already.

        ``variant`` names the grid point of the method when the profile runs it on a grid
        (:func:`variants`), so that run names stay unique.
        """
        from mlflow.entities import Metric, Param

        config = RunConfig.from_dict(record["config"])
        with self._locked():
            exp_id = self._experiment_id(config.study)
            if self._find(exp_id, level="seed", profile=profile, config_hash=record["config_hash"]):
                return False
            group_tags = _group_tags(config, profile)
            group_name, seed_name = _names(config, profile, variant)
            start, end = _record_span(record)
            tags = {**group_tags, f"{TAG}_level": "seed", f"{TAG}_config_hash": record["config_hash"],
                    f"{TAG}_status": record["result"]["status"], "mlflow.note.content": SEED_NOTE,
                    "git_revision": str(record["provenance"].get("git_revision"))}
            for env, tag in (("DVC_STAGE", "dvc_stage"), ("DVC_EXP_NAME", "dvc_exp_name"),
                             ("DVC_EXP_BASELINE_REV", "dvc_exp_baseline_rev")):
                if os.environ.get(env):
                    tags[tag] = os.environ[env]
            run_id = self.client.create_run(exp_id, start_time=start, tags=tags, run_name=seed_name).info.run_id
            curve = record["result"]["curve"]
            stamps = _curve_stamps(record, end)
            metrics = [Metric(key, float(value), stamp, int(step))
                       for key in curve if key != "nfev"
                       for value, step, stamp in zip(curve[key], curve["nfev"], stamps) if _finite(value)]
            metrics += [Metric(f"final_{k}", float(v), end, 0)
                        for k, v in record["result"]["final"].items() if _finite(v)]
            metrics += [Metric(f"final_eval_{k}", float(v), end, 0)
                        for k, v in record["result"].get("final_evaluation", {}).items() if _finite(v)]
            metrics += [Metric("wall_time_s", float(record["provenance"]["wall_time_s"]), end, 0)]
            metrics += [Metric(f"stats_{k}", float(v), end, 0)
                        for k, v in record["result"]["stats"].items() if _finite(v)]
            params = flatten("", {k: v for k, v in config.to_dict().items() if k != "seed"}, {})
            all_params = [Param(k, str(v)[:6000]) for k, v in {**params, "seed": config.seed}.items()]
            self._log_batches(run_id, metrics, all_params)
            self._log_curve_artifact(run_id, curve)
            self.client.set_terminated(run_id, end_time=end,
                                       status="FINISHED" if record["result"]["status"] == "completed" else "FAILED")
            self._rewrite_group(exp_id, group_tags, group_name, params, [k for k in curve if k not in ("nit", "nfev")])
            return True

    def _log_batches(self, run_id: str, metrics: list, params: list) -> None:
        for i in range(0, max(len(metrics), len(params)), 900):  # MLflow takes 1000 metrics per call
            self.client.log_batch(run_id, metrics=metrics[i:i + 900], params=params[i:i + 900])

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

    def _rewrite_group(self, exp_id: str, group_tags: dict, name: str, params: dict, curve_keys: list[str]) -> None:
        """Write the group run anew from its seed runs; the seed runs move under it (module docstring)."""
        from mlflow.entities import Metric, Param

        old = self._search(exp_id, {**group_tags, f"{TAG}_level": "group"})
        seeds = self._search(exp_id, {**group_tags, f"{TAG}_level": "seed"})
        start = min(r.info.start_time for r in seeds)
        end = max(r.info.end_time for r in seeds)
        metrics = [Metric("n_seeds", float(len(seeds)), end, 0),
                   Metric("n_diverged", float(sum(r.data.tags.get(f"{TAG}_status") == "diverged" for r in seeds)),
                          end, 0)]
        finals: dict[str, list[float]] = {}
        for seed in seeds:
            for key, value in seed.data.metrics.items():
                if key.startswith("final_"):
                    finals.setdefault(key, []).append(value)
        for key, values in sorted(finals.items()):
            metrics += [Metric(f"{key}_{stat}", v, end, 0) for stat, v in aggregate(values).items()]
        steps = {r.info.run_id: [m.step for m in self.client.get_metric_history(r.info.run_id, "nit")]
                 for r in seeds}
        for key in curve_keys:
            histories = [(steps[r.info.run_id],
                          {m.step: (m.value, m.timestamp) for m in self.client.get_metric_history(r.info.run_id, key)})
                         for r in seeds]
            metrics += [Metric(f"{key}_median", value, stamp, step)
                        for step, (value, stamp) in median_curve(histories).items()]
        tags = {**group_tags, f"{TAG}_level": "group", "mlflow.note.content": GROUP_NOTE}
        group_id = self.client.create_run(exp_id, start_time=start, tags=tags, run_name=name).info.run_id
        self._log_batches(group_id, metrics, [Param(k, str(v)[:6000]) for k, v in params.items()])
        self.client.set_terminated(group_id, end_time=end)
        for seed in seeds:
            self.client.set_tag(seed.info.run_id, "mlflow.parentRunId", group_id)
        for run in old:
            self.client.delete_run(run.info.run_id)

    @_quiet
    def log_setting_artifacts(self, study: str, setting: str, paths: list[str | os.PathLike], *,
                              profile: str) -> None:
        """Attach report files (figures) of ``profile`` to the setting's run (started now, ended when attached)."""
        with self._locked():
            exp_id = self._experiment_id(study)
            found = self._find(exp_id, level="setting", profile=profile, setting=setting)
            if found:
                run_id = found[0].info.run_id
            else:
                tags = {f"{TAG}_level": "setting", f"{TAG}_profile": profile, f"{TAG}_setting": setting}
                run_id = self.client.create_run(exp_id, tags=tags, run_name=f"{setting} [{profile}]").info.run_id
            for path in paths:
                self.client.log_artifact(run_id, str(path), artifact_path="report")
            self.client.set_terminated(run_id)

    @_quiet
    def comparison_url(self, study: str, profile: str, *, setting: str | None = None, function: str | None = None,
                       ui: str = DEFAULT_UI) -> str | None:
        """The MLflow UI page comparing the methods: the group runs of ``profile`` (one setting and
        function if given), as charts (``<m>_median`` per method against evaluations), sorted by
        ``final_error_median`` where the runs have it; None if ``study`` has no experiment."""
        exp = self.client.get_experiment_by_name(study)
        if exp is None:
            return None
        tags = {"level": "group", "profile": profile, "setting": setting, "function": function}
        query = " and ".join(_tag_clause(f"{TAG}_{k}", v) for k, v in tags.items() if v is not None)
        state = {"workflowType": "machine_learning", "compareRunsMode": "CHART", "searchFilter": query}
        sample = self.client.search_runs([exp.experiment_id], filter_string=query, max_results=1)
        if sample and "final_error_median" in sample[0].data.metrics:
            state |= {"orderByKey": "metrics.`final_error_median`", "orderByAsc": "true"}
        query_string = urllib.parse.urlencode(state, quote_via=urllib.parse.quote)
        return f"{ui.rstrip('/')}/#/experiments/{exp.experiment_id}/runs?{query_string}"


# ---------------------------------------------------------------------- names, times, aggregates
def _group_tags(config: RunConfig, profile: str) -> dict:
    """The tags that identify a group run, and that its seed runs share."""
    return {f"{TAG}_{k}": str(v) for k, v in (
        ("profile", profile), ("setting", config.setting), ("function", config.problem.get("name", "problem")),
        ("method", config.method), ("group_hash", config.group_hash), ("step", STEP))}


def _names(config: RunConfig, profile: str, variant: str) -> tuple[str, str]:
    """The names of the group run and of the seed run of ``config``."""
    method = f"{config.method} ({variant})" if variant else config.method
    path = f"{config.setting}/{config.problem.get('name', 'problem')}/{method}"
    return f"{path} [{profile}]", f"{path}/seed{config.seed} [{profile}]"


def variants(configs) -> dict[str, str]:
    """``group_hash -> "k=v, ..."``: what tells apart the groups of one (setting, function, method).

    The keys are those of the group's config (params, budget, problem, code version) whose values
    differ between such groups (``params.`` dropped from the name); a group alone in its
    (setting, function, method) gets ``""``.
    """
    by_cell: dict[tuple, dict[str, dict]] = {}
    for c in configs:
        cell = (c.setting, c.problem.get("name", "problem"), c.method)
        by_cell.setdefault(cell, {})[c.group_hash] = flatten("", {k: v for k, v in c.group.items()
                                                                   if k not in ("study", "setting", "method")}, {})
    out = {}
    for groups in by_cell.values():
        keys = sorted({k for flat in groups.values() for k in flat
                       if len({repr(f.get(k)) for f in groups.values()}) > 1})
        for group_hash, flat in groups.items():
            out[group_hash] = ", ".join(f"{k.removeprefix('params.')}={flat.get(k)}" for k in keys)
    return out


def _ms(iso: str) -> int:
    """Milliseconds since the epoch of an ISO 8601 time (``started_utc``, ``finished_utc``)."""
    return round(datetime.fromisoformat(iso).timestamp() * 1000)


def _record_span(record: dict) -> tuple[int, int]:
    """(start, end) of the run in MLflow's milliseconds, from the record's provenance."""
    prov = record["provenance"]
    return _ms(prov["started_utc"]), _ms(prov["finished_utc"])


def _curve_stamps(record: dict, end: int) -> list[int]:
    """The wall time of each curve point (ms); ``end`` where the record did not keep it."""
    n = len(record["result"]["curve"]["nfev"])
    times = record["provenance"].get("curve_time_unix_s") or [None] * n
    return [end if t is None else round(t * 1000) for t in times]


def aggregate(values: list[float]) -> dict[str, float]:
    """``mean``, ``std`` (ddof 1), ``median`` and ``geomean`` of the finite ``values``.

    One value has no spread: ``std`` is left out then (a logged 0 would read as seeds that agree;
    the other statistics leave out what is not finite too), as the reports show "(1 seed)"
    (:func:`replication.seeds.seeds_text`).
    The geometric mean is exp(mean(log v)) for non-negative values only (0 if one is 0); a
    statistic that overflows (values near 1e300) is left out rather than logged as inf.
    """
    v = np.asarray([x for x in values if _finite(x)], dtype=np.float64)
    if v.size == 0:
        return {}
    with np.errstate(all="ignore"):  # diverged runs reach 1e300: sums may overflow
        out = {"mean": float(np.mean(v)), "median": float(np.median(v))}
        if v.size > 1:
            out["std"] = float(np.std(v, ddof=1))
        if np.all(v >= 0):
            out["geomean"] = float(np.exp(np.mean(np.log(v))))
    return {k: x for k, x in out.items() if _finite(x)}


def median_curve(seeds: list[tuple[list[int], dict[int, tuple[float, int]]]]) -> dict[int, tuple[float, int]]:
    """The median over seeds of one curve metric, at every step of any seed: ``step -> (median, timestamp)``.

    ``seeds`` holds, per seed, the steps of its whole curve and its finite points ``step ->
    (value, timestamp)``. A seed whose curve ended before a step (a diverged run stops early)
    counts with its last value there: it stays where it stopped. A step where some seed has no
    finite value is left out (the order of the seeds is unknown there). The timestamp is the
    latest of the points the median is taken from.
    """
    out = {}
    for step in sorted({s for steps, _ in seeds for s in steps}):
        values, stamps = [], []
        for steps, points in seeds:
            if not steps:
                break
            point = points.get(step if step in steps or step < steps[-1] else steps[-1])
            if point is None:
                break
            values.append(point[0])
            stamps.append(point[1])
        else:
            if values:
                out[step] = (float(np.median(values)), max(stamps))
    return out
