"""MLflow tracking of run records: one experiment per study, group runs with their seed runs.

    experiment <study>
      group run    "<method> · <setting>/<function> [<profile>]"          top level: params, aggregates
        seed run   "<method> seed<k> · <setting>/<function> [<profile>]"  params, curves, curve.csv
      setting run  "<setting> [<profile>]"                                top level: the report's figures

Names start with the method: MLflow's tables and chart legends cut long names at the end, and
the method is what a comparison tells apart. Every run carries the tags ``sabo_bench_level``
(``group``, ``seed``, ``setting``), ``sabo_bench_profile`` and ``sabo_bench_setting``; group
and seed runs also ``sabo_bench_function``, ``sabo_bench_method``, ``sabo_bench_group_hash``,
``sabo_bench_format`` (:data:`FORMAT`) and ``sabo_bench_step = function evaluations``. A method
run on a grid in one profile (the image study's learning rates) names the grid point after the
method: ``sabo (lr=0.5, rho=100)`` (:func:`variants`). Seed runs also carry the config hash, the
record's status (``sabo_bench_status``: ``completed`` or ``diverged``, as the reports count
them), ``sabo_bench_diverged`` (:func:`decades`), the git revision of the record and, inside DVC,
the stage/experiment. A record is logged once per profile (the key is its config hash and the
profile): a config shared by two profiles appears under both, so that filtering on one profile
shows all its runs, and runs of profiles with different budgets never mix. A seed run logged by
an earlier sabo-bench (another ``sabo_bench_format``) is replaced when its record is logged again.
Every experiment is tagged ``mlflow.experimentKind = custom_model_development``: without it MLflow
3 opens run pages in its GenAI layout.

Why group runs are at the top level: MLflow's runs table nests a child run under its parent
and, when a filter matches children only, shows their parent collapsed (3.17); the filter
``tags.sabo_bench_level = 'group'`` must land on the group runs themselves.

Times (MLflow's Start and Duration): a seed run starts at the record's ``started_utc`` and ends
at its ``finished_utc`` (a resumed run's span includes the time it was interrupted); each curve
point is stamped with the wall time at which the engine recorded it (``provenance
["curve_time_unix_s"]``; records from before it have their curve stamped at ``finished_utc``);
final values, statistics and ``wall_time_s`` at ``finished_utc``. A group run starts with its
earliest seed and its Duration is the seeds' summed wall time (the compute the group cost,
whatever ran in parallel); ``wall_time_s_sum`` and ``wall_time_s_median`` say the same in seconds.

Metrics are logged against ``step = number of function evaluations`` (MLflow calls the axis
"Step"; the ``sabo_bench_step`` tag and the run and experiment descriptions say so). Beside each
error curve (:data:`DECADE_KEYS`) its decades ``<key>_log10`` are logged, clipped
:data:`CLIP_DECADES` above the run's first value (:func:`decades`): on MLflow's linear axes a
comparison in decades is readable even when one method blows up (BES reaches errors of 1e132).
The effective values a config leaves to defaults or schedules are logged too: ``popsize`` and,
for SABO, ``rho`` at every curve point (its schedule's value at that iteration). A group run
holds, over its seed runs: ``n_seeds``, ``n_diverged`` (status ``diverged``), ``n_clipped``
(``sabo_bench_diverged``); for every final metric ``final_<m>`` but the counters ``nfev`` and
``nit`` (equal in every run of a budget) its ``_mean``, ``_std`` (from two seeds with finite
values on), ``_median`` and ``_geomean`` (the geometric mean, of non-negative values only) over
the seeds where it is finite; and for every curve metric ``<m>`` the median curve
``<m>_median`` (:func:`median_curve`). The median and the geometric mean are what a comparison
can trust: one diverged seed decides the arithmetic mean alone.

A group run is a function of its seed runs: when seed runs join, the group run is written
anew (a new run with the same tags and name; the seed runs move under it, the old one is
deleted, which MLflow's UI hides). MLflow can neither delete a metric's points nor move a
run's start: logging a median curve again would add a second point at every step.
:meth:`Tracker.log_record` writes the group after each seed; a command logging a study
(``sabo-bench run``, ``track``: ``replication.cli.SafeLogger``) logs the seeds with
:meth:`Tracker.log_seed` and writes each group once, with :meth:`Tracker.regroup`, when the last
of its seeds has come (each rewrite reads every seed back: per seed, 2/3 of the logging of a
3-seed group). Until its group is written with it a seed run is tagged ``sabo_bench_grouped =
false``; a command stopped in between leaves it so, and the next one that logs its record
(the resumed run, ``track``) writes the group.

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
FORMAT = "2"  # the layout of the runs logged here: 2 added decades, effective values and method-first names
#: the curves whose decades are logged beside them (``error_log10``): distances to the optimum
DECADE_KEYS = ("error", "precision")
#: how far above its first value a run's decades are drawn; beyond, the run has blown up (BES)
CLIP_DECADES = 3.0
#: a seed run's tag: "false" from when it is logged until its group run is written anew with it
GROUPED = f"{TAG}_grouped"
#: what :meth:`Tracker.log_seed` did: logged the seed run; found it logged; found it logged with its group not written
LOGGED, PRESENT, UNGROUPED = "logged", "present", "ungrouped"
#: final values that are counters equal in every run of one budget: logged per seed, not aggregated
COUNTERS = ("final_nfev", "final_nit")
SEED_NOTE = (f"One run of one seed. Curves (`error`, `error_log10`, `f_best`, ...) are logged against Step = "
             f"{STEP}; `curve.csv` holds them with the iterations (`nit`) too. `error_log10` is clipped "
             f"{CLIP_DECADES:g} decades above its first value (tag `sabo_bench_diverged`).")
GROUP_NOTE = (f"The seed runs under this run, aggregated: `<m>_median` curves against Step = {STEP} "
              "(`error_log10_median`: the median error in decades); `final_<m>_median`, `_geomean`, `_mean`, "
              "`_std` (two finite seeds or more) over seeds; `n_seeds`, `n_diverged`, `n_clipped`; Duration and "
              "`wall_time_s_sum`: the seeds' summed wall time.")
EXPERIMENT_TAGS = {  # the description MLflow shows above the runs table, and the page layout it picks
    "mlflow.experimentKind": "custom_model_development",  # else MLflow 3 opens runs in its GenAI layout
    "mlflow.note.content": (
        f"Step = number of {STEP} in every curve of these runs. Compare methods: filter "
        "`tags.sabo_bench_level = 'group' and tags.sabo_bench_profile = '<profile>' and "
        "tags.sabo_bench_setting = '<setting>' and tags.sabo_bench_function = '<function>'`, sort by "
        "`final_error_median`, open the chart view: `error_log10_median` is the median error in decades "
        "(`sabo-bench track <study> --profile <profile> --setting <setting> --function <function> --method sabo "
        "ingo` prints the link, with only those methods)."),
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

    def __init__(self, uri: str | None = None, *, timeout: float | None = None):
        """Connect to the tracking store; raises (never hangs) if it is unusable.

        ``timeout`` (default ``SABO_BENCH_TRACKING_TIMEOUT``, else 15 s) bounds what the
        connection waits for (module docstring): another process's lock on a SQLite store, the
        whole connection to any other store. Creating or opening a SQLite store is not bounded.
        """
        # slow import: outside the deadline; and before quieting, as importing MLflow sets its loggers' levels
        from mlflow.tracking import MlflowClient

        self._open(uri, timeout, MlflowClient)

    @_quiet
    def _open(self, uri: str | None, timeout: float | None, MlflowClient) -> None:  # noqa: N803 (a class)
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
                                                   config_hash=record["config_hash"], format=FORMAT))

    @_quiet
    def log_record(self, record: dict, *, profile: str, variant: str = "") -> bool:
        """Log one record of ``profile`` and write its group run anew; returns False if it was logged under
        that profile already (its group is then written anew only if it was left :data:`UNGROUPED`).

        ``variant`` names the grid point of the method when the profile runs it on a grid
        (:func:`variants`), so that run names stay unique. A seed run of the record in an earlier
        :data:`FORMAT` is deleted and the record logged anew. A caller logging many seeds of one group
        saves the rewrites in between with :meth:`log_seed` and one :meth:`regroup`.
        """
        outcome = self.log_seed(record, profile=profile, variant=variant)
        if outcome != PRESENT:
            self.regroup(record, profile=profile, variant=variant)
        return outcome == LOGGED

    @_quiet
    def log_seed(self, record: dict, *, profile: str, variant: str = "") -> str:
        """Log the seed run of one record without writing its group run anew: :data:`LOGGED`; or
        :data:`PRESENT` if it was logged under ``profile`` already, :data:`UNGROUPED` if so but its group
        run has not been written since it joined (the process logging it stopped first).

        The seed run is tagged ``sabo_bench_grouped = false`` until :meth:`regroup` writes its group.
        """
        from mlflow.entities import Metric, Param

        config = RunConfig.from_dict(record["config"])
        with self._locked():
            exp_id = self._experiment_id(config.study)
            logged = self._find(exp_id, level="seed", profile=profile, config_hash=record["config_hash"])
            for run in logged:
                if run.data.tags.get(f"{TAG}_format") == FORMAT:
                    return UNGROUPED if run.data.tags.get(GROUPED) == "false" else PRESENT
            for old in logged:
                self.client.delete_run(old.info.run_id)
            group_tags = _group_tags(config, profile)
            _, seed_name = _names(config, profile, variant)
            start, end = _record_span(record)
            curve, clipped = _logged_curve(config, record)
            status = record["result"]["status"]
            tags = {**group_tags, f"{TAG}_level": "seed", f"{TAG}_format": FORMAT,
                    f"{TAG}_config_hash": record["config_hash"], f"{TAG}_status": status,
                    f"{TAG}_diverged": str(status == "diverged" or clipped).lower(), GROUPED: "false",
                    "mlflow.note.content": SEED_NOTE, "git_revision": str(record["provenance"].get("git_revision"))}
            for env, tag in (("DVC_STAGE", "dvc_stage"), ("DVC_EXP_NAME", "dvc_exp_name"),
                             ("DVC_EXP_BASELINE_REV", "dvc_exp_baseline_rev")):
                if os.environ.get(env):
                    tags[tag] = os.environ[env]
            run_id = self.client.create_run(exp_id, start_time=start, tags=tags, run_name=seed_name).info.run_id
            stamps = _curve_stamps(record, end)
            metrics = [Metric(key, float(value), stamp, int(step))
                       for key in curve if key != "nfev"
                       for value, step, stamp in zip(curve[key], curve["nfev"], stamps) if _finite(value)]
            finals = {f"final_{k}": v for k, v in record["result"]["final"].items()}
            for key in DECADE_KEYS:  # the last point of the decades curve: clipped as it is
                if key in record["result"]["final"] and curve[f"{key}_log10"]:
                    finals[f"final_{key}_log10"] = curve[f"{key}_log10"][-1]
            finals |= {f"final_eval_{k}": v for k, v in record["result"].get("final_evaluation", {}).items()}
            finals["wall_time_s"] = record["provenance"]["wall_time_s"]
            popsize = effective_popsize(config)
            if popsize is not None:
                finals["popsize"] = popsize
            finals |= {f"stats_{k}": v for k, v in record["result"]["stats"].items()}
            metrics += [Metric(k, float(v), end, 0) for k, v in finals.items() if _finite(v)]
            params = flatten("", {k: v for k, v in config.to_dict().items() if k != "seed"}, {})
            all_params = [Param(k, str(v)[:6000]) for k, v in {**params, "seed": config.seed}.items()]
            self._log_batches(run_id, metrics, all_params)
            self._log_curve_artifact(run_id, record["result"]["curve"])
            # a diverged run finished what it was asked: its status is a result (tags), not a failure of the run
            self.client.set_terminated(run_id, end_time=end, status="FINISHED")
            return LOGGED

    @_quiet
    def regroup(self, record: dict, *, profile: str, variant: str = "") -> None:
        """Write the group run of ``record``'s group (under ``profile``) anew from the seed runs logged."""
        config = RunConfig.from_dict(record["config"])
        curve, _ = _logged_curve(config, record)
        group_name, _ = _names(config, profile, variant)
        params = flatten("", {k: v for k, v in config.to_dict().items() if k != "seed"}, {})
        with self._locked():
            self._rewrite_group(self._experiment_id(config.study), _group_tags(config, profile), group_name, params,
                                [k for k in curve if k not in ("nit", "nfev")])

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
        from mlflow.entities import Metric, Param, RunTag

        old = self._search(exp_id, {**group_tags, f"{TAG}_level": "group"})
        seeds = self._search(exp_id, {**group_tags, f"{TAG}_level": "seed", f"{TAG}_format": FORMAT})
        start = min(r.info.start_time for r in seeds)
        wall = [r.data.metrics.get("wall_time_s", 0.0) for r in seeds]
        end = start + round(1000 * sum(wall))  # Duration: the seeds' summed wall time
        metrics = [Metric("n_seeds", float(len(seeds)), end, 0),
                   Metric("n_diverged", float(sum(r.data.tags.get(f"{TAG}_status") == "diverged" for r in seeds)),
                          end, 0),
                   Metric("n_clipped", float(sum(r.data.tags.get(f"{TAG}_diverged") == "true" for r in seeds)), end, 0),
                   Metric("wall_time_s_sum", float(sum(wall)), end, 0),
                   Metric("wall_time_s_median", float(np.median(wall)), end, 0)]
        if all("popsize" in r.data.metrics for r in seeds):
            metrics.append(Metric("popsize", float(np.median([r.data.metrics["popsize"] for r in seeds])), end, 0))
        finals: dict[str, list[float]] = {}
        for seed in seeds:
            for key, value in seed.data.metrics.items():
                if key.startswith("final_") and key not in COUNTERS:
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
        tags = {**group_tags, f"{TAG}_level": "group", f"{TAG}_format": FORMAT, "mlflow.note.content": GROUP_NOTE}
        group_id = self.client.create_run(exp_id, start_time=start, tags=tags, run_name=name).info.run_id
        self._log_batches(group_id, metrics, [Param(k, str(v)[:6000]) for k, v in params.items()])
        self.client.set_terminated(group_id, end_time=end)
        for seed in seeds:
            self.client.log_batch(seed.info.run_id,
                                  tags=[RunTag("mlflow.parentRunId", group_id), RunTag(GROUPED, "true")])
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
                       methods: list[str] | None = None, others: list[str] = (), ui: str = DEFAULT_UI) -> str | None:
        """The MLflow UI page comparing the methods: the group runs of ``profile`` (one setting and
        function if given; only ``methods`` if given), as charts (``<m>_median`` per method against
        evaluations), sorted by ``final_error_median`` where the runs have it; None if ``study`` has
        no experiment.

        MLflow's filters have no OR and no IN for tags: ``methods`` is selected by excluding, one
        ``!=`` clause each in sorted order, the ``others`` (the profile's other methods, logged or
        not yet, so that the filter is the same whatever was logged) and any other method the
        experiment holds there (:func:`comparison_filter`).
        """
        exp = self.client.get_experiment_by_name(study)
        if exp is None:
            return None
        tags = {"level": "group", "profile": profile, "setting": setting, "function": function}
        query = " and ".join(_tag_clause(f"{TAG}_{k}", v) for k, v in tags.items() if v is not None)
        if methods:
            present = {r.data.tags.get(f"{TAG}_method") for r in self._search(
                exp.experiment_id, {f"{TAG}_{k}": v for k, v in tags.items() if v is not None})}
            query = comparison_filter(query, sorted((present | set(others)) - set(methods) - {None}))
        state = {"workflowType": "machine_learning", "compareRunsMode": "CHART", "searchFilter": query}
        sample = self.client.search_runs([exp.experiment_id], filter_string=query, max_results=1)
        if sample and "final_error_median" in sample[0].data.metrics:
            state |= {"orderByKey": "metrics.`final_error_median`", "orderByAsc": "true"}
        query_string = urllib.parse.urlencode(state, quote_via=urllib.parse.quote)
        return f"{ui.rstrip('/')}/#/experiments/{exp.experiment_id}/runs?{query_string}"


