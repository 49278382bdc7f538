#!/usr/bin/python3
"""Held-out check of `trainbench review` against the official MLPerf Training compliance checker, one round at
a time (1.0, 2.0, 2.1, 3.0, 3.1, 4.0, 4.1, 5.0, 5.1), log by log and package by package. Not run in CI: the
published results are gigabytes (bare git mirrors of mlcommons/training_results_v<round> and mlcommons/logging,
from the session's `fetch` tool or clones; each round's logs alone are 0.2-0.7 GB) and the official checker takes
a minute or two of two cores per round (the package check 2-35 minutes a round). Needs Debian's python3 with
pyyaml (apt-get install python3-yaml; `packages` also numpy, scipy and pandas for the official tools); always
run it as /usr/bin/python3.

Three subcommands:

  official  exports mlperf_logging at the round's final tag of mlcommons/logging and every result log of the
            round (<org>/results/<system>/<benchmark>/result_*.txt, the package checker's glob) from the results'
            HEAD, runs the official compliance checker on each log in process (what
            `python -m mlperf_logging.compliance_checker --usage training --ruleset X.Y.0 LOG` does: a fresh
            checker per log, check_file(LOG, 'training_X.Y.0/common.yaml'), '1.0.0/common.yaml' at 1.0.0) with
            at most 2 worker processes and a per-log timeout, and writes one JSON file:
              {round, ruleset, logging_tag, logging_commit, results_commit, wall_s, missing_logs: {path: blob},
               logs: {relative path: {verdict: pass|fail|crash|timeout, messages: [...], warnings: [...],
                                      reasons: [...], parse_errors: N, seconds}}}
            messages are the checker's failure messages (its overwritable, then not_overwritable ones, the order
            the command line prints them), warnings its warnings, each cut to 300 characters; reasons are the
            messages in full, reduced to the rule that failed (the log line and context left out) so that they
            can be counted across logs; a crash's message is the exception.

    /usr/bin/python3 scripts/compare-rounds.py official --round 3.1 \\
        --logging /work/.mirror/mlcommons+logging/repo \\
        --results /work/.mirror/mlcommons+training_results_v3.1/repo --out /tmp/rounds/official/3.1.json

  compare   runs `trainbench review --json --ruleset X.Y.0 --log L1 --log L2 ...` over the same logs, one
            benchmark at a time in batches of ~200, and compares per log: the official verdict "pass" must equal
            the review's `compliant and target_reached` (the review --json --log shape: a list of runs with path,
            compliant, target_reached, findings). Prints a Markdown table (logs, agree, disagree, crash), every
            disagreement with the official first message and the review's first error, and the crashes grouped
            by reason. Crash: the official checker crashed or timed out (compared with nothing), or the review
            refused the log (exit status 2; a benchmark without rules in the ruleset refuses its whole batch).
            Exit status 1 on any disagreement, or on a refused log the official checker gave a verdict for.

    /usr/bin/python3 scripts/compare-rounds.py compare --round 3.1 --official /tmp/rounds/official/3.1.json \\
        --trainbench build/bin/trainbench --results /work/.mirror/mlcommons+training_results_v3.1/repo

  packages  the same check at the package level, org by org (at most 2 at once). Exports <org>/{systems,results,
            benchmarks}/ of the results' HEAD (a results folder the mirror lacks a file of is left out, for both
            sides), and per org: copies systems/ and results/ (benchmarks/ hard-linked) to a checked copy; runs the
            round's package checker on the copy (`python -m mlperf_logging.package_checker COPY training X.Y.0`,
            which writes scaling.json from 2.1.0 on), its result summarizer (`... result_summarizer TREE training
            X.Y.0 [--csv]`) on the published tree and on the copy, and `trainbench review --json --ruleset X.Y.0`
            on both. The official tools run in a child (the hidden `_tool` subcommand) that records, per
            results/<system>/<benchmark>, what they decided: the package checker's ERROR lines (1.1.0 on; 1.0.0
            prints nothing for failed logs or seeds, so its folder verdict is rebuilt from the recorded compliance,
            seed and RCP answers and its "Expected N runs" line), each log's compliance verdict, the seed, power and
            RCP checkers' answers, each system description's verdict, and the summarizer's scores per folder.
            Compares per system x benchmark: the score on the published tree and after the package checker (within
            5e-7 minutes, or both absent), the RCP check (run or not; passed; message), and the verdict (the
            folder's checks, and from 4.0.0 (and 1.0.0) the system description, against the review's benchmark
            verdict plus its system-description errors). Prints a Markdown table per round, every disagreement with
            both sides, the official tools' crashes grouped, and the org-level verdicts; writes <work>/packages.json
            (default /tmp/rounds/pkg/<round>). Also compares `trainbench report --ruleset X.Y.0`'s report.csv
            with the summarizer's CSV of the published tree (2.0.0 on), score by score. --reuse-official runs only
            trainbench again (after a rebuild).

    /usr/bin/python3 scripts/compare-rounds.py packages --round 4.1 \
        --logging /work/.mirror/mlcommons+logging/repo \
        --results /work/.mirror/mlcommons+training_results_v4.1/repo --trainbench build/bin/trainbench

Exports are kept under --work (default /tmp/rounds/work/<round>/{logging/<tag>,results}) and reused while the
tag's and HEAD's commits match. The mirrors lack a few large blobs (130 logs of 1.0, 4.0, 4.1 and 5.1 in the
session's mirrors); those logs are listed under missing_logs and checked by neither side.

The round's tag is its newest X.Y.0 or X.Y.0-rc* tag of mlcommons/logging (for 4.0 the later commit of
4.0.0-rc3-rcp-prunning and 4.0.0-rc2); --tag overrides it (a commit works too). At 3.1.0-rc3 the checker raises
on every log (ValueError: REQ AT_LEAST_ONE is read as AT_LEAST(n)); 3aa5296, "Fix AT_LEAST checks", an hour and
a half later, is the first commit that checks 3.1 logs: --tag 3aa5296 --work /tmp/rounds/work/3.1. `packages` checks
3.1 at 9b25d4a (PACKAGE_TAGS)."""
import argparse, collections, csv, glob, io, json, multiprocessing, os, re, shutil, subprocess, sys, tarfile, time
import traceback
from multiprocessing.connection import wait

ROUND_TAGS = {'1.0': '1.0.0', '2.0': '2.0.0', '2.1': '2.1.0', '3.0': '3.0.0-rc2', '3.1': '3.1.0-rc3',
              '4.0': None, '4.1': '4.1.0-rc4', '5.0': '5.0.0-rc3', '5.1': '5.1.0-rc4'}
LOG_RE = re.compile(r'^[^/]+/results/[^/]+/[^/]+/result_[^/]*\.txt$')
MESSAGE_CHARS = 300
REPORT_TOLERANCE = 0.0005 + 1e-9  # report.csv gives minutes to 3 decimals


def git(git_dir, *args):
    return subprocess.run(['git', '-C', git_dir, *args], check=True, capture_output=True, text=True).stdout.strip()


def round_tag(logging_git, rnd):
    if rnd not in ROUND_TAGS:
        sys.exit(f'unknown round {rnd}; known: {", ".join(ROUND_TAGS)}')
    if ROUND_TAGS[rnd]:
        return ROUND_TAGS[rnd]
    # 4.0: whichever of the two release candidates is the later commit
    candidates = ['4.0.0-rc3-rcp-prunning', '4.0.0-rc2']
    a, b = candidates
    if subprocess.run(['git', '-C', logging_git, 'merge-base', '--is-ancestor', b, a]).returncode == 0:
        return a
    if subprocess.run(['git', '-C', logging_git, 'merge-base', '--is-ancestor', a, b]).returncode == 0:
        return b
    return max(candidates, key=lambda t: int(git(logging_git, 'log', '-1', '--format=%ct', t)))


def export(git_dir, rev, pathspecs, into):
    """git archive REV PATHSPECS | tar -x -C INTO, kept while INTO/.commit names the same commit."""
    commit = git(git_dir, 'rev-parse', rev + '^{commit}')
    marker = os.path.join(into, '.commit')
    if os.path.exists(marker) and open(marker).read().strip() == commit:
        return commit
    shutil.rmtree(into, ignore_errors=True)
    os.makedirs(into)
    archive = subprocess.Popen(['git', '-C', git_dir, 'archive', commit, '--', *pathspecs], stdout=subprocess.PIPE)
    with tarfile.open(fileobj=archive.stdout, mode='r|') as tar:
        tar.extractall(into)
    if archive.wait():
        sys.exit(f'git archive {commit} failed in {git_dir}')
    with open(marker, 'w') as f:
        f.write(commit + '\n')
    return commit


