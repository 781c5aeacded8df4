"""sabo-bench: run the paper's studies, list their runs, and regenerate their reports.

Typical use (from the repository root, where params.yaml lives):

    sabo-bench prepare image                         # data and cached features, where a study has them
    sabo-bench run synthetic --workers 2            # every run of the active profile
    sabo-bench run synthetic --profile quick         # the preview (the bo extra; 18-23 min on 2 cores)
    sabo-bench run-one synthetic --setting d200_N50 --function levy --method sabo --seed 0
    sabo-bench list synthetic                        # completed, diverged, corrupt, partial, pending runs
    sabo-bench run synthetic --profile ci --method my_method --compare-with results/ci/synthetic_runs.parquet
                                                     # only my_method's runs, reported beside the committed baselines
    sabo-bench status                                # every study: runs recorded, running, ETA (read-only)
    sabo-bench report synthetic                      # tables, figures and claim verdicts -> results/
    sabo-bench report synthetic --profile quick --out results/quick   # a preview beside the full report
    sabo-bench report synthetic --from-table results/synthetic_runs.parquet   # from the committed run table
    sabo-bench track synthetic                       # log to MLflow the finished records it lacks

Runs are idempotent (finished ones are skipped) and resumable (an interrupted run continues
from its last checkpoint). Records go to runs/<study>/<setting>/<method>/<config-hash>.json
and, unless --no-track, to MLflow (MLFLOW_TRACKING_URI, default sqlite:///mlflow.db;
browse with `mlflow ui`). MLflow being unavailable is a warning, never a failed study;
`sabo-bench track` logs the missing records later.

A report writes, beside its page, figures and claims file, the run table it was made from
(``<REPORT_NAME>_runs.parquet``, :mod:`replication.table`), its DVC metrics
(``<REPORT_NAME>_metrics.json``) and, where the study plots curves, the curves behind its figures
(``<REPORT_NAME>_curves.csv``, :mod:`replication.outcomes`).
"""
from __future__ import annotations

import argparse
import collections
import inspect
import os
import shlex
import signal
import sys
import threading
import time
from pathlib import Path

from . import startup, stopping  # startup first: a Ctrl-C during the imports below is one line
from .arguments import ArgumentParser, directory, positive_int, positive_seconds, seed_int
from .engine import RUN_STATUSES, execute, load_record, record_status
from .errors import ResourceUnavailable, RunFailed, RunsFailed, UsageError, file_problem, one_line
from .executors import EXECUTORS, default_workers, one_thread, run_configs
from .names import natural_order
from .progress import PROGRESS_MODES, clock
from .storage import quarantined_files
from .studies import STUDIES, get_study, optional_hook
from .studies import select as select_configs


def load_params(path: str, study: str, profile: str | None) -> dict:
    """The parameter file, with ``study``'s section validated against its schema (``--profile`` applied).

    Any problem is a :class:`UsageError` with one line per problem, naming the key, its value and
    what is allowed (``replication.params``); nothing runs on an invalid file.
    """
    from .params import read_params, validate_params

    params = read_params(path)
    section = params.get(study)
    if profile is not None and isinstance(section, dict):
        profiles = section.get("profiles")
        if isinstance(profiles, dict) and profile not in profiles:
            raise UsageError(f"--profile {profile!r}: {path} has no profile {profile!r} under {study}.profiles "
                             f"(profiles: {', '.join(map(str, profiles))})")
        params[study] = {**section, "profile": profile}
    validate_params(params, source=path, studies=[study])
    return params


def select(args) -> tuple[dict, list]:
    """The validated parameters and the runs of the active profile that the command's selection options keep."""
    from .params import selectable

    study = get_study(args.study)
    params = load_params(args.params, args.study, args.profile)
    known = selectable(args.study, params[args.study])
    for option in ("setting", "method", "function"):
        for name in getattr(args, option) or ():
            if name not in known[option]:
                raise UsageError(f"--{option} {name!r}: study {args.study!r} has no {option} {name!r} in "
                                 f"{args.params} (known: {', '.join(natural_order(known[option]))})")
    configs = select_configs(study.configs(params), settings=args.setting, methods=args.method, seeds=args.seed,
                             functions=args.function, hashes=args.hash)
    unknown = sorted(set(args.hash or ()) - {c.hash for c in configs})
    if unknown:
        raise UsageError(f"--hash {unknown[0]!r}: no run of profile {params[args.study]['profile']!r} in the "
                         "selection has this config hash (`sabo-bench list` prints each run's hash first)")
    return params, configs


#: What a stopped command leaves, by command (the rest compute runs).
STOPPED = {
    "run": "finished runs are recorded, interrupted ones checkpointed (a run that writes files of its own, as "
           "the BBOB study's, restarts instead); run the same command again to resume",
    "report": "the report is incomplete (some of its files may be new, others old); run the same command again "
              "to rewrite them all",
    "list": "nothing was changed", "status": "nothing was changed",
    "prepare": "run the same command again to finish the preparation",
    "track": "the runs logged so far stay logged; run the same command again to log the rest",
}


def add_common(p: argparse.ArgumentParser, *, selection: bool = True) -> None:
    p.add_argument("study", choices=sorted(STUDIES), help="which study of the paper")
    p.add_argument("--params", default="params.yaml", help="parameter file (default: %(default)s)")
    p.add_argument("--profile", help="override the study's profile from the parameter file (e.g. full, quick, ci)")
    p.add_argument("--runs-dir", default="runs", type=directory,
                   help="where run records and checkpoints live (default: %(default)s)")
    if selection:
        # "extend": `--method sabo --method ingo` selects both, as `--method sabo ingo` does
        p.add_argument("--setting", nargs="+", action="extend", help="only these settings (e.g. d200_N50)")
        p.add_argument("--method", nargs="+", action="extend", help="only these methods (sabo ingo bes cmaes mmes)")
        p.add_argument("--function", nargs="+", action="extend", help="only these problems (e.g. ellipsoid levy)")
        p.add_argument("--seed", nargs="+", action="extend", type=seed_int, help="only these seeds")
        p.add_argument("--hash", nargs="+", action="extend", metavar="CONFIG_HASH",
                       help="only the runs with these config hashes (the first column of `sabo-bench list`)")