def comparison_filter(query: str, excluded: list[str]) -> str:
    """``query`` and one ``tags.sabo_bench_method != '<m>'`` clause per excluded method."""
    return " and ".join([query, *(f"tags.{TAG}_method != '{m}'" for m in excluded
                                  if not any(c in m for c in _UNQUOTABLE))])


# ---------------------------------------------------------------------- names, times, aggregates
def _logged_curve(config: RunConfig, record: dict) -> tuple[dict, bool]:
    """``(curves, clipped)``: the record's curves as logged -- with the decades of :data:`DECADE_KEYS` and, for
    SABO, the effective rho -- and whether a decades curve was clipped."""
    curve, clipped = {**record["result"]["curve"]}, False
    for key in DECADE_KEYS:
        if key in curve:
            curve[f"{key}_log10"], over = decades(curve[key])
            clipped |= over
    rho = effective_rho(config, curve["nit"])
    if rho is not None:
        curve["rho"] = rho
    return curve, clipped


def _group_tags(config: RunConfig, profile: str) -> dict:
    """The tags that identify a group run, and that its seed runs share."""
    return {f"{TAG}_{k}": str(v) for k, v in (
        ("profile", profile), ("setting", config.setting), ("function", config.problem.get("name", "problem")),
        ("method", config.method), ("group_hash", config.group_hash), ("step", STEP))}