def export_blobs(git_dir, into, path_re):
    """Every file of HEAD whose path PATH_RE matches into INTO, blob by blob, modes kept (kept while INTO/.commit
    names HEAD's commit): the mirrors lack some large blobs, which are left out. Returns (commit, [exported
    paths], {missing path: blob})."""
    commit = git(git_dir, 'rev-parse', 'HEAD^{commit}')
    listing = subprocess.run(['git', '-C', git_dir, 'ls-tree', '-r', '-z', commit], check=True,
                             capture_output=True).stdout.decode('utf-8', 'surrogateescape')
    entries = []
    for item in listing.split('\0'):
        meta, _, path = item.partition('\t')
        if path and path_re.match(path) and meta.split()[1] == 'blob':
            entries.append((path, meta.split()[0], meta.split()[2]))
    marker, missing_file = os.path.join(into, '.commit'), os.path.join(into, '.missing.json')
    if os.path.exists(marker) and open(marker).read().strip() == commit and os.path.exists(missing_file):
        missing = json.load(open(missing_file))
        return commit, [path for path, _, _ in entries if path not in missing], missing
    shutil.rmtree(into, ignore_errors=True)
    os.makedirs(into)
    missing = {}
    batch = subprocess.Popen(['git', '-C', git_dir, 'cat-file', '--batch'], stdin=subprocess.PIPE,
                             stdout=subprocess.PIPE)
    for path, mode, blob in entries:
        batch.stdin.write(blob.encode() + b'\n')
        batch.stdin.flush()
        header = batch.stdout.readline().decode().split()
        if header[-1] == 'missing':
            missing[path] = blob
            continue
        data = batch.stdout.read(int(header[2]))
        batch.stdout.read(1)
        target = os.path.join(into, path)
        os.makedirs(os.path.dirname(target), exist_ok=True)
        if mode == '120000':
            os.symlink(data.decode('utf-8', 'surrogateescape'), target)
            continue
        with open(target, 'wb') as f:
            f.write(data)
        if mode == '100755':
            os.chmod(target, 0o755)
    batch.stdin.close()
    batch.wait()
    with open(missing_file, 'w') as f:
        json.dump(missing, f, indent=1)
    with open(marker, 'w') as f:
        f.write(commit + '\n')
    return commit, [path for path, _, _ in entries if path not in missing], missing


def export_round(args):
    work = args.work or f'/tmp/rounds/work/{args.round}'
    results_dir = os.path.abspath(os.path.join(work, 'results'))
    results_commit, logs, missing = export_blobs(args.results, results_dir, LOG_RE)
    return work, results_dir, results_commit, logs, missing

# ---------------------------------------------------------------------------------------------------- official

# What a failure message reduces to, by its form: (pattern, reason from the whitespace-normalized groups and the
# message). The first that matches decides.
REASONS = [
    (r"CHECK for '([^']*)' failed in line \d+:\n.*?\nfailed test: (.*?)\ncurrent context",
     lambda g, _: f'CHECK {g[0]}: {g[1]}'),
    (r"Failed executing CHECK code:\n(.*?)\ntriggered by line:\n.*?\"key\": \"([^\"]*)\"",
     lambda g, _: f'CHECK {g[1]} raised: {g[0]}'),
    (r"Failed executing CHECK code:\n(.*?)\ncurrent context", lambda g, _: f'END CHECK raised: {g[0]}'),
    (r"failed test: (.*?)\ncurrent context", lambda g, _: f'END CHECK: {g[0]}'),
    (r"Failed executing code (\w+) code triggered by line :\n.*?\"key\": \"([^\"]*)\"",
     lambda g, _: f'{g[0]} {g[1]} raised'),
    (r"(Required EXACTLY_ONE occurrence of '[^']*' but found \d+)",
     lambda g, message: g[0] + (' with different values' if 'with different values' in message else '')),
    # the checker orders the alternatives by a set of str: by PYTHONHASHSEED
    (r"Required AT_LEAST_ONE occurrence of ('[^']*'(?: or '[^']*')+)$",
     lambda g, _: f"Required AT_LEAST_ONE occurrence of {' or '.join(sorted(g[0].split(' or ')))}"),
    (r'Could not find config file: .*/compliance_checker/(.*)', lambda g, _: f'Could not find config file: {g[0]}'),
]


def reason(message):
    """A failure message reduced to the rule that failed, without the log line, line number and context."""
    for pattern, make in REASONS:
        m = re.match(pattern, message, re.S)
        if m:
            return make([' '.join(group.split()) for group in m.groups()], message)
    return ' '.join(message.split())[:200]


def worker(conn, package_dir, ruleset):
    """Checks the logs the parent sends, one at a time; answers a result dict per log."""
    import contextlib, logging
    sys.path.insert(0, package_dir)
    from mlperf_logging.compliance_checker import mlp_compliance
    import inspect
    with_usage = 'usage' in inspect.signature(mlp_compliance.make_checker).parameters
    # what __main__.py does: the default config, and the ruleset/usage arguments of its own make_checker
    config = f'training_{ruleset}/common.yaml' if with_usage else f'{ruleset}/common.yaml'
    parse_file = mlp_compliance.mlp_parser.parse_file
    parsed = {}

    def recording_parse_file(filename, ruleset='0.6.0'):
        loglines, errors = parse_file(filename, ruleset=ruleset)
        parsed['errors'] = errors
        return loglines, errors
    mlp_compliance.mlp_parser.parse_file = recording_parse_file

    # __main__.py logs at INFO to a file and the terminal; here into a buffer per log (1.0.0 prints instead)
    root = logging.getLogger()
    root.handlers[:] = []
    buffer = io.StringIO()
    handler = logging.StreamHandler(buffer)
    handler.setFormatter(logging.Formatter('%(levelname)s - %(message)s'))
    root.addHandler(handler)
    root.setLevel(logging.INFO)
    while True:
        try:
            path = conn.recv()
        except EOFError:
            return
        if path is None:
            return
        buffer.seek(0)
        buffer.truncate()
        parsed.clear()
        mlp_compliance.enqueued_configs.clear()
        checker = (mlp_compliance.make_checker('training', ruleset, quiet=False, werror=False) if with_usage
                   else mlp_compliance.make_checker(ruleset, quiet=False, werror=False))
        result = {}
        try:
            with contextlib.redirect_stdout(buffer), contextlib.redirect_stderr(buffer):
                valid, _, _, _ = mlp_compliance.main(path, config, checker)
            result['verdict'] = 'pass' if valid else 'fail'
        except BaseException as e:  # noqa: B036 -- a rule's exec may raise anything, SystemExit included
            result['verdict'] = 'crash'
            result['exception'] = f'{type(e).__name__}: {e}'
            result['traceback'] = traceback.format_exc()[-1500:]
        full = [*checker.overwritable.values(), *checker.not_overwritable]
        if result['verdict'] == 'crash':
            full = [result['exception']] + full
        result['messages'] = [str(m)[:MESSAGE_CHARS] for m in full]
        result['warnings'] = [str(m)[:MESSAGE_CHARS] for m in checker.warnings.values()]
        result['reasons'] = [reason(str(m)) for m in full]
        result['parse_errors'] = len(parsed.get('errors', []))
        if parsed.get('errors'):
            result['first_parse_errors'] = [f'{e}: {l[:200]}' for l, e in parsed['errors'][:3]]
        conn.send(result)