def _reason(exc: BaseException) -> str:
    """An exception as one short line (MLflow's messages run over several lines)."""
    exc = getattr(exc, "orig", None) or exc  # SQLAlchemy wraps the database's own error (and adds the SQL)
    return f"{type(exc).__name__}: {one_line(exc, 200) or 'no message'}"


def _study_words(args, command: str) -> list[str]:
    """``sabo-bench COMMAND STUDY`` with this command's parameter file, profile and runs directory where not the
    defaults."""
    words = ["sabo-bench", command, args.study]
    for option, default in (("profile", None), ("params", "params.yaml"), ("runs_dir", "runs")):
        value = getattr(args, option, default)
        if value is not None and value != default:
            words += [f"--{option.replace('_', '-')}", str(value)]
    return words


def track_command(args) -> str:
    """The `sabo-bench track` command that logs later what this command could not log now."""
    return " ".join(_study_words(args, "track"))


def _log_later(args) -> str:
    if getattr(args, "command", None) == "report":
        return f"rerun `sabo-bench report {args.study}` once MLflow works to attach its figures"
    return f"the records are on disk: log them later with `{track_command(args)}`"


def make_tracker(args):
    """A Tracker, or None with --no-track or when MLflow is unavailable.

    Tracking never stops a study: a store that cannot be opened (a locked or corrupt database,
    an unwritable path, an unknown URI scheme, a server that does not answer within
    SABO_BENCH_TRACKING_TIMEOUT seconds, mlflow not installed) is one warning line on stderr,
    and the command goes on without tracking.
    """
    if args.no_track:
        return None
    from .tracking import tracking_uri

    try:
        from .tracking import Tracker

        return Tracker()
    except Exception as exc:  # whatever MLflow raises, the study goes on
        print(f"warning: MLflow tracking is off for this command ({tracking_uri()}: {_reason(exc)}); "
              f"{_log_later(args)}", file=sys.stderr)
        return None


class SafeLogger:
    """Log records (and report figures) to MLflow without letting a tracking failure stop the study.

    Records are on disk already; a record that failed to log is logged later by
    ``sabo-bench track`` (logging is idempotent). Each failure is a warning line; after
    ``MAX_FAILURES_IN_A_ROW`` failures in a row the tracker counts as dead and the remaining
    records are not tried (each try may wait for a lock or a server). Exit status: failures to
    log do NOT change it (a study whose runs finished exits 0) -- tracking must never fail a
    study; ``summarize()`` prints one warning line with the count and the command that logs
    them later.
    """

    MAX_FAILURES_IN_A_ROW = 3

    def __init__(self, tracker, later: str | None = None, *, profile: str, configs=()):
        """``profile``: the profile the records are logged under; ``configs``: all runs of that
        profile, whose method grids name the runs (:func:`replication.tracking.variants`)."""
        self.tracker, self.failures, self._in_a_row = tracker, 0, 0
        self.later = later or "log them later with `sabo-bench track STUDY`"
        self.profile = profile
        if configs:
            from .tracking import variants

            self.variants = variants(configs)
        else:
            self.variants = {}
        # a group run is written once, when its last seed among ``configs`` has been seen (or at flush): writing
        # it anew at every seed read back every seed's curves each time (2/3 of the logging of a 3-seed group)
        self._seeds = collections.Counter(c.group_hash for c in configs)
        self._seen: collections.Counter = collections.Counter()
        self._unwritten: dict[str, tuple[dict, str]] = {}  # group hash -> a record of it, its variant

    def _attempt(self, what: str, call):
        if self._in_a_row >= self.MAX_FAILURES_IN_A_ROW:
            self.failures += 1
            return None
        try:
            result = call()
        except Exception as exc:  # any tracking error is reported, the runs go on
            self.failures += 1
            self._in_a_row += 1
            dead = self._in_a_row >= self.MAX_FAILURES_IN_A_ROW
            print(f"warning: MLflow logging of {what} failed ({_reason(exc)})"
                  f"{'; MLflow is off for the rest of this command' if dead else ''}", file=sys.stderr)
            return None
        self._in_a_row = 0
        return result

    def __call__(self, record: dict):
        """Log one record: True if logged, False if MLflow had it already, None if it failed.

        Its group run is written when the last seed of the group among ``configs`` has been seen here,
        else by :meth:`flush`; a seed run whose group was never written (the process stopped first) is
        found again the next time its record comes here, and its group written then."""
        from .tracking import LOGGED, UNGROUPED

        group = record.get("group_hash")  # the engine writes the group hash
        variant = self.variants.get(group, "")
        outcome = self._attempt(record["config_hash"],
                                lambda: self.tracker.log_seed(record, profile=self.profile, variant=variant))
        if outcome in (LOGGED, UNGROUPED):
            self._unwritten[group] = (record, variant)
        self._seen[group] += 1
        if self._seen[group] >= self._seeds[group]:
            self._write_group(group)
        return None if outcome is None else outcome == LOGGED

    def _write_group(self, group) -> None:
        if group in self._unwritten:
            record, variant = self._unwritten.pop(group)
            self._attempt(f"the group run of {record['config_hash']}",
                          lambda: self.tracker.regroup(record, profile=self.profile, variant=variant))

    def flush(self) -> None:
        """Write the group runs still owed: groups not every seed of which came here (failed or unselected runs)."""
        for group in list(self._unwritten):
            self._write_group(group)

    def log_setting_artifacts(self, study: str, setting: str, paths) -> None:
        self._attempt(f"the figures of {study}/{setting}",
                      lambda: self.tracker.log_setting_artifacts(study, setting, paths, profile=self.profile))

    def comparison_url(self, study: str, **kwargs) -> str | None:
        """The MLflow UI page comparing the methods of ``study`` (``Tracker.comparison_url``), or None."""
        return self._attempt("the comparison page",
                             lambda: self.tracker.comparison_url(study, self.profile, **kwargs))

    def summarize(self, what: str = "records") -> None:
        """One warning line if anything failed to log."""
        if self.failures:
            print(f"warning: {self.failures} {what} could not be logged to MLflow; {self.later}", file=sys.stderr)