def _names(config: RunConfig, profile: str, variant: str) -> tuple[str, str]:
    """The names of the group run and of the seed run of ``config``: the method first (module docstring)."""
    method = f"{config.method} ({variant})" if variant else config.method
    where = f"{config.setting}/{config.problem.get('name', 'problem')} [{profile}]"
    return f"{method} · {where}", f"{method} seed{config.seed} · {where}"


def decades(values) -> tuple[list[float], bool]:
    """``(log10 of values, whether any was clipped)``: each value's decade, at most :data:`CLIP_DECADES`
    above the decade of the first positive finite value.

    An error that overflowed (inf, the end of a diverged run) is drawn at the ceiling; zero has no
    decade and a NaN no value: both are left to MLflow as missing (``nan``, not logged).
    """
    v = np.asarray(values, dtype=np.float64)
    with np.errstate(divide="ignore", invalid="ignore"):
        logs = np.where(v > 0, np.log10(np.where(v > 0, v, 1.0)), np.nan)
    logs[np.isposinf(v)] = np.inf
    finite = logs[np.isfinite(logs)]
    if finite.size == 0:
        return [float(x) for x in np.where(np.isposinf(logs), np.nan, logs)], False
    ceiling = finite[0] + CLIP_DECADES
    over = logs > ceiling
    return [float(x) for x in np.where(over, ceiling, logs)], bool(over.any())