class Pool:
    """At most `size` worker processes; a log that runs past `timeout` seconds has its worker killed."""

    def __init__(self, size, package_dir, ruleset, timeout):
        self.size, self.package_dir, self.ruleset, self.timeout = size, package_dir, ruleset, timeout
        self.context = multiprocessing.get_context('fork')

    def start(self):
        parent, child = self.context.Pipe()
        process = self.context.Process(target=worker, args=(child, self.package_dir, self.ruleset), daemon=True)
        process.start()
        child.close()
        return {'process': process, 'conn': parent, 'task': None, 'since': 0.0}

    def run(self, tasks, on_result):
        """tasks: [(key, absolute path)]; on_result(key, result dict)."""
        pending = list(reversed(tasks))
        workers = [self.start() for _ in range(min(self.size, len(tasks)))]
        while True:
            for w in workers:
                if w['task'] is None and pending:
                    w['task'] = pending.pop()
                    w['since'] = time.monotonic()
                    w['conn'].send(w['task'][1])
            busy = [w for w in workers if w['task'] is not None]
            if not busy:
                break
            now = time.monotonic()
            deadline = min(w['since'] + self.timeout for w in busy)
            ready = wait([w['conn'] for w in busy], timeout=max(0.0, deadline - now))
            for i, w in enumerate(workers):
                if w['task'] is None:
                    continue
                key = w['task'][0]
                if w['conn'] in ready:
                    try:
                        result = w['conn'].recv()
                    except (EOFError, OSError):
                        code = w['process'].join(5) or w['process'].exitcode
                        on_result(key, {'verdict': 'crash', 'messages': [f'worker died (exit code {code})'],
                                        'warnings': [], 'reasons': ['worker died'], 'parse_errors': 0})
                        w['process'].kill()
                        workers[i] = self.start()
                        continue
                    result['seconds'] = round(time.monotonic() - w['since'], 2)
                    on_result(key, result)
                    w['task'] = None
                elif time.monotonic() - w['since'] >= self.timeout:
                    w['process'].kill()
                    w['process'].join()
                    on_result(key, {'verdict': 'timeout', 'messages': [f'no verdict within {self.timeout} s'],
                                    'warnings': [], 'reasons': ['timeout'], 'parse_errors': 0})
                    workers[i] = self.start()
        for w in workers:
            w['conn'].send(None)
            w['process'].join(10)


def official(args):
    started = time.monotonic()
    tag = args.tag or round_tag(args.logging, args.round)
    ruleset = f'{args.round}.0'
    work, results_dir, results_commit, logs, missing = export_round(args)
    package_root = os.path.abspath(os.path.join(work, 'logging', tag))
    logging_commit = export(args.logging, tag, ['mlperf_logging'], package_root)
    if args.only:
        logs = [l for l in logs if args.only in l]
    if missing:
        print(f'{len(missing)} logs are not in the mirror and are left out', file=sys.stderr)
    print(f'round {args.round}: {len(logs)} logs, mlperf_logging {tag} ({logging_commit[:12]}), ruleset {ruleset}',
          file=sys.stderr)
    results = {}

    def on_result(key, result):
        results[key] = result
        if len(results) % 100 == 0 or len(results) == len(logs):
            counts = collections.Counter(r['verdict'] for r in results.values())
            print(f'  {len(results)}/{len(logs)} {dict(counts)} {time.monotonic() - started:.0f} s', file=sys.stderr)

    Pool(max(1, min(args.jobs, 2)), package_root, ruleset, args.timeout).run(
        [(l, os.path.join(results_dir, l)) for l in logs], on_result)
    out = {'round': args.round, 'ruleset': ruleset, 'logging_tag': tag, 'logging_commit': logging_commit,
           'results_commit': results_commit, 'wall_s': round(time.monotonic() - started, 1),
           'missing_logs': missing, 'logs': {l: results[l] for l in logs}}
    os.makedirs(os.path.dirname(os.path.abspath(args.out)), exist_ok=True)
    with open(args.out, 'w') as f:
        json.dump(out, f, indent=1)
    counts = collections.Counter(r['verdict'] for r in results.values())
    print(f'round {args.round}: {dict(counts)} in {out["wall_s"]} s -> {args.out}', file=sys.stderr)
    return 0


# ----------------------------------------------------------------------------------------------------- compare

def first_error(run):
    for finding in run.get('findings', []):
        if finding.get('severity', 'error') == 'error':
            return finding.get('message', json.dumps(finding))[:MESSAGE_CHARS]
    return '' if run.get('target_reached', True) else 'target not reached'


def refusal(out, path=None):
    """The review's refusal text, without its 'trainbench: PATH: ' prefix."""
    text = ' '.join((out.stderr or out.stdout).split())
    if path:
        text = text.replace(f'trainbench: {path}: ', '').replace(f'{path}: ', '')
    return f'exit {out.returncode}: {text}'[:MESSAGE_CHARS]


def review_batch(trainbench, ruleset, paths):
    """{path: (run dict or None, refusal text)}. The batch holds the logs of one benchmark; when the review
    refuses it (exit status 2) for a log whose benchmark has no rules in the ruleset, every log of the batch is
    taken as refused for that reason; any other refusal drops the log it names (or, naming none, splits the
    batch log by log) and retries the rest."""
    command = [trainbench, 'review', '--json', '--ruleset', ruleset]
    for p in paths:
        command += ['--log', p]
    out = subprocess.run(command, capture_output=True, text=True)
    runs = None
    if out.returncode != 2:
        try:
            runs = json.loads(out.stdout)
        except json.JSONDecodeError:
            runs = None
    if isinstance(runs, list):
        by_path = {run.get('path'): run for run in runs}
        if all(p in by_path for p in paths):
            return {p: (by_path[p], '') for p in paths}
        if len(runs) == len(paths) and not any('path' in run for run in runs):
            return {p: (run, '') for p, run in zip(paths, runs)}
    if len(paths) == 1:
        return {paths[0]: (None, refusal(out, paths[0]))}
    named = [p for p in paths if f'{p}:' in (out.stderr or '')]
    if out.returncode == 2 and len(named) == 1:
        reason_ = refusal(out, named[0])
        if 'has no rules in ruleset' in reason_:
            return {p: (None, reason_) for p in paths}
        result = {named[0]: (None, reason_)}
        result.update(review_batch(trainbench, ruleset, [p for p in paths if p != named[0]]))
        return result
    result = {}
    for p in paths:
        result.update(review_batch(trainbench, ruleset, [p]))
    return result


def compare(args):
    data = json.load(open(args.official))
    if data['round'] != args.round:
        sys.exit(f'{args.official} is round {data["round"]}, not {args.round}')
    ruleset = args.ruleset or data['ruleset']
    work, results_dir, results_commit, logs, _ = export_round(args)
    if results_commit != data['results_commit']:
        print(f'warning: results HEAD {results_commit[:12]} is not the official run\'s '
              f'{data["results_commit"][:12]}', file=sys.stderr)
    logs = [l for l in logs if l in data['logs'] and (not args.only or args.only in l)]
    trainbench = os.path.abspath(args.trainbench)
    by_benchmark = collections.defaultdict(list)
    for log in logs:
        by_benchmark[log.split('/')[3]].append(log)
    ours, done = {}, 0
    for benchmark in sorted(by_benchmark):
        group = by_benchmark[benchmark]
        for i in range(0, len(group), args.batch):
            batch = group[i:i + args.batch]
            reviewed = review_batch(trainbench, ruleset, [os.path.join(results_dir, l) for l in batch])
            for log in batch:
                ours[log] = reviewed[os.path.join(results_dir, log)]
            done += len(batch)
            print(f'  reviewed {done}/{len(logs)} ({benchmark})', file=sys.stderr)

    def verdict(run):
        return 'refused' if run is None else 'pass' if run.get('compliant') and run.get('target_reached') else 'fail'

    agree, disagree, crash = [], [], []
    for log in logs:
        theirs = data['logs'][log]
        run, error = ours[log]
        if theirs['verdict'] not in ('pass', 'fail') or run is None:
            crash.append((log, theirs, run, error))
        elif verdict(run) == theirs['verdict']:
            agree.append(log)
        else:
            disagree.append((log, theirs, run, first_error(run)))

    print(f'## Round {args.round} (ruleset {ruleset}, mlperf_logging {data["logging_tag"]})\n')
    print('| round | logs | agree | disagree | crash |\n|---|---|---|---|---|')
    print(f'| {args.round} | {len(logs)} | {len(agree)} | {len(disagree)} | {len(crash)} |\n')
    if disagree:
        print('| log | official | official first message | review | review first error |\n|---|---|---|---|---|')
        for log, theirs, run, error in disagree:
            first = (theirs['messages'] or [''])[0]
            print(f'| {log} | {theirs["verdict"]} | {cell(first)} | {verdict(run)} | {cell(error)} |')
        print()
    if crash:
        groups = collections.defaultdict(list)
        for log, theirs, run, error in crash:
            official_first = (theirs.get('reasons') or theirs['messages'] or [''])[0]
            key = (theirs['verdict'], official_first if theirs['verdict'] not in ('pass', 'fail') else '',
                   verdict(run), error if run is None else '')
            groups[key].append(log)
        print('| crash: logs | official | official message | review | review refusal | example |\n'
              '|---|---|---|---|---|---|')
        for (official_verdict, official_first, mine, error), group in sorted(groups.items(), key=lambda g: -len(g[1])):
            print(f'| {len(group)} | {official_verdict} | {cell(official_first)} | {mine} | {cell(error)} | '
                  f'{group[0]} |')
    refused = sum(1 for _, theirs, run, _ in crash if run is None and theirs['verdict'] in ('pass', 'fail'))
    if refused:
        print(f'\n{refused} log(s) with an official verdict were refused by the review: exit status 1')
    return 1 if disagree or refused else 0