class InBackground:
    """``fn(*args)`` computed in a daemon thread from now on; :meth:`get` waits for it (and raises what it raised).

    For MLflow's import and store (2-3 s a command): a run stage's workers start meanwhile, where each
    stage of ``dvc repro`` used to wait for both one after the other."""

    def __init__(self, fn, *args):
        self._done = threading.Event()
        self._value = self._error = None

        def work():
            try:
                self._value = fn(*args)
            except BaseException as exc:  # handed to the caller of get(), in its thread
                self._error = exc
            finally:
                self._done.set()

        threading.Thread(target=work, name=f"sabo-bench-{fn.__name__}", daemon=True).start()

    def get(self):
        self._done.wait()
        if self._error is not None:
            raise self._error
        return self._value


def make_logger(args, params: dict, later: str | None = None) -> SafeLogger | None:
    """A :class:`SafeLogger` for the profile of ``params``, or None when tracking is off."""
    tracker = make_tracker(args)
    if tracker is None:
        return None
    return SafeLogger(tracker, later or _log_later(args), profile=params[args.study]["profile"],
                      configs=get_study(args.study).configs(params))


def make_runs_dir(args) -> None:
    """``<runs-dir>/<study>``, or one line saying why it cannot be made (``/proc/x``, a read-only place)."""
    path = Path(args.runs_dir, args.study)
    try:
        path.mkdir(parents=True, exist_ok=True)
    except OSError as exc:
        raise UsageError(f"--runs-dir {args.runs_dir!r}: cannot create {str(path)!r} ({exc.strerror or exc})") from None


def comparison_out(args, profile: str) -> Path:
    """Where ``run --compare-with`` writes its report: ``--compare-out``, else
    ``comparisons/<study>_<profile>_<methods>``."""
    if args.compare_out is not None:
        return Path(args.compare_out)
    return Path("comparisons", "_".join([args.study, profile, *sorted(set(args.method))]))


def comparison_command(args) -> str:
    """The `sabo-bench run ... --compare-with` command of ``args``, as a comparison's page quotes it."""
    words = ["sabo-bench", "run", args.study]
    for option, default in (("params", "params.yaml"), ("profile", None), ("runs_dir", "runs")):
        value = getattr(args, option)
        if value is not None and value != default:
            words += [f"--{option.replace('_', '-')}", str(value)]
    for option in ("setting", "function", "seed", "method"):
        if getattr(args, option):
            words += [f"--{option}", *map(str, getattr(args, option))]
    words += ["--compare-with", args.compare_with]
    if args.compare_out is not None:
        words += ["--compare-out", args.compare_out]
    return " ".join(words)


def comparison_baseline(args, params: dict) -> tuple[list, object]:
    """The runs ``run --compare-with TABLE`` takes from the table (the profile's runs of the other methods at the
    selected settings, functions and seeds) and the table's :class:`~replication.committed.Coverage` of them.

    Refused in one line (:class:`UsageError`), before anything runs, unless the table holds every one of them
    with the config and code version this code would run (same config hash)."""
    table, profile = args.compare_with, params[args.study]["profile"]
    if not args.method:
        raise UsageError(f"--compare-with {table!r} needs --method: the methods to run here (the other methods' "
                         "records come from the table)")
    if args.hash:
        raise UsageError("--compare-with compares whole methods: select with --setting/--function/--seed/--method, "
                         "not --hash")
    out = comparison_out(args, profile)
    if out.resolve() == Path(table).resolve().parent:
        raise UsageError(f"--compare-out {str(out)!r}: the directory of the table compared with ({table}), whose "
                         "report the comparison would replace; name another")
    every = get_study(args.study).configs(params)
    baseline = [c for c in select_configs(every, settings=args.setting, functions=args.function, seeds=args.seed)
                if c.method not in set(args.method)]
    if not baseline:
        raise UsageError(f"--compare-with {table!r}: --method selects every method of profile {profile!r}, so "
                         "nothing would come from the table; name only the methods to run here")
    committed = committed_coverage(table, baseline, "--compare-with")
    if committed.missing:
        shown = committed.reasons[0] + (f"; {len(committed.reasons) - 1} more reason(s)" if len(committed.reasons) > 1
                                        else "")
        raise UsageError(
            f"--compare-with {table!r}: it lacks {len(committed.missing)} of the {len(baseline)} runs of the other "
            f"methods that profile {profile!r} of this code runs ({shown}); a comparison takes only records of the "
            f"same configs and code version: allowed are a run table that `sabo-bench report {args.study} --profile "
            f"{profile}` wrote from records of this code (after `sabo-bench run {args.study} --profile {profile}`), "
            "or those methods added to --method to compute them here")
    return baseline, committed


def write_comparison(args, params: dict, configs: list, baseline: list, committed) -> int:
    """The report of the selected runs (computed here) beside the baselines' records from the table, with a
    section naming where each method's records come from (:func:`replication.committed.sources_section`)."""
    from .committed import sources_section, write_sources

    study, profile = get_study(args.study), params[args.study]["profile"]
    computed = {c.hash: load_record(args.runs_dir, c) for c in configs}
    lost = [c.label for c in configs if computed[c.hash] is None]
    if lost:  # moved or damaged since the run finished
        print(f"error: {len(lost)} records of the runs just made are unusable (e.g. {lost[0]}); run the same command "
              "again", file=sys.stderr)
        return 1
    order = [*baseline, *configs]
    ranks = {c.hash: i for i, c in enumerate(get_study(args.study).configs(params))}
    order.sort(key=lambda c: ranks[c.hash])  # the profile's order, as a report of the whole profile has it
    records = [computed.get(c.hash) or committed.records[c.hash] for c in order]
    out = comparison_out(args, profile)
    out.mkdir(parents=True, exist_ok=True)
    write_report_files(study, params, records, out, profile=profile, runs=len(order), runs_dir=None)
    command, page = comparison_command(args), Path(out, f"{study.REPORT_NAME}.md")
    section = sources_section(committed, computed=configs, records=computed, baseline=baseline,
                              runs_dir=Path(args.runs_dir, args.study), command=command,
                              report_name=study.REPORT_NAME)
    with open(page, "a", encoding="utf-8") as fh:
        fh.write("\n" + section)
    sources = write_sources(out, study.REPORT_NAME, committed, computed=configs, baseline=baseline, command=command)
    print(f"wrote {sources}")
    methods = ", ".join(sorted(set(args.method)))
    print(f"compared {methods} ({len(configs)} runs computed here) with {len(baseline)} runs of the other methods from "
          f"{committed.path}: {page}")
    return 0