def effective_popsize(config: RunConfig) -> int | None:
    """The population size the run used: ``params.popsize``, else its class's default at the problem's
    ``dim``; None where neither is known here (a method not installed, a problem without ``dim``)."""
    from .costs import optimizer_popsize
    from .errors import UsageError

    if config.params.get("popsize") is None and config.problem.get("dim") is None:
        return None
    try:
        return optimizer_popsize(config, config.problem.get("dim"))
    except (ValueError, UsageError):
        return None


def effective_rho(config: RunConfig, nits) -> list[float] | None:
    """SABO's rho_t at each iteration ``nits`` from its config (the schedule, or the default
    0.05 sqrt(d)); None for other methods, or where the default needs a ``dim`` the problem lacks."""
    from sabo import SABO
    from sabo.sabo import DEFAULT_RHO_SCALE
    from sabo.schedules import as_schedule

    from .costs import optimizer_class

    try:
        if not issubclass(optimizer_class(config), SABO):
            return None
    except ValueError:  # a plug-in that is not installed here
        return None
    rho = config.params.get("rho")
    if rho is None:
        if config.problem.get("dim") is None:
            return None
        rho = DEFAULT_RHO_SCALE * float(np.sqrt(config.problem["dim"]))
    schedule = as_schedule("rho", rho)
    return [float(schedule(int(t))) for t in nits]


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