def cell(text):
    return ' '.join(str(text).split()).replace('|', '\\|')[:MESSAGE_CHARS]


# ---------------------------------------------------------------------------------------------------- packages

# The logging commit the packages of a round are checked with, where it is not ROUND_TAGS' tag: 3.1.0-rc3's
# compliance checker raises on every log; 9b25d4a (4.0.0-rc1~15, the last commit before 4.0 work, "replacing ^
# with | in common.yaml to fix last minute change in SD logs") checks the 3.1 logs.
PACKAGE_TAGS = {'3.1': '9b25d4a'}
ORG_TREE_RE = re.compile(r'^[^/]+/(systems|results|benchmarks)/.')
SCORE_TOLERANCE = 5e-7  # minutes
# What the package checker (1.1.0 on) logs at ERROR level when it sets too_many_errors for a results folder.
PACKAGE_ERRORS = ('Incorrect number of files', 'Expected at least', 'files do not comply, directory cannot be accepted',
                  'Seed checker failed', 'RCP Test Failed')
# Rounds whose package checker verdict counts the system descriptions: 1.0.0 raises after the results pass,
# 4.0.0 on combines both (package_checker.py@4.0.0-rc3-rcp-prunning:237-250); 1.1.0-3.1.0 only log it.
SYSDESC_COUNTS = {'1.0', '4.0', '4.1', '5.0', '5.1'}


def exclude_incomplete_folders(published, missing):
    """Removes every results/<system>/<benchmark>/ folder the mirror lacks a file of: neither side can check it
    as published, and a folder left with fewer logs crashes whole runs of some tools (the 1.0.0 and 2.x result
    summarizers divide by zero on a folder with one log). Returns {folder: missing files}."""
    excluded = collections.Counter()
    for path in missing:
        parts = path.split('/')
        if len(parts) > 4 and parts[1] == 'results':
            excluded['/'.join(parts[:4])] += 1
    for folder in excluded:
        shutil.rmtree(os.path.join(published, folder), ignore_errors=True)
    return dict(sorted(excluded.items()))


def fresh_copy(source, target):
    """A copy of an org tree the package checker may write into: systems/ and results/ copied, benchmarks/ (only
    read, for the seed checker's source scan) hard-linked."""
    shutil.rmtree(target, ignore_errors=True)
    os.makedirs(target)
    for part in ('systems', 'results'):
        if os.path.isdir(os.path.join(source, part)):
            shutil.copytree(os.path.join(source, part), os.path.join(target, part), symlinks=True)
    if os.path.isdir(os.path.join(source, 'benchmarks')):
        subprocess.run(['cp', '-al', os.path.join(source, 'benchmarks'), os.path.join(target, 'benchmarks')],
                       check=True)


def snapshot_trainbench(path, into):
    """A copy of the trainbench binary that a relink during the run cannot change: waits until the file has not
    changed for a minute and the copy answers --help."""
    for _ in range(60):
        try:
            if time.time() - os.stat(path).st_mtime > 60:
                shutil.copy2(path, into)
                if subprocess.run([into, 'review', '--help'], capture_output=True).returncode == 0:
                    return into
        except OSError:
            pass
        print(f'waiting for {path} (being relinked?)', file=sys.stderr)
        time.sleep(30)
    sys.exit(f'{path} did not settle')


def python_source(package_root, tool):
    return open(os.path.join(package_root, 'mlperf_logging', tool, f'{tool}.py')).read()


def run_official(package_root, tool, tool_args, record, log, timeout):
    """Runs `python -m mlperf_logging.TOOL TOOL_ARGS` of the package at PACKAGE_ROOT (in a child that records
    what the tool decided per results folder, see tool()) and returns that record."""
    command = [sys.executable, os.path.abspath(__file__), '_tool', '--package-root', package_root, '--tool', tool,
               '--record', record, '--', *tool_args]
    started = time.monotonic()
    with open(log, 'w') as out:
        try:
            code = subprocess.run(command, stdout=out, stderr=subprocess.STDOUT, timeout=timeout).returncode
        except subprocess.TimeoutExpired:
            code = 'timeout'
    if code == 0 and os.path.exists(record):
        result = json.load(open(record))
    else:
        result = {'folders': {}, 'listed': [], 'systems': {}, 'scores': {}, 'olympic': {},
                  'exception': f'the recording child failed ({code}); see {log}', 'exception_folder': None}
    result['seconds'] = round(time.monotonic() - started, 1)
    return result


def review_tree(trainbench, ruleset, folder, timeout):
    started = time.monotonic()
    for attempt in range(20):
        try:
            out = subprocess.run([trainbench, 'review', '--json', '--ruleset', ruleset, folder], capture_output=True,
                                 text=True, timeout=timeout)
            break
        except OSError as error:  # ETXTBSY while the binary is written
            print(f'trainbench: {error}; retrying', file=sys.stderr)
            time.sleep(30)
    else:
        return {'refused': 'trainbench could not be started'}
    try:
        result = json.loads(out.stdout) if out.returncode != 2 else None
    except json.JSONDecodeError:
        result = None
    if not isinstance(result, dict):
        return {'refused': refusal(out, folder), 'seconds': round(time.monotonic() - started, 1)}
    result['seconds'] = round(time.monotonic() - started, 1)
    return result


def report_tree(trainbench, ruleset, folder, out_dir, timeout):
    """`trainbench report` on the tree: its report.csv minutes per "<system>/<benchmark>" (None: no score)."""
    try:
        done = subprocess.run([trainbench, 'report', '--ruleset', ruleset, '--out', out_dir, folder],
                              capture_output=True, text=True, timeout=timeout)
    except (OSError, subprocess.TimeoutExpired) as error:
        return {'refused': str(error)}
    report_csv = os.path.join(out_dir, 'report.csv')
    if done.returncode == 2 or not os.path.exists(report_csv):
        return {'refused': refusal(done, folder)}
    with open(report_csv, newline='') as f:
        return {'scores': {f"{row['system']}/{row['benchmark']}": float(row['minutes']) if row['minutes'] else None
                           for row in csv.DictReader(f)}}


def summarizer_csv_scores(path):
    """The result summarizer's --csv scores per "<system>/<benchmark>": a row per system description (named by
    its details_url), a column per benchmark between 'notes' and 'details_url'; None when it wrote no CSV."""
    if not os.path.exists(path):
        return None
    scores = {}
    with open(path, newline='') as f:
        reader = csv.DictReader(f)
        columns = reader.fieldnames or []
        if 'notes' not in columns or 'details_url' not in columns:
            return None
        benchmarks = columns[columns.index('notes') + 1:columns.index('details_url')]
        for row in reader:
            system = os.path.splitext(os.path.basename(row['details_url'] or ''))[0]
            for benchmark in benchmarks:
                if row.get(benchmark) not in ('', None):
                    scores[f'{system}/{benchmark}'] = float(row[benchmark])
    return scores


def compare_report(raw, out_dir):
    """`trainbench report`'s report.csv against the summarizer's CSV of the published tree, score by score."""
    theirs = summarizer_csv_scores(os.path.join(out_dir, f"{raw['org']}.summary-published.csv"))
    if theirs is None:  # the summarizer crashed on the tree; its run without the power logs, if any
        theirs = summarizer_csv_scores(os.path.join(out_dir, f"{raw['org']}.summarizer-published-without-power.csv"))
    report = raw.get('report') or {}
    if theirs is None or 'scores' not in report:
        return None
    mine = {key: value for key, value in report['scores'].items() if value is not None}
    both = sorted(set(theirs) & set(mine))
    return {'compared': len(both),
            'differ': [(key, theirs[key], mine[key]) for key in both if abs(theirs[key] - mine[key]) > REPORT_TOLERANCE],
            'only_summarizer': sorted(set(theirs) - set(mine)), 'only_report': sorted(set(mine) - set(theirs))}