def cmd_run(args) -> int:
    params, configs = select(args)
    baseline = committed = None
    if args.compare_out is not None and args.compare_with is None:
        raise UsageError(f"--compare-out {args.compare_out!r}: only with --compare-with (where a comparison goes)")
    if args.compare_with is not None:  # refused before anything runs
        baseline, committed = comparison_baseline(args, params)
    if not configs:
        if args.allow_empty:
            # a DVC stage's output exists even when its profile runs nothing there: runs/<study>, and
            # runs/<study>/<setting>/<method> for each setting and method selected by name
            Path(args.runs_dir, args.study).mkdir(parents=True, exist_ok=True)
            for setting in args.setting or ():
                for method in args.method or ():
                    Path(args.runs_dir, args.study, setting, method).mkdir(parents=True, exist_ok=True)
            print(f"profile {params[args.study]['profile']!r} of study {args.study!r} has no run matching the "
                  "selection: nothing to do")
            return 0
        raise UsageError(f"no run of profile {params[args.study]['profile']!r} of study {args.study!r} matches the "
                         "selection (--allow-empty makes that exit 0, e.g. for a pipeline stage)")
    make_runs_dir(args)
    later = InBackground(make_logger, args, params)  # MLflow's import and store: seconds, while the workers start

    def on_record(record: dict) -> None:
        if (logger := later.get()) is not None:
            logger(record)

    workers = args.workers if args.workers is not None else default_workers(configs)
    mode = args.progress or ("none" if args.quiet else "bar" if sys.stderr.isatty() else "lines")
    try:
        records, failures = run_configs(configs, args.runs_dir, workers=workers, executor=args.executor,
                                        on_record=on_record, progress=mode, checkpoint_every_s=args.checkpoint_every,
                                        keep_going=args.keep_going, label=run_label(args),
                                        calibration=calibration(args, params, configs) if mode != "none" else ()), []
    except RunsFailed as exc:  # --keep-going: the other runs finished
        records, failures = exc.records, exc.failures
    except Exception:  # a failed run: the groups of the runs logged are written first; a stop writes none
        if (logger := later.get()) is not None:
            logger.flush()
        raise
    logger = later.get()
    diverged = sum(r["result"]["status"] == "diverged" for r in records)
    print(f"{len(records)} runs finished ({diverged} diverged) under {args.runs_dir}/{args.study}")
    if logger is not None:
        logger.flush()
        logger.summarize()  # a warning, exit status unchanged: tracking never fails a study
    for line in failures:
        print(f"error: {line}", file=sys.stderr)
    if failures:
        print(f"error: {len(failures)} of {len(configs)} runs failed (above, each with its traceback file); the others "
              "are recorded: run the same command again to retry the failed ones", file=sys.stderr)
        return 1
    if baseline is not None:
        return write_comparison(args, params, configs, baseline, committed)
    return 0


def run_label(args) -> str:
    """What the progress lines of ``sabo-bench run`` start with: the study and the selection by setting and method
    (under ``dvc repro``, the stage: ``synthetic d200_N50 cmaes``)."""
    return " ".join([args.study, *(args.setting or ()), *(args.method or ())])


def calibration(args, params: dict, configs) -> list[dict]:
    """The finished records of the profile's runs outside the selection (the pipeline's other stages of the
    study): their times calibrate the ETA before the selection's first run ends."""
    selected = {c.hash for c in configs}
    others = (c for c in get_study(args.study).configs(params) if c.hash not in selected)
    return [r for r in (load_record(args.runs_dir, c) for c in others) if r is not None]


def cmd_status(args) -> int:
    """Every study's of the parameter file (or the named ones') runs recorded / total, running runs and ETA;
    nothing is changed."""
    from .params import read_params
    from .status import pipeline_status

    names = args.study or [name for name in STUDIES if name in read_params(args.params)]
    unknown = [name for name in names if name not in STUDIES]
    if unknown:
        raise UsageError(f"study {unknown[0]!r}: no such study (studies: {', '.join(sorted(STUDIES))})")
    if args.profile is not None and len(names) != 1:
        raise UsageError(f"--profile {args.profile!r}: name one study with it (the others have profiles of their own)")
    studies = {}
    for name in names:
        params = load_params(args.params, name, args.profile)
        studies[name] = (params[name]["profile"], get_study(name).configs(params))
    statuses = pipeline_status(studies, args.runs_dir, workers=args.workers)
    for status in statuses:
        for line in status.lines():
            print(line)
    left = [s for s in statuses if s.recorded < s.total]
    recorded, total = sum(s.recorded for s in statuses), sum(s.total for s in statuses)
    if not left:
        print(f"all: {recorded}/{total} runs recorded")
    elif any(s.seconds_left is None for s in left):
        print(f"all: {recorded}/{total} runs recorded; ETA unknown until a run has finished or written a checkpoint")
    else:
        seconds = sum(s.seconds_left for s in left)
        ends = time.strftime("%H:%M", time.localtime(time.time() + seconds))
        print(f"all: {recorded}/{total} runs recorded; ETA {clock(round(seconds))} (about {ends}) on {args.workers} "
              "workers, one stage (setting, method) after another as `dvc repro` runs them; report stages not "
              "counted")
    return 0