def power_folders(tree):
    return glob.glob(os.path.join(tree, 'results', '*', '*', 'power'))


def summarize_without_power(package_root, ruleset, tree, copy, base, args):
    """The summarizer's scores on a copy of TREE without its results/*/*/power folders: 4.0.0's summarizer
    crashes on some orgs' power logs (UnboundLocalError: 'conversion_eff') before printing any score, and the
    performance score does not read them."""
    record = base + '.json'
    if args.reuse_official and os.path.exists(record):
        return dict(json.load(open(record)), seconds=0.0)
    fresh_copy(tree, copy)
    for folder in power_folders(copy):
        shutil.rmtree(folder)
    return run_official(package_root, 'result_summarizer', [copy, 'training', ruleset, '--csv', base + '.csv'],
                        record, base + '.out', args.timeout)


def check_org(org, args, ruleset, package_root, work, out_dir):
    """Runs the official package checker and result summarizer and trainbench review on one org; returns the raw
    results (also written to OUT_DIR/<org>.json)."""
    published = os.path.join(work, 'published', org)
    checked = os.path.join(work, 'checked', org)
    started = time.monotonic()
    base = os.path.join(out_dir, org)
    records = [base + '.package_checker.json', base + '.summarizer-published.json', base + '.summarizer-checked.json']
    if args.reuse_official and os.path.isdir(checked) and all(os.path.exists(r) for r in records):
        # the official tools' records of an earlier run on the same trees (the checked copy as they left it)
        package, *pair = [dict(json.load(open(r)), seconds=0.0) for r in records]
        summaries = dict(zip(('published', 'checked'), pair))
    else:
        fresh_copy(published, checked)
        checker_source = python_source(package_root, 'package_checker')
        summarizer_source = python_source(package_root, 'result_summarizer')
        checker_args = [checked, 'training', ruleset]
        if "'--log_output'" in checker_source:
            checker_args += ['--log_output', base + '.package_checker.log']
        package = run_official(package_root, 'package_checker', checker_args, records[0],
                               base + '.package_checker.out', args.timeout)
        summaries = {}
        for name, tree in (('published', published), ('checked', checked)):
            summarizer_args = [tree, 'training', ruleset]
            if "'--csv'" in summarizer_source:
                summarizer_args += ['--csv', f'{base}.summary-{name}.csv']
            summaries[name] = run_official(package_root, 'result_summarizer', summarizer_args,
                                           f'{base}.summarizer-{name}.json', f'{base}.summarizer-{name}.out',
                                           args.timeout)
    for name, tree in (('published', published), ('checked', checked)):
        if summaries[name].get('exception') and power_folders(tree):
            summaries[name + ' without power'] = summarize_without_power(
                package_root, ruleset, tree, os.path.join(work, 'without-power', name, org),
                f'{base}.summarizer-{name}-without-power', args)
    reviews = {name: review_tree(args.trainbench_copy, ruleset, tree, args.timeout)
               for name, tree in (('published', published), ('checked', checked))}
    report = report_tree(args.trainbench_copy, ruleset, published, base + '.report', args.timeout)
    raw = {'org': org, 'package_checker': package, 'summarizer': summaries, 'review': reviews, 'report': report,
           'seconds': round(time.monotonic() - started, 1)}
    with open(base + '.json', 'w') as f:
        json.dump(raw, f, indent=1, default=float)
    return raw


def score_text(value):
    return value if isinstance(value, str) else '—' if value is None else f'{value:.6f}'


def scores_agree(a, b):
    if isinstance(a, str) or isinstance(b, str):
        return False
    if a is None or b is None:
        return a is None and b is None
    return abs(a - b) <= SCORE_TOLERANCE


def official_block(rnd, raw, folder_key):
    """(verdict, errors, rcp) of the package checker for one results folder. verdict: pass, fail, skipped (a
    folder the checker lists but does not check: not a benchmark of the round), crash (the checker raised there or
    before reaching it)."""
    package = raw['package_checker']
    block = package['folders'].get(folder_key)
    exception = package.get('exception') or ''
    verdict_exception = rnd == '1.0' and exception.startswith('Exception: Found too many errors in logging')
    crashed = exception and not verdict_exception
    if block is None:  # listed but not checked (not a benchmark of the round), or not reached before a crash
        return ('crash', [exception], None) if crashed else ('skipped', [], None)
    if crashed and package.get('exception_folder') == folder_key:
        return 'crash', [exception], block.get('rcp')
    if rnd == '1.0':
        errors = [line for line in block.get('stdout_lines', []) if line.startswith('Expected ')]
        failed = [f for f, ok in block['compliance'].items() if not ok]
        tolerated = 4 if folder_key.endswith('/unet3d') else 1
        if len(failed) > tolerated:
            errors.append(f'{len(failed)} files do not comply (the 1.0.0 checker prints nothing): '
                          f'{", ".join(sorted(failed))}')
        if block.get('seeds') is False:
            errors.append('seed checker failed (the 1.0.0 checker prints its errors only)')
        if block.get('rcp') and not block['rcp'].get('passed'):
            errors.append(f"RCP Test Failed: {block['rcp'].get('message')}")
    else:
        errors = [m for m in block.get('errors', []) if any(p in m for p in PACKAGE_ERRORS)]
    return ('fail' if errors else 'pass'), errors, block.get('rcp')


def official_score(summary, system, benchmark, folder_key, rnd):
    if rnd == '1.0':
        olympic = summary.get('olympic', {}).get(folder_key)
        if olympic is not None:
            return 'crash' if 'exception' in olympic else olympic['value']
    else:
        scores = summary.get('scores', {}).get(f'results/{system}')
        if scores is not None:
            alias = 'maskrcnn' if benchmark == 'mask' else benchmark
            return scores.get(alias)
    return 'crash' if summary.get('exception') else None


def compare_org(rnd, raw, published_root):
    """Rows, one per results/<system>/<benchmark> folder of the published tree."""
    org = raw['org']
    results = os.path.join(published_root, org, 'results')
    reviews = raw['review']
    by_name = {}
    for name in ('published', 'checked'):
        review = reviews[name]
        by_name[name] = {s['name']: s for s in review.get('systems', [])}
    rows = []
    for system in sorted(os.listdir(results)) if os.path.isdir(results) else []:
        if not os.path.isdir(os.path.join(results, system)):
            continue
        desc_path = os.path.join(published_root, org, 'systems', system + '.json')
        try:
            division = json.load(open(desc_path)).get('division')
        except Exception:  # noqa: BLE001 -- a missing or broken description: no division
            division = None
        sysdesc = raw['package_checker']['systems'].get(f'systems/{system}.json')
        for benchmark in sorted(os.listdir(os.path.join(results, system))):
            if not os.path.isdir(os.path.join(results, system, benchmark)):
                continue
            key = f'results/{system}/{benchmark}'
            verdict, errors, rcp = official_block(rnd, raw, key)
            sysdesc_valid = None if sysdesc is None else ('crash' if 'exception' in sysdesc else sysdesc.get('valid'))
            if verdict in ('pass', 'fail') and rnd in SYSDESC_COUNTS and sysdesc_valid is False:
                verdict = 'fail'
                errors = errors + ['system description: ' + '; '.join(sysdesc.get('messages', [])[:2])]
            official = {'verdict': verdict, 'errors': errors, 'sysdesc': sysdesc_valid,
                        'rcp': None if rcp is None else
                        {'passed': rcp.get('passed'), 'message': rcp.get('message', rcp.get('exception')),
                         'norm': rcp.get('norm')},
                        'without_power': []}
            for name in ('published', 'checked'):
                score = official_score(raw['summarizer'][name], system, benchmark, key, rnd)
                fallback = raw['summarizer'].get(name + ' without power')
                if score == 'crash' and fallback is not None:
                    score = official_score(fallback, system, benchmark, key, rnd)
                    official['without_power'].append(name)
                official['score_' + name] = score
            ours = {}
            for name in ('published', 'checked'):
                review = reviews[name]
                if 'refused' in review:
                    ours[name] = {'verdict': 'refused', 'score': 'refused', 'rcp': None, 'reasons': [review['refused']]}
                    continue
                entry_system = by_name[name].get(system, {})
                entry = next((b for b in entry_system.get('benchmarks', []) if b['benchmark'] == benchmark), None)
                sysdesc_errors = [f['message'] for f in entry_system.get('findings', []) if f['severity'] == 'error'
                                  and (f['file'] == entry_system.get('description') or 'describes this system' in
                                       f['message'])]
                if entry is None:
                    ours[name] = {'verdict': 'absent', 'score': None, 'rcp': None,
                                  'reasons': [f['message'] for f in entry_system.get('findings', [])
                                              if benchmark in f['file'] and f['severity'] == 'error'][:2]}
                    continue
                rcp_entry = entry.get('rcp')
                ours[name] = {
                    'verdict': 'pass' if entry['verdict'] == 'VALID' and not sysdesc_errors else 'fail',
                    'benchmark_verdict': entry['verdict'],
                    'score': entry.get('score_minutes'),
                    'rcp': {'passed': rcp_entry['passed'], 'message': rcp_entry['outcome'],
                            'norm': rcp_entry.get('normalization_factor'), 'explanation': rcp_entry.get('explanation')}
                    if rcp_entry and rcp_entry.get('required') else None,
                    'reasons': (entry.get('invalid_reasons') or []) + sysdesc_errors}
            mine = ours['published']
            diffs, crashes = [], []
            if official['verdict'] == 'skipped' and mine['verdict'] == 'absent':
                status = 'skipped'
            else:
                for aspect, theirs_score, mine_score in (
                        ('score (published)', official['score_published'], mine['score']),
                        ('score (after package checker)', official['score_checked'], ours['checked']['score'])):
                    if theirs_score == 'crash':
                        crashes.append(aspect)
                    elif not scores_agree(theirs_score, mine_score):
                        diffs.append(aspect)
                theirs_rcp, mine_rcp = official['rcp'], mine['rcp']
                if official['verdict'] == 'crash':
                    crashes.append('package checker')
                else:
                    if (theirs_rcp is None) != (mine_rcp is None) or (
                            theirs_rcp and (bool(theirs_rcp['passed']) != bool(mine_rcp['passed'])
                                            or theirs_rcp['message'] != mine_rcp['message'])):
                        diffs.append('RCP')
                    if official['verdict'] != mine['verdict']:
                        diffs.append('verdict')
                status = 'disagree' if diffs else 'crash' if crashes else 'agree'
            rows.append({'org': org, 'system': system, 'benchmark': benchmark, 'division': division,
                         'status': status, 'diffs': diffs, 'crashes': crashes, 'official': official,
                         'ours': ours})
    return rows


def org_verdicts(rnd, raw):
    package = raw['package_checker']
    exception = package.get('exception') or ''
    if rnd == '1.0':
        if exception.startswith('Exception: Found too many errors'):
            official = 'fail'
        elif exception:
            official = 'crash'
        else:
            official = 'fail' if any(s.get('valid') is False for s in package['systems'].values()) else 'pass'
    else:
        final = package.get('final') or ''
        official = 'crash' if exception else 'pass' if 'FOUND NO ERRORS' in final else 'fail' if final else 'crash'
    review = raw['review']['published']
    ours = 'refused' if 'refused' in review else 'pass' if review.get('verdict') == 'VALID' else 'fail'
    return official, ours, exception


def rcp_text(rcp):
    if rcp is None:
        return 'not run'
    return f"{'Passed' if rcp.get('passed') else 'Failed'}: {rcp.get('message')}"


def packages(args):
    started = time.monotonic()
    rnd = args.round
    ruleset = f'{rnd}.0'
    tag = args.tag or PACKAGE_TAGS.get(rnd) or round_tag(args.logging, rnd)
    work = os.path.abspath(args.work or f'/tmp/rounds/pkg/{rnd}')
    out_dir = os.path.join(work, 'out')
    os.makedirs(out_dir, exist_ok=True)
    package_root = os.path.abspath(os.path.join(args.logging_work or f'/tmp/rounds/work/{rnd}/logging', tag))
    logging_commit = export(args.logging, tag, ['mlperf_logging'], package_root)
    t0 = time.monotonic()
    results_commit, _, missing = export_blobs(args.results, os.path.join(work, 'published'), ORG_TREE_RE)
    excluded = exclude_incomplete_folders(os.path.join(work, 'published'), missing)
    export_seconds = round(time.monotonic() - t0, 1)
    args.trainbench_copy = snapshot_trainbench(os.path.abspath(args.trainbench), os.path.join(work, 'trainbench'))
    published = os.path.join(work, 'published')
    orgs = sorted(o for o in os.listdir(published) if os.path.isdir(os.path.join(published, o, 'results')))
    if args.only:
        orgs = [o for o in orgs if o in args.only.split(',')]
    print(f'round {rnd}: {len(orgs)} orgs, mlperf_logging {tag} ({logging_commit[:12]}), ruleset {ruleset}, '
          f'{len(missing)} files missing from the mirror ({len(excluded)} results folders left out); '
          f'export {export_seconds} s', file=sys.stderr)
    import concurrent.futures
    raws = {}
    with concurrent.futures.ThreadPoolExecutor(max_workers=max(1, min(args.jobs, 2))) as pool:
        futures = {pool.submit(check_org, org, args, ruleset, package_root, work, out_dir): org for org in orgs}
        for future in concurrent.futures.as_completed(futures):
            org = futures[future]
            raws[org] = future.result()
            print(f'  {org}: {raws[org]["seconds"]} s ({len(raws)}/{len(orgs)}, '
                  f'{time.monotonic() - started:.0f} s)', file=sys.stderr)
    rows, orgs_table = [], []
    for org in orgs:
        rows += compare_org(rnd, raws[org], published)
        orgs_table.append((org, *org_verdicts(rnd, raws[org])))
    wall = round(time.monotonic() - started, 1)
    import hashlib
    binary = os.path.abspath(args.trainbench)
    out = {'trainbench': {'path': binary, 'mtime': time.strftime('%Y-%m-%d %H:%M:%S', time.gmtime(
               os.stat(args.trainbench_copy).st_mtime)), 'sha256': hashlib.sha256(
               open(args.trainbench_copy, 'rb').read()).hexdigest()[:16]},
           'round': rnd, 'ruleset': ruleset, 'logging_tag': tag, 'logging_commit': logging_commit,
           'results_commit': results_commit, 'wall_s': wall, 'export_s': export_seconds,
           'org_seconds': {o: raws[o]['seconds'] for o in orgs}, 'missing_files': len(missing),
           'excluded_folders': excluded,
           'crashes': {o: {label: f"{raw_tool.get('exception')} (in {raw_tool.get('exception_folder')})"
                           for label, raw_tool in (('package checker', raws[o]['package_checker']),
                                                   ('result summarizer (published)',
                                                    raws[o]['summarizer']['published']),
                                                   ('result summarizer (after package checker)',
                                                    raws[o]['summarizer']['checked']))
                           if raw_tool.get('exception')} for o in orgs},
           'orgs': [{'org': o, 'official': a, 'review': b, 'exception': e} for o, a, b, e in orgs_table],
           'reports': {o: compare_report(raws[o], out_dir) for o in orgs},
           'rows': rows}
    with open(args.out or os.path.join(work, 'packages.json'), 'w') as f:
        json.dump(out, f, indent=1, default=float)
    print_packages(out)
    return 1 if any(r['status'] != 'agree' and r['status'] != 'skipped' for r in rows) else 0