def cmd_run_one(args) -> int:
    params, configs = select(args)
    if len(configs) != 1:
        labels = ", ".join(c.label for c in configs[:8])
        raise UsageError(f"the selection matches {len(configs)} runs ({labels}{', ...' if len(configs) > 8 else ''}); "
                         "narrow it with --setting/--function/--method/--seed, or --hash (`sabo-bench list`), to "
                         "exactly one")
    from tqdm.auto import tqdm

    make_runs_dir(args)
    one_thread()  # as in the executors' workers: the record does not depend on how it was run (until exit)
    config = configs[0]
    # closed however execute ends, so that a stop's message starts on a line of its own
    evaluations = "max_evals" in config.budget  # execute then reports evaluations, not iterations
    with tqdm(total=config.budget.get("max_evals" if evaluations else "max_iter"), desc=config.label,
              unit="evals" if evaluations else "it", disable=args.quiet) as bar:
        def progress(done, _total):
            bar.update(done - bar.n)

        record = execute(config, args.runs_dir, checkpoint_every_s=args.checkpoint_every, progress=progress)
    logger = make_logger(args, params)
    if logger is not None:
        logger(record)
        logger.flush()
        logger.summarize()
    final = record["result"]["final"]
    print(f"{config.label}: {record['result']['status']}, " + ", ".join(f"{k} = {v:.4g}" for k, v in final.items()))
    return 0


def committed_coverage(path, configs, option: str):
    """:func:`replication.committed.coverage` of the run table ``path``, a bad table one line naming ``option``."""
    from .committed import coverage

    try:
        return coverage(path, configs)
    except ValueError as exc:
        raise UsageError(f"{option} {str(path)!r}: {one_line(exc)}") from None


def list_table(args, params: dict) -> Path | None:
    """The run table `sabo-bench list` counts: ``--table``, else (unless ``--no-table``) the committed one of the
    profile beside the parameter file (:func:`replication.committed.default_table`)."""
    if args.no_table:
        return None
    if args.table is not None:
        return Path(args.table)
    from .committed import default_table

    return default_table(args.params, get_study(args.study).REPORT_NAME, params[args.study]["profile"])


def cmd_list(args) -> int:
    params, configs = select(args)
    table = list_table(args, params)
    committed = committed_coverage(table, configs, "--table") if table is not None else None
    counts: dict[str, int] = {}
    local = only_in_table = 0
    details = {"partial": "checkpoint present",
               "corrupt": "unusable record: the next run moves it aside and recomputes it"}
    for c in configs:
        record = load_record(args.runs_dir, c)
        where = ""
        if record is not None:
            local += 1
        elif committed is not None and c.hash in committed.records:
            record, where = committed.records[c.hash], f"only in {table}; "
            only_in_table += 1
        status = record["result"]["status"] if record else record_status(args.runs_dir, c)
        detail = f"{where}wall {record['provenance']['wall_time_s']:.1f}s" if record else details.get(status, "")
        counts[status] = counts.get(status, 0) + 1
        if not args.summary:
            print(f"{c.hash}  {status:<9} {c.label:<48} {detail}")
    print(", ".join(f"{n} {s}" for s, n in sorted(counts.items())) or "no runs")
    if committed is not None:
        without = len(configs) - local - only_in_table
        print(f"{len(committed.records)} of {len(configs)} in {table} (committed run table); {local} recorded under "
              f"{args.runs_dir}/{args.study}; {only_in_table} only in the table; {without} with no record "
              f"(`sabo-bench run` computes them)")
        for line in committed.reasons:
            print(f"  not in the table: {line}")
    moved = quarantined_files(Path(args.runs_dir, args.study))
    if moved:
        print(f"{len(moved)} quarantined files (unusable records or checkpoints moved aside; inspect or delete):")
        for path in moved:
            print(f"  {path}")
    return 0


def cmd_prepare(args) -> int:
    prepare = optional_hook(get_study(args.study), "prepare")
    if prepare is None:
        print(f"study {args.study!r} needs no data preparation")
        return 0
    options = {name: True for name in ("refit", "ship") if getattr(args, name)}
    if options and "refit" not in inspect.signature(prepare).parameters:
        raise UsageError(f"study {args.study!r} has nothing to refit: --refit and --ship are the image study's")
    for line in prepare(load_params(args.params, args.study, args.profile), **options):
        print(line)
    return 0


def report_refusal(args, study, profile: str, records: int, runs: int) -> str | None:
    """Why this report must not be written to ``--out`` (one line), or None.

    A profile whose runs have no record yet gives no report at all (a profile that defines no
    run, like the prompt study's offline one, still does: its page shows the paper's numbers).
    A report that would replace a fuller one in ``--out`` (another profile, or fewer records:
    :func:`replication.claims.replacement_refusal`) is refused unless ``--force``: the committed
    results/ must not turn into a preview by accident.
    """
    if runs and not records:
        if args.from_table:
            return f"no records of the {runs} runs of profile {profile!r} in {args.from_table}"
        from .table import table_path

        table = table_path(args.out, study.REPORT_NAME)
        committed = (f", or re-render the report from its run table: `sabo-bench report {args.study} --from-table "
                     f"{table}`" if table.exists() else "")
        return (f"no records of the {runs} runs of profile {profile!r} under {args.runs_dir}/{args.study}: run "
                f"`sabo-bench run {args.study}{f' --profile {args.profile}' if args.profile else ''}` first"
                + committed)
    if args.force:
        return None
    from .claims import replacement_refusal

    omits = [study.TABLE_OMITS] if args.from_table and hasattr(study, "TABLE_OMITS") else []
    reason = replacement_refusal(args.out, study.REPORT_NAME, profile=profile, records=records, runs=runs,
                                 omits=omits)
    if reason is None:
        return None
    return f"{reason}; not replaced: write this one elsewhere with `--out {Path(args.out, profile)}`, or use --force"