def print_packages(out):
    rows = out['rows']
    counts = collections.Counter(r['status'] for r in rows)
    checked = counts['agree'] + counts['disagree']
    print(f"## Round {out['round']} packages (ruleset {out['ruleset']}, mlperf_logging {out['logging_tag']}, "
          f"{out['wall_s']:.0f} s)\n")
    print('| round | orgs | systems×benchmarks checked | agree | disagree | official tool crashed (rest agrees) | '
          'skipped by both | left out (mirror lacks files) |\n|---|---|---|---|---|---|---|---|')
    print(f"| {out['round']} | {len(out['orgs'])} | {checked + counts['crash']} | {counts['agree']} | "
          f"{counts['disagree']} | {counts['crash']} | {counts['skipped']} | {len(out['excluded_folders'])} |\n")
    crash_reasons = collections.defaultdict(list)
    for r in rows:
        for aspect in r.get('crashes', []):
            tool = 'package checker' if aspect == 'package checker' else 'result summarizer (' + aspect.split('(')[1]
            crash_reasons[(tool, out['crashes'].get(r['org'], {}).get(tool, ''))].append(r)
    if crash_reasons:
        print('| official tool crashed | results | example | exception |\n|---|---|---|---|')
        for (tool, text), group in sorted(crash_reasons.items(), key=lambda g: -len(g[1])):
            print(f"| {tool} | {len(group)} | {group[0]['org']}/{group[0]['system']}/{group[0]['benchmark']} | "
                  f"{cell(text)} |")
        print()
    without_power = [r for r in rows if r['official'].get('without_power')]
    if without_power:
        print(f"{len(without_power)} results' official scores come from the summarizer on a copy without power/ "
              f"folders, as it crashes on the published tree ({', '.join(sorted({r['org'] for r in without_power}))})."
              "\n")
    aspects = collections.Counter(d for r in rows for d in r['diffs'])
    if aspects:
        print('Disagreeing aspects: ' + ', '.join(f'{k} {v}' for k, v in aspects.most_common()) + '\n')
    bad = [r for r in rows if r['status'] == 'disagree']
    if bad:
        print('| result | aspect | official | trainbench |\n|---|---|---|---|')
    for r in bad:
        name = f"{r['org']}/{r['system']}/{r['benchmark']}"
        theirs, mine, mine_checked = r['official'], r['ours']['published'], r['ours']['checked']
        for aspect in r['diffs']:
            if aspect == 'score (published)':
                a, b = score_text(theirs['score_published']), score_text(mine['score'])
            elif aspect == 'score (after package checker)':
                a, b = score_text(theirs['score_checked']), score_text(mine_checked['score'])
                if theirs['rcp'] and theirs['rcp'].get('norm'):
                    a += f" (RCP norm {theirs['rcp']['norm']:.6f})"
                if mine['rcp'] and mine['rcp'].get('norm'):
                    b += f" (RCP norm {mine['rcp']['norm']:.6f})"
            elif aspect == 'RCP':
                a, b = rcp_text(theirs['rcp']), rcp_text(mine['rcp'])
                if mine['rcp'] and mine['rcp'].get('explanation'):
                    b += f" ({mine['rcp']['explanation']})"
            else:
                a = theirs['verdict'] + (': ' + '; '.join(theirs['errors']) if theirs['errors'] else '')
                b = mine['verdict'] + (' (' + mine.get('benchmark_verdict', '') + ')' if mine.get('benchmark_verdict')
                                       else '') + (': ' + '; '.join(mine['reasons'][:3]) if mine['reasons'] else '')
            print(f'| {name} | {aspect} | {cell(a)} | {cell(b)} |')
    disagreeing_orgs = [o for o in out['orgs'] if o['official'] != o['review']]
    print(f"\nOrg-level package verdicts: {len(out['orgs']) - len(disagreeing_orgs)} of {len(out['orgs'])} agree")
    if disagreeing_orgs:
        print('\n| org | package checker | review |\n|---|---|---|')
        for o in disagreeing_orgs:
            print(f"| {o['org']} | {o['official']}{': ' + cell(o['exception'])[:200] if o['exception'] else ''} | "
                  f"{o['review']} |")
    reports = {o: r for o, r in out.get('reports', {}).items() if r is not None}
    if reports:
        differ = [(o, *d) for o, r in reports.items() for d in r['differ']]
        print(f"\n`trainbench report` (report.csv) against the result summarizer's CSV of the published tree, "
              f"{len(reports)} orgs: {sum(r['compared'] for r in reports.values())} scores in both, "
              f"{len(differ)} differ; scores only the summarizer gives: "
              f"{sum(len(r['only_summarizer']) for r in reports.values())}, only the report: "
              f"{sum(len(r['only_report']) for r in reports.values())}")
        for o, key, theirs, mine in differ[:20]:
            print(f'- {o}/{key}: summarizer {theirs:.6f}, report {mine:.3f}')
        for label, field in (('only the summarizer', 'only_summarizer'), ('only the report', 'only_report')):
            keys = [f'{o}/{k}' for o, r in reports.items() for k in r[field]]
            if keys:
                print(f"- {label}: {', '.join(keys[:12])}{' …' if len(keys) > 12 else ''}")
    print(f"\ntrainbench {out['trainbench']['path']} (built {out['trainbench']['mtime']} UTC, sha256 "
          f"{out['trainbench']['sha256']}…)")
    print(f"\nwall {out['wall_s']} s (export {out['export_s']} s); per org: " +
          ', '.join(f'{o} {s} s' for o, s in sorted(out['org_seconds'].items(), key=lambda x: -x[1])[:8]))


# ------------------------------------------------------------------------------------------- _tool (child side)

def tool(args):
    """Runs one official tool in this process, as `python -m mlperf_logging.TOOL ARGS` from the package root,
    recording per results folder what it decided: the package checker's ERROR lines (1.1.0 on) or printed lines
    (1.0.0), each log's compliance verdict, the seed checker's and the RCP checker's answers, the power checker's;
    each system description's verdict; the result summarizer's scores per system (the return value of
    _compute_strong_scaling_scores, with the scaling factor applied) and olympic means per folder (1.0.0)."""
    import glob as glob_module
    import importlib
    import logging
    import runpy
    root = os.path.abspath(args.package_root)
    tool_args = args.tool_args[1:] if args.tool_args[:1] == ['--'] else args.tool_args
    org = os.path.abspath(tool_args[0])
    ruleset = tool_args[2]
    os.chdir(root)  # the 1.0.0 RCP checker reads its tables relative to the working directory
    sys.path.insert(0, root)
    record = {'tool': args.tool, 'args': tool_args, 'folders': {}, 'listed': [], 'systems': {}, 'scores': {},
              'olympic': {}, 'log': [], 'stdout': [], 'exception': None, 'exception_folder': None, 'final': None}
    current = {'folder': None, 'system': None}

    def rel(path):
        return os.path.relpath(os.path.abspath(path), org)

    def entry(folder=None):
        key = rel(folder) if folder else current['folder']
        if key is None:
            return None
        return record['folders'].setdefault(key, {'errors': [], 'log': [], 'stdout_lines': [], 'compliance': {}})

    def note(level, text):
        text = str(text)
        if current['system']:
            record['systems'].setdefault(current['system'], {'messages': []})['messages'].append(text[:1000])
            return
        if 'PACKAGE CHECKER FOUND' in text:
            record['final'] = text
        block = entry()
        target = block['log'] if block else record['log']
        if level == 'ERROR' and block:
            block['errors'].append(text[:3000])
        elif len(target) < 200 and level != 'INFO' or 'RCP' in text:
            target.append(f'{level}: {text[:500]}')

    real_glob = glob_module.glob

    def glob(pattern, *a, **k):
        if pattern.endswith('/result_*.txt') and not current['system']:
            current['folder'] = rel(pattern[:-len('/result_*.txt')])
            entry()
        return real_glob(pattern, *a, **k)
    glob_module.glob = glob

    class Recorder(logging.Handler):
        def emit(self, rec):
            try:
                note(rec.levelname, rec.getMessage())
            except Exception:  # noqa: BLE001 -- a bad format string in the tool's own message
                note(rec.levelname, str(rec.msg))
    recorder = Recorder(level=logging.INFO)
    root_logger = logging.getLogger()
    root_logger.addHandler(recorder)
    root_logger.setLevel(logging.INFO)
    real_basic_config = logging.basicConfig

    def basic_config(*a, **k):  # the tools' main() configures the root logger when it has no handler yet
        root_logger.removeHandler(recorder)
        real_basic_config(*a, **k)
        root_logger.addHandler(recorder)
    logging.basicConfig = basic_config

    class Tee(io.TextIOBase):
        def __init__(self, real):
            self.real, self.pending = real, ''

        def write(self, text):
            self.real.write(text)
            self.pending += text
            while '\n' in self.pending:
                line, self.pending = self.pending.split('\n', 1)
                block = entry()
                if current['system']:
                    note('PRINT', line)
                elif block is not None:
                    if len(block['stdout_lines']) < 400:
                        block['stdout_lines'].append(line[:500])
                elif len(record['stdout']) < 400:
                    record['stdout'].append(line[:500])
            return len(text)

        def flush(self):
            self.real.flush()
    sys.stdout = Tee(sys.stdout)

    from mlperf_logging.compliance_checker import mlp_compliance
    real_compliance = mlp_compliance.main

    def compliance(filename, *a, **k):
        result = real_compliance(filename, *a, **k)
        block = entry()
        if block is not None:
            block['compliance'][os.path.basename(filename)] = bool(result[0])
        return result
    mlp_compliance.main = compliance

    from mlperf_logging.rcp_checker import rcp_checker

    def record_rcp(folder, call):
        block = entry(folder)
        try:
            result = call()
        except BaseException as e:
            block['rcp'] = {'exception': f'{type(e).__name__}: {e}'}
            raise
        block['rcp'] = {'passed': bool(result[0]), 'message': result[1],
                        'norm': float(result[2]) if len(result) > 2 and result[2] is not None else None}
        return result
    if hasattr(rcp_checker, 'check_directory'):
        real_check_directory = rcp_checker.check_directory
        rcp_checker.check_directory = lambda folder, *a, **k: record_rcp(
            folder, lambda: real_check_directory(folder, *a, **k))
    else:
        real_method = rcp_checker.RCP_Checker._check_directory
        rcp_checker.RCP_Checker._check_directory = lambda self, folder, *a, **k: record_rcp(
            folder, lambda: real_method(self, folder, *a, **k))

    system_desc = importlib.import_module('mlperf_logging.system_desc_checker.system_desc_checker')
    system_function = 'check_system_desc' if hasattr(system_desc, 'check_system_desc') else 'check_training_system_desc'
    real_system = getattr(system_desc, system_function)

    def check_system(json_file, *a, **k):
        key = rel(json_file)
        saved, current['folder'], current['system'] = current['folder'], None, key
        result_entry = record['systems'].setdefault(key, {'messages': []})
        try:
            result = real_system(json_file, *a, **k)
            result_entry['valid'] = bool(result[0])
            return result
        except BaseException as e:
            result_entry['exception'] = f'{type(e).__name__}: {e}'
            raise
        finally:
            current['folder'], current['system'] = saved, None
    setattr(system_desc, system_function, check_system)

    if args.tool == 'package_checker':
        package = importlib.import_module('mlperf_logging.package_checker.package_checker')
        seeds = importlib.import_module('mlperf_logging.package_checker.seed_checker')
        real_seeds = seeds.SeedChecker.check_seeds

        def check_seeds(self, *a, **k):
            ok = real_seeds(self, *a, **k)
            if entry() is not None:
                entry()['seeds'] = bool(ok)
            return ok
        seeds.SeedChecker.check_seeds = check_seeds
        try:
            power = importlib.import_module('mlperf_logging.package_checker.power_checker')
            real_power = power.PowerChecker.check_power

            def check_power(self, *a, **k):
                result = real_power(self, *a, **k)
                if entry() is not None:
                    entry()['power'] = {'valid': bool(result[0]), 'errors': sorted(result[1])}
                return result
            power.PowerChecker.check_power = check_power
        except ImportError:
            pass
        real_sub_folders = package._get_sub_folders

        def sub_folders(folder):
            found = real_sub_folders(folder)
            record['listed'] += [rel(f) for f in found]
            return found
        package._get_sub_folders = sub_folders
    else:
        summarizer = importlib.import_module('mlperf_logging.result_summarizer.result_summarizer')
        real_olympic = summarizer._compute_olympic_average

        def olympic(scores, dropped_scores, max_dropped_scores, *a, **k):
            key = current['folder']
            try:
                value = real_olympic(scores, dropped_scores, max_dropped_scores, *a, **k)
            except BaseException as e:
                record['olympic'][key] = {'exception': f'{type(e).__name__}: {e}'}
                raise
            if key not in record['olympic']:  # the time score comes first; 3.1.0 on also averages energy
                record['olympic'][key] = {'value': value, 'scores': sorted(scores), 'dropped': dropped_scores}
            return value
        summarizer._compute_olympic_average = olympic
        if hasattr(summarizer, '_compute_strong_scaling_scores'):
            real_strong = summarizer._compute_strong_scaling_scores

            def strong(desc, system_folder, *a, **k):
                result = real_strong(desc, system_folder, *a, **k)
                scores = result[0] if isinstance(result, tuple) else result
                record['scores'][rel(system_folder)] = {b: (None if v is None else float(v)) for b, v in scores.items()}
                return result
            summarizer._compute_strong_scaling_scores = strong

    sys.argv = [f'mlperf_logging.{args.tool}', *tool_args]
    try:
        runpy.run_module(f'mlperf_logging.{args.tool}', run_name='__main__', alter_sys=True)
    except SystemExit as e:
        if e.code not in (None, 0):
            record['exception'] = f'SystemExit: {e.code}'
    except BaseException as e:  # noqa: B036 -- the tool may raise anything; that is its verdict or its crash
        record['exception'] = f'{type(e).__name__}: {e}'[:3000]
        record['traceback'] = traceback.format_exc()[-4000:]
        record['exception_folder'] = current['folder']
    sys.stdout.flush()
    if args.tool == 'package_checker':
        # 1.0.0 checks the system descriptions only after the results passed (and a crash stops every tag):
        # check the ones it did not reach with the same function, for the per-system verdict.
        for json_file in sorted(real_glob(os.path.join(org, 'systems', '*.json'))):
            if rel(json_file) not in record['systems']:
                try:
                    if system_function == 'check_system_desc':
                        check_system(json_file, 'training', ruleset)
                    else:
                        check_system(json_file, ruleset)
                except BaseException:  # noqa: B036 -- recorded by check_system
                    pass
                record['systems'][rel(json_file)]['not_reached_by_package_checker'] = True
    with open(args.record, 'w') as f:
        json.dump(record, f, indent=1, default=float)
    return 0


def main():
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    sub = parser.add_subparsers(dest='command', required=True)
    for name in ('official', 'compare'):
        p = sub.add_parser(name)
        p.add_argument('--round', required=True, help='e.g. 3.1')
        p.add_argument('--results', required=True, help='git dir of mlcommons/training_results_v<round>')
        p.add_argument('--work', help='export folder (default /tmp/rounds/work/<round>)')
        p.add_argument('--only', help='only the logs whose relative path contains this text')
    p = sub.choices['official']
    p.add_argument('--logging', required=True, help='git dir of mlcommons/logging')
    p.add_argument('--out', required=True, help='JSON file to write')
    p.add_argument('--tag', help="mlcommons/logging tag or commit (default: the round's final tag)")
    p.add_argument('--jobs', type=int, default=2, help='worker processes (2 at most)')
    p.add_argument('--timeout', type=float, default=300, help='seconds per log (default 300)')
    p = sub.choices['compare']
    p.add_argument('--official', required=True, help="the official subcommand's JSON")
    p.add_argument('--trainbench', default='build/bin/trainbench')
    p.add_argument('--ruleset', help="ruleset for trainbench (default: the official JSON's)")
    p.add_argument('--batch', type=int, default=200, help='logs per trainbench review call')
    p = sub.add_parser('packages')
    p.add_argument('--round', required=True, help='e.g. 3.1')
    p.add_argument('--results', required=True, help='git dir of mlcommons/training_results_v<round>')
    p.add_argument('--logging', required=True, help='git dir of mlcommons/logging')
    p.add_argument('--tag', help="mlcommons/logging tag or commit (default: PACKAGE_TAGS, else the round's final tag)")
    p.add_argument('--trainbench', default='build/bin/trainbench')
    p.add_argument('--work', help='work folder (default /tmp/rounds/pkg/<round>)')
    p.add_argument('--logging-work',
                   help='where the logging exports are kept (default /tmp/rounds/work/<round>/logging)')
    p.add_argument('--out', help='JSON file to write (default <work>/packages.json)')
    p.add_argument('--only', help='only these orgs (comma-separated)')
    p.add_argument('--jobs', type=int, default=2, help='orgs checked at once (2 at most)')
    p.add_argument('--timeout', type=float, default=3600, help='seconds per tool run (default 3600)')
    p.add_argument('--reuse-official', action='store_true',
                   help="reuse the official tools' records of an earlier run (<work>/out, <work>/checked): "
                        'only trainbench runs again, e.g. after a rebuild')
    p = sub.add_parser('_tool', help=argparse.SUPPRESS)
    p.add_argument('--package-root', required=True)
    p.add_argument('--tool', required=True, choices=('package_checker', 'result_summarizer'))
    p.add_argument('--record', required=True)
    p.add_argument('tool_args', nargs=argparse.REMAINDER)
    args = parser.parse_args()
    return {'official': official, 'compare': compare, 'packages': packages, '_tool': tool}[args.command](args)


if __name__ == '__main__':
    sys.exit(main())