def report_records(args, configs) -> list[dict]:
    """The records of ``configs``: from ``--from-table`` when given, else from ``--runs-dir``, where a record
    file that is unusable (as `list` calls it, corrupt: unreadable, of the wrong shape, not a regular file)
    is left out with one warning line; with ``--fill-from-table``, the runs that have no record there from that
    table (by exact config hash, so only records of these very configs and code version)."""
    from .table import records_from_table

    if args.from_table is None:
        found = {c.hash: load_record(args.runs_dir, c) for c in configs}
        corrupt = sum(found[c.hash] is None and record_status(args.runs_dir, c) == "corrupt" for c in configs)
        if corrupt:
            print(f"warning: {corrupt} record file(s) under {args.runs_dir}/{args.study} are unusable and left out of "
                  f"this report (`sabo-bench list {args.study}` marks them corrupt; `sabo-bench run {args.study}` "
                  "moves them aside and recomputes them)", file=sys.stderr)
        if args.fill_from_table is not None:
            missing = [c for c in configs if found[c.hash] is None]
            try:
                filled = {r["config_hash"]: r for r in records_from_table(args.fill_from_table, missing)}
            except ValueError as exc:
                raise UsageError(f"--fill-from-table: {exc}") from None
            print(f"{len(configs) - len(missing)} records under {args.runs_dir}/{args.study}, {len(filled)} taken from "
                  f"{args.fill_from_table} (rows with exactly the runs' config hashes)")
            found.update(filled)
        return [found[c.hash] for c in configs if found[c.hash] is not None]
    try:
        return records_from_table(args.from_table, configs)
    except ValueError as exc:
        raise UsageError(f"--from-table: {exc}") from None


def write_report_files(study, params: dict, records: list[dict], out, *, profile: str, runs: int, tracker=None,
                       runs_dir=None) -> dict:
    """The study's report of ``records`` in ``out`` (page, claims, figures), with its run table and DVC outcomes
    (metrics, curves); prints each file written and returns the study's ``report`` result."""
    from .outcomes import write_outcomes
    from .table import table_path, write_table

    outcome = study.report(params, records, Path(out), tracker=tracker, runs_dir=runs_dir)
    hook = optional_hook(study, "outcomes")
    files = [*outcome["files"], write_table(table_path(out, study.REPORT_NAME), records),
             *write_outcomes(out, study.REPORT_NAME, profile=profile, records=records, runs=runs,
                             claims=outcome["claims"], outcomes=hook(params, records) if hook else None)]
    for path in files:
        print(f"wrote {path}")
    return outcome


def cmd_report(args) -> int:
    expected_claims = None
    if args.check_claims:  # read (or refused) before the report is written, and before --record-expected writes
        from .claims import read_expected

        expected_claims = read_expected(args.check_claims)
    study = get_study(args.study)
    if args.fill_from_table is not None:
        if args.from_table is not None:
            raise UsageError("--fill-from-table adds to the records under --runs-dir; --from-table reads a table "
                             "alone: use one of them")
        if hasattr(study, "TABLE_OMITS"):  # e.g. cocopp's pages need every run's files under runs/
            raise UsageError(f"--fill-from-table: study {args.study!r}'s report needs what a run table does not hold "
                             f"({study.TABLE_OMITS}) for every run: compute the runs under --runs-dir instead")
    params = load_params(args.params, args.study, args.profile)
    profile = params[args.study]["profile"]
    recorded = (expected_claims or {}).get("profile", profile)
    if recorded != profile:  # another profile's verdicts: a ci report checked against the full one's, or back
        raise UsageError(f"--check-claims {args.check_claims!r}: recorded for profile {recorded!r}, but this report "
                         f"is of profile {profile!r} (use --profile {recorded}, or a file recorded for {profile!r})")
    configs = study.configs(params)
    records = report_records(args, configs)
    source = args.from_table or f"{args.runs_dir}/{args.study}"
    print(f"{len(records)} of {len(configs)} runs of profile {profile!r} have records ({source})")
    refusal = report_refusal(args, study, profile, len(records), len(configs))
    if refusal is not None:
        print(f"error: {refusal}", file=sys.stderr)
        return 1
    from .storage import remove_temporaries_in

    for place in (Path(args.out), Path(args.out, "figures")):  # left by a report killed mid-write
        remove_temporaries_in(place)
    logger = make_logger(args, params)
    outcome = write_report_files(study, params, records, args.out, profile=profile, runs=len(configs), tracker=logger,
                                 runs_dir=None if args.from_table else Path(args.runs_dir))
    if logger is not None:
        logger.summarize("figure sets")
    if args.record_expected:
        from .claims import expected_file
        from .storage import write_json

        expected = expected_file(profile, outcome)
        write_json(args.record_expected, expected)
        print(f"recorded {len(expected['reproduced'])} reproduced claims and {len(expected.get('scores', {}))} "
              f"scores in {args.record_expected}")
    if expected_claims is not None:
        from .claims import check_against_expected

        failures = check_against_expected(outcome, expected_claims)
        for line in failures:
            print(f"CLAIM REGRESSION: {line}", file=sys.stderr)
        if failures:
            return 1
        print(f"claims: every claim expected in {args.check_claims} still holds")
    return 0


#: how long `track` waits for another process's hold on the MLflow store (a starting `mlflow ui` creating its
#: tables holds it for 20 s or more on a busy machine); the other commands give up after 15 s and go on
TRACK_TIMEOUT_S = 180.0


def run_command(args) -> str:
    """The `sabo-bench run` command that makes the records of this command's selection."""
    words = _study_words(args, "run")
    for option in ("setting", "function", "method", "seed", "hash"):
        if getattr(args, option, None):
            words += [f"--{option}", *map(str, getattr(args, option))]
    return " ".join(shlex.quote(w) for w in words)


def wait_for_ui(ui: str, seconds: float) -> bool:
    """Whether the MLflow UI at ``ui`` answers (its ``/health``), waiting up to ``seconds`` for it to start."""
    import urllib.request

    deadline = time.monotonic() + seconds
    while True:
        try:
            with urllib.request.urlopen(f"{ui.rstrip('/')}/health", timeout=5) as answer:
                if answer.status == 200:
                    return True
        except (OSError, ValueError):  # not listening yet, or not a URL it can open
            pass
        if time.monotonic() >= deadline:
            return False
        time.sleep(min(1.0, max(0.0, deadline - time.monotonic())))


def cmd_track(args) -> int:
    """Log to MLflow every finished record of the selection that MLflow lacks; print the comparison page.

    Unlike the other commands, MLflow being unavailable is an error here (exit 2): logging is
    the whole point; so is a selection without a single record (the line says which `run` makes
    them). Records that fail to log make it exit 1. Waiting for another process's hold on the store
    (a starting `mlflow ui` creates its tables) is bounded by ``SABO_BENCH_TRACKING_TIMEOUT`` if set,
    else :data:`TRACK_TIMEOUT_S`: this command has nothing else to do.
    """
    params, configs = select(args)
    records = [r for r in (load_record(args.runs_dir, c) for c in configs) if r is not None]
    if configs and not records:
        raise UsageError(f"no finished run of the {len(configs)} selected has a record under {args.runs_dir}: "
                         f"make them first with `{run_command(args)}`")
    from .tracking import tracking_uri

    try:
        from .tracking import Tracker

        tracker = Tracker(timeout=None if os.environ.get("SABO_BENCH_TRACKING_TIMEOUT") else TRACK_TIMEOUT_S)
    except Exception as exc:  # one line, whatever MLflow raises
        print(f"error: MLflow is unavailable ({tracking_uri()}: {_reason(exc)}); nothing was logged", file=sys.stderr)
        return 2
    profile = params[args.study]["profile"]
    every = get_study(args.study).configs(params)  # the profile's runs: their grids name the runs, their methods
    logger = SafeLogger(tracker, "run this command again once MLflow works", profile=profile, configs=every)
    outcomes = [logger(r) for r in records]
    logger.flush()
    print(f"{outcomes.count(True)} records logged to MLflow ({tracking_uri()}), {outcomes.count(False)} already "
          f"there; {len(configs) - len(records)} of the {len(configs)} selected runs have no record yet")
    logger.summarize()
    one = {option: names[0] for option in ("setting", "function") if len(names := getattr(args, option) or []) == 1}
    others = {c.method for c in every if c.setting == one.get("setting", c.setting)
              and c.problem.get("name") == one.get("function", c.problem.get("name"))}
    url = logger.comparison_url(args.study, ui=args.ui, methods=args.method, others=sorted(others), **one)
    if url:
        if args.wait_ui:
            print(f"waiting up to {args.wait_ui:g} s for the MLflow UI at {args.ui} ...", flush=True)
        if not wait_for_ui(args.ui, args.wait_ui or 0.0):
            print(f"no MLflow UI answers at {args.ui}: start it with `mlflow ui --backend-store-uri {tracking_uri()}` "
                  f"(it can take a minute), then open the link")
        print(f"compare the methods (group runs of profile {profile!r}) in `mlflow ui`: {url}")
    return 1 if logger.failures else 0


def build_parser() -> argparse.ArgumentParser:
    from .tracking import DEFAULT_UI

    ap = ArgumentParser(prog="sabo-bench", description=__doc__.split("\n\n")[0],
                        epilog="Run `sabo-bench COMMAND --help` for the options of a command.",
                        formatter_class=argparse.RawDescriptionHelpFormatter)
    from sabo import __version__

    ap.add_argument("--version", action="version", version=f"sabo-bench {__version__}")
    sub = ap.add_subparsers(dest="command", required=True, metavar="COMMAND")

    p = sub.add_parser("run", help="execute every selected run of a study (skips finished ones, resumes partial ones)")
    add_common(p)
    p.add_argument("--workers", type=positive_int,
                   help="parallel worker processes / Ray CPUs (default: 1; for runs that need a GPU, one per "
                        "visible GPU, each worker pinned to its own device)")
    p.add_argument("--executor", choices=EXECUTORS, default="local",
                   help="local worker processes, or Ray (RAY_ADDRESS, else a local Ray instance)")
    p.add_argument("--checkpoint-every", type=positive_seconds, default=30.0, metavar="SECONDS",
                   help="checkpoint each run this often (default: %(default)s)")
    p.add_argument("--keep-going", action="store_true",
                   help="a run that raises does not stop the study: the other runs go on, and the failed ones are "
                        "listed at the end with their traceback files (exit status 1)")
    p.add_argument("--no-track", action="store_true", help="do not log to MLflow")
    shown = p.add_mutually_exclusive_group()
    shown.add_argument("--progress", choices=PROGRESS_MODES,
                       help="bar: redrawn in place (the default on a terminal); lines: a plain line when the runs "
                            "start, at least every 30 s and at the end, with runs done, share of the work and ETA "
                            "(the default otherwise, and what dvc.yaml's stages use); none: nothing")
    shown.add_argument("--quiet", action="store_true", help="no progress display (--progress none)")
    p.add_argument("--allow-empty", action="store_true",
                   help="exit 0 when no run matches (e.g. the prompt study's offline profile)")
    p.add_argument("--compare-with", metavar="RUNS_PARQUET",
                   help="run only the --method runs and report them beside the other methods' records from this run "
                        "table (e.g. the committed results/ci/synthetic_runs.parquet with --profile ci); refused "
                        "unless the table holds those runs with the configs and code version this code runs")
    p.add_argument("--compare-out", type=directory, metavar="DIR",
                   help="with --compare-with: where the comparison's report goes (default: "
                        "comparisons/<study>_<profile>_<methods>)")
    p.set_defaults(func=cmd_run)

    p = sub.add_parser("run-one", help="execute exactly one run (the selection must match one), with a progress bar")
    add_common(p)
    p.add_argument("--checkpoint-every", type=positive_seconds, default=30.0, metavar="SECONDS")
    p.add_argument("--no-track", action="store_true", help="do not log to MLflow")
    p.add_argument("--quiet", action="store_true", help="no progress bar")
    p.set_defaults(func=cmd_run_one)

    p = sub.add_parser("list", help=f"list the selected runs with their status ({', '.join(RUN_STATUSES)})")
    add_common(p)
    p.add_argument("--summary", action="store_true", help="only the counts per status")
    committed = p.add_mutually_exclusive_group()
    committed.add_argument("--table", metavar="RUNS_PARQUET",
                           help="count the runs this run table holds too (default: the committed one of the "
                                "profile beside the parameter file, results/<profile>/ or results/, e.g. "
                                "results/synthetic_runs.parquet)")
    committed.add_argument("--no-table", action="store_true", help="count only the records under --runs-dir")
    p.set_defaults(func=cmd_list)

    p = sub.add_parser("prepare", help="prepare a study's data (e.g. the image study's cached UMAP features)")
    add_common(p, selection=False)
    p.add_argument("--refit", action="store_true",
                   help="image: compute the UMAP embedding afresh and compare it with the pinned one")
    p.add_argument("--ship", action="store_true",
                   help="image, with --refit (maintainers): write it among the embeddings sabo-bench ships")
    p.set_defaults(func=cmd_prepare)

    p = sub.add_parser("report", help="regenerate a study's tables, figures, claim verdicts, run table and DVC "
                                      "metrics from its records")
    add_common(p, selection=False)
    p.add_argument("--out", default="results", type=directory, help="output directory (default: %(default)s)")
    p.add_argument("--from-table", metavar="RUNS_PARQUET",
                   help="read the records from this run table (the <name>_runs.parquet an earlier report wrote, "
                        "e.g. the committed results/synthetic_runs.parquet) instead of --runs-dir")
    p.add_argument("--fill-from-table", metavar="RUNS_PARQUET",
                   help="take the records of runs that have none under --runs-dir from this run table (rows with "
                        "exactly their config hash: same configs and code version), e.g. after a method's revision "
                        "was bumped, run that method and report it with the committed results/<name>_runs.parquet")
    p.add_argument("--force", action="store_true",
                   help="replace the report in --out even if it is of another profile or made from more records")
    p.add_argument("--no-track", action="store_true", help="do not attach the figures to MLflow")
    p.add_argument("--check-claims", metavar="EXPECTED_JSON",
                   help="exit 1 if a claim listed as reproduced in this file no longer is")
    p.add_argument("--record-expected", metavar="EXPECTED_JSON",
                   help="write the ids of the claims reproduced now (regenerate deliberately, e.g. for CI)")
    p.set_defaults(func=cmd_report)

    p = sub.add_parser("track", help="log to MLflow the finished records it lacks (e.g. after it was unavailable) "
                                     "and print the page that compares the methods")
    add_common(p)
    p.add_argument("--ui", default=DEFAULT_UI, metavar="URL",
                   help="where `mlflow ui` serves, for the comparison page's address (default: %(default)s)")
    p.add_argument("--wait-ui", type=positive_seconds, default=0.0, metavar="SECONDS",
                   help="wait up to this long for the MLflow UI to answer before printing the link (a UI just "
                        "started takes up to a minute)")
    p.set_defaults(func=cmd_track)

    p = sub.add_parser("status", help="how far each study is (runs recorded, running, partial, pending) and its ETA, "
                                      "for the active profiles; changes nothing (safe while a pipeline runs)")
    p.add_argument("study", nargs="*", metavar="STUDY",
                   help=f"only these studies (default: every one of the parameter file; {', '.join(STUDIES)})")
    p.add_argument("--params", default="params.yaml", help="parameter file (default: %(default)s)")
    p.add_argument("--profile", help="with one STUDY: this profile instead of the active one")
    p.add_argument("--runs-dir", default="runs", type=directory, help="where run records live (default: %(default)s)")
    p.add_argument("--workers", type=positive_int, default=2,
                   help="workers the ETA schedules the runs left on (default: %(default)s, as dvc.yaml's stages)")
    p.set_defaults(func=cmd_status)
    return ap


def main(argv=None) -> int:
    args = build_parser().parse_args(argv)
    try:
        # replaces startup's handler while the command works, and puts it back (in the program itself) for the
        # reports below and the interpreter's shutdown, where a Ctrl-C is one line (replication.startup)
        with stopping.handle_signals():
            try:
                status = args.func(args)
                sys.stdout.flush()  # a reader that left is found here, not in the interpreter's last flush
                return status
            finally:
                startup.exiting()
    except KeyboardInterrupt as exc:  # Ctrl-C / SIGTERM (StopRequested): runs keep their checkpoints
        signum = getattr(exc, "signum", signal.SIGINT)
        print(f"stopped by {signal.Signals(signum).name}: {STOPPED.get(args.command, STOPPED['run'])}", file=sys.stderr)
        return 128 + signum
    except ResourceUnavailable as exc:  # a missing model or data set: the message says how to supply it
        print(f"error: {exc}", file=sys.stderr)
        return 2
    except RunFailed as exc:  # a run raised: where, and that the rest stopped as on Ctrl-C
        going_on = " (`run --keep-going` runs the others first)" if args.command == "run" else ""
        print(f"error: {exc}; the study stopped (other runs recorded or checkpointed): run the same command "
              f"again to retry{going_on}", file=sys.stderr)
        return 1
    except UsageError as exc:  # a bad argument or parameter file: one line per problem, no traceback
        for line in str(exc).splitlines() or ["(no message)"]:
            print(f"error: {line}", file=sys.stderr)
        return 2
    except BrokenPipeError:  # the reader of stdout left (`sabo-bench list | head`): nothing more to say
        os.dup2(os.open(os.devnull, os.O_WRONLY), sys.stdout.fileno())  # so that exiting flushes nowhere
        return 1
    except OSError as exc:  # a full disk, a read-only --out or --runs-dir: what could not be written, and why
        problem = file_problem(exc)
        if problem is None:
            raise
        print(f"error: {problem}; {STOPPED.get(args.command, STOPPED['run'])}", file=sys.stderr)
        return 1


if __name__ == "__main__":
    sys.exit(main())
