#!/usr/bin/python3
"""Makes the per-round review fixtures of tests/review/rounds/ and their official verdicts (verdicts.tsv), which
tests/review/round_fixtures_test.cpp holds `trainbench review` to. Not run in CI: it reads the published results
of every round (bare git mirrors of mlcommons/training_results_v<round> and mlcommons/logging, gigabytes) and the
per-log official verdicts that `scripts/compare-rounds.py official` wrote; CI only reads what it leaves in
tests/review/rounds/. Needs Debian's python3 with pyyaml (apt-get install python3-yaml): run it as
/usr/bin/python3.

    /usr/bin/python3 scripts/make-round-fixtures.py \\
        --logging /work/.mirror/mlcommons+logging/repo \\
        --results '/work/.mirror/mlcommons+training_results_v{round}/repo' \\
        --official /tmp/rounds/official --work /tmp/rounds/work

For each round (1.0 ... 5.1) and each benchmark with published logs in it
(<org>/results/<system>/<benchmark>/result_*.txt):

  <benchmark>_pass.txt              the first log (sorted by path) the official checker passes, trimmed: only the
                                    :::MLLOG lines (any prefix before the token stripped, as the checker's parser
                                    does) whose key a rule file of the round names (a KEY's NAME, plus
                                    eval_accuracy), with "file" and "lineno" left out of their metadata (a line
                                    that is no JSON, as in two 4.1 Lambda logs, is kept as published when its
                                    "key" is a rule's)
  <benchmark>_no_run_stop.txt       the same without its run_stop line
  <benchmark>_published_failure.txt the first log the official checker fails, trimmed the same way (only where
                                    the round published one)

When that leaves the whole set over 1.5 MB (it does: ~10.6 MB, mostly the init_start and cache_clear lines of
every process of large systems), every file is made again with runs of consecutive lines of one key no rule
counts, same value and metadata (differing in time_ms only), cut to the run's first, last, earliest and latest
lines (see thin() and rule_keys() for which keys); no benchmark is left out (the largest fixture is ~140 kB;
what remains is evaluations, blocks, epochs and tensors, which rules count).

The round's official checker (mlperf_logging at the round's tag, in process, what compare-rounds.py runs) is then
run on every fixture as written, and verdicts.tsv records its verdict and first message per file; README.md
(generated) lists each fixture's source log. The fixtures are trimmed copies of the published logs: the verdict
recorded is the checker's on the trimmed file, not on the original.

Round settings: the logging tag of compare-rounds.py's ROUND_TAGS, except 3.1 at commit 9b25d4a (its tag
3.1.0-rc3 crashes on every log; see /tmp/rounds/official/SUMMARY.md) with the official verdicts of
<official>/extra/3.1-at-9b25d4a.json (compare-rounds.py official --round 3.1 --tag 9b25d4a); <official>/<round>.json
for the others. Exports of the results and of
mlperf_logging are made (or reused) under <work>/<round>/ with compare-rounds.py's export functions."""
import argparse, collections, importlib.util, json, os, re, shutil, sys

sys.dont_write_bytecode = True
HERE = os.path.dirname(os.path.abspath(__file__))
_spec = importlib.util.spec_from_file_location('compare_rounds', os.path.join(HERE, 'compare-rounds.py'))
cr = importlib.util.module_from_spec(_spec)
_spec.loader.exec_module(cr)

ROUNDS = ['1.0', '2.0', '2.1', '3.0', '3.1', '4.0', '4.1', '5.0', '5.1']
TAG_OVERRIDES = {'3.1': '9b25d4a'}
OFFICIAL_OVERRIDES = {'3.1': 'extra/3.1-at-9b25d4a.json'}
TOKEN = ':::MLLOG '
MESSAGE_CHARS = 200
SIZE_LIMIT = 1_500_000
OUT_DEFAULT = os.path.join(os.path.dirname(HERE), 'tests', 'review', 'rounds')


def rules_dir(package_root, ruleset):
    checker = os.path.join(package_root, 'mlperf_logging', 'compliance_checker')
    for name in (f'training_{ruleset}', ruleset):  # 1.0.0 keeps its rules in compliance_checker/1.0.0
        if os.path.isdir(os.path.join(checker, name)):
            return checker, name
    sys.exit(f'no rules for {ruleset} under {checker}')


# evaluations, blocks and epochs are counted by the review and scoring, whatever the rule files say
NEVER_THINNED = re.compile(r'(eval|block|epoch)_')
ACCUMULATING = ('+=', 'append', 'extend', '+ 1', '+1', 'count', 'len(', 'sum(')


def rule_keys(package_root, ruleset):
    """Every KEY NAME of the round's rule files, and of the folders they enqueue configs from (4.0's resnet
    configs are 3.1.0's), plus eval_accuracy; and of those the keys no rule counts: every record of the key
    requires at most AT_LEAST_ONE and has no ATLEAST_ONE_CHECK, its PRE/POST code accumulates nothing, no
    BEGIN/END code names it, and it is no eval_*, block_* or epoch_* key.
    Returns (keys, uncounted keys, [folders read])."""
    import yaml
    checker, first = rules_dir(package_root, ruleset)
    keys, folders, todo = {'eval_accuracy'}, [], [first]
    counted, begin_end = set(), []
    while todo:
        folder = todo.pop()
        if folder in folders:
            continue
        folders.append(folder)
        for name in sorted(os.listdir(os.path.join(checker, folder))):
            if not name.endswith('.yaml'):
                continue
            text = open(os.path.join(checker, folder, name)).read()
            todo += re.findall(r"enqueue_config\('([^/']+)/", text)
            for record in yaml.safe_load(text) or []:
                if not isinstance(record, dict):
                    continue
                if isinstance(record.get('KEY'), dict) and 'NAME' in record['KEY']:
                    rule = record['KEY']
                    keys.add(rule['NAME'])
                    code = ' '.join(str(rule.get(field, '')) for field in ('PRE', 'POST'))
                    if (rule.get('REQ', 'AT_LEAST_ONE') != 'AT_LEAST_ONE' or 'ATLEAST_ONE_CHECK' in rule
                            or any(a in code for a in ACCUMULATING) or NEVER_THINNED.match(rule['NAME'])):
                        counted.add(rule['NAME'])
                else:
                    begin_end.append(json.dumps(record))
    named = ' '.join(begin_end)
    uncounted = {k for k in keys - counted if not re.search(r"""['"\\]%s['"\\]""" % re.escape(k), named)}
    return keys, uncounted, folders


FIELD_RES = [re.compile(r'\s*,\s*"%s"\s*:\s*%s' % (f, v)) for f, v in (('file', r'"(?:[^"\\]|\\.)*"'),
                                                                       ('lineno', r'-?\d+'))]
FIELD_FIRST_RES = [re.compile(r'"%s"\s*:\s*%s\s*(?:,\s*)?' % (f, v)) for f, v in (('file', r'"(?:[^"\\]|\\.)*"'),
                                                                                  ('lineno', r'-?\d+'))]


def drop_file_lineno(line, record, stats):
    """The line without metadata's "file" and "lineno", everything else left as written."""
    meta = record.get('metadata')
    if not isinstance(meta, dict) or not ({'file', 'lineno'} & set(meta)):
        return line
    wanted = dict(record, metadata={k: v for k, v in meta.items() if k not in ('file', 'lineno')})
    at = line.rfind('"metadata"')
    head, tail = line[:at], line[at:]
    for later, first in zip(FIELD_RES, FIELD_FIRST_RES):
        tail, n = later.subn('', tail, count=1)
        if not n:
            tail = first.sub('', tail, count=1)
    trimmed = head + tail
    try:
        if at >= 0 and json.loads(trimmed[len(TOKEN):]) == wanted:
            return trimmed
    except ValueError:
        pass
    stats['rewritten'] += 1  # written again by json.dumps: the mllog layout, numbers as Python prints them
    return TOKEN + json.dumps(wanted)


def trim(path, keys, stats):
    """The log's kept lines, as the checker's parser reads it (latin-1, universal newlines, the text from the
    last ':::MLLOG ' of a line on, stripped). A line that is no JSON is kept when its "key" is a rule's."""
    kept = []
    with open(path, encoding='latin-1') as f:
        for raw in f:
            if TOKEN not in raw:
                continue
            line = re.sub('.*' + TOKEN, TOKEN, raw).strip()
            try:
                record = json.loads(line[len(TOKEN):])
            except ValueError:
                record = None
            if not isinstance(record, dict):
                m = re.search(r'"key"\s*:\s*"([^"]*)"', line)
                if m and m.group(1) in keys:
                    stats['unparsed_kept'] += 1
                    kept.append(line)
                continue
            if record.get('key') in keys:
                kept.append(drop_file_lineno(line, record, stats))
    return kept


def thin(lines, uncounted, stats):
    """Runs of consecutive lines of one uncounted key with the same value and metadata (they differ in their
    time_ms only) cut to their first, last, earliest and latest lines, in file order."""
    def identity(line):
        try:
            record = json.loads(line[len(TOKEN):])
        except ValueError:
            return None
        if not isinstance(record, dict) or record.get('key') not in uncounted:
            return None
        return json.dumps([record.get('key'), record.get('value'), record.get('metadata'), record.get('event_type'),
                           record.get('namespace')], sort_keys=True)

    def time_ms(line):
        value = json.loads(line[len(TOKEN):]).get('time_ms')
        return value if isinstance(value, (int, float)) else 0

    out, i = [], 0
    while i < len(lines):
        ident = identity(lines[i])
        j = i + 1
        while ident is not None and j < len(lines) and identity(lines[j]) == ident:
            j += 1
        run = list(range(i, j))
        if len(run) == 1:
            out.append(lines[i])
            i = j
            continue
        keep = {run[0], run[-1], min(run, key=lambda k: time_ms(lines[k])),
                max(run, key=lambda k: time_ms(lines[k]))}
        stats['thinned_lines'] += len(run) - len(keep)
        out += [lines[k] for k in run if k in keep]
        i = j
    return out


def is_run_stop(line):
    try:
        return json.loads(line[len(TOKEN):]).get('key') == 'run_stop'
    except (ValueError, AttributeError):
        return re.search(r'"key"\s*:\s*"run_stop"', line) is not None


def write_lines(path, lines):
    with open(path, 'w', encoding='latin-1', newline='\n') as f:
        f.write(''.join(line + '\n' for line in lines))


def one_line(result):
    if result['verdict'] == 'pass':
        return ''
    if not result['messages']:
        return ''
    # the first message without the log line and context it quotes (compare-rounds.py's reason)
    return ' '.join(cr.reason(result['messages'][0]).split())[:MESSAGE_CHARS].replace('\t', ' ')


def make_round(args, rnd, out_root):
    ruleset = f'{rnd}.0'
    official_path = os.path.join(args.official, OFFICIAL_OVERRIDES.get(rnd, f'{rnd}.json'))
    official = json.load(open(official_path))
    logging_git = args.logging
    tag = TAG_OVERRIDES.get(rnd) or cr.round_tag(logging_git, rnd)
    work = os.path.join(args.work, rnd)
    results_git = args.results.format(round=rnd)
    results_dir = os.path.abspath(os.path.join(work, 'results'))
    results_commit, logs, _ = cr.export_logs(results_git, results_dir)
    package_root = os.path.abspath(os.path.join(work, 'logging', tag))
    logging_commit = cr.export(logging_git, tag, ['mlperf_logging'], package_root)
    if official['results_commit'] != results_commit or official['logging_commit'] != logging_commit:
        sys.exit(f'{official_path} was made at results {official["results_commit"][:12]} / logging '
                 f'{official["logging_commit"][:12]}, the exports are at {results_commit[:12]} / {logging_commit[:12]}')
    keys, uncounted, folders = rule_keys(package_root, ruleset)

    by_benchmark = collections.defaultdict(list)
    for log in sorted(official['logs']):
        by_benchmark[log.split('/')[3]].append(log)
    round_dir = os.path.join(out_root, rnd)
    shutil.rmtree(round_dir, ignore_errors=True)
    os.makedirs(round_dir)
    stats = collections.Counter()
    fixtures = []  # (relative fixture path, source log, kind)
    for benchmark in sorted(by_benchmark):
        group = by_benchmark[benchmark]
        passing = [l for l in group if official['logs'][l]['verdict'] == 'pass']
        failing = [l for l in group if official['logs'][l]['verdict'] == 'fail']
        if passing:
            lines = trim(os.path.join(results_dir, passing[0]), keys, stats)
            fixtures.append((f'{rnd}/{benchmark}_pass.txt', passing[0], 'pass', lines))
            fixtures.append((f'{rnd}/{benchmark}_no_run_stop.txt', passing[0], 'no_run_stop',
                             [l for l in lines if not is_run_stop(l)]))
        if failing:
            fixtures.append((f'{rnd}/{benchmark}_published_failure.txt', failing[0], 'published_failure',
                             trim(os.path.join(results_dir, failing[0]), keys, stats)))
    if args.thin:
        fixtures = [(relative, source, kind, thin(lines, uncounted, stats))
                    for relative, source, kind, lines in fixtures]
    for relative, _, _, lines in fixtures:
        write_lines(os.path.join(out_root, relative), lines)

    verdicts = {}
    cr.Pool(2, package_root, ruleset, args.timeout).run(
        [(relative, os.path.join(out_root, relative)) for relative, _, _, _ in fixtures],
        lambda key, result: verdicts.__setitem__(key, result))
    # A no_run_stop fixture is its pass fixture less the run_stop line: the test derives it (the same
    # bytes the checker was given here), so it is not kept.
    for relative, _, kind, _ in fixtures:
        if kind == 'no_run_stop':
            os.remove(os.path.join(out_root, relative))
    rows = []
    for relative, source, kind, lines in fixtures:
        result = verdicts[relative]
        if result['verdict'] not in ('pass', 'fail'):
            sys.exit(f'{relative}: the official checker gave no verdict: {result["messages"][:1]}')
        if result.get('parse_errors'):
            stats['fixtures_with_parse_errors'] += 1
        rows.append({'round': rnd, 'ruleset': ruleset, 'fixture': relative, 'verdict': result['verdict'],
                     'message': one_line(result), 'source': source, 'kind': kind,
                     'source_verdict': official['logs'][source]['verdict'],
                     'lines': len(lines), 'bytes': 0 if kind == 'no_run_stop' else
                     os.path.getsize(os.path.join(out_root, relative))})
    info = {'round': rnd, 'ruleset': ruleset, 'tag': tag, 'logging_commit': logging_commit,
            'results_commit': results_commit, 'folders': folders, 'keys': len(keys), 'stats': dict(stats),
            'uncounted': sorted(uncounted)}
    return info, rows


THINNING = """
That left the set over 1.5 MB (the many `init_start` and `cache_clear` lines of large systems, one per
process), so runs of consecutive lines of one key that no rule counts, with the same value and metadata (lines
that differ in `time_ms` only), were then cut to the run's first, last, earliest and latest lines. A key no
rule counts: every rule for it requires at most `AT_LEAST_ONE` and has no `ATLEAST_ONE_CHECK`, its
`PRE`/`POST` code accumulates nothing, no `BEGIN`/`END` code names it, and it is no `eval_*`, `block_*` or
`epoch_*` key (per round: see the `uncounted keys` column below). The checker's verdict was
taken on the thinned files. No benchmark was left out: what remains (evaluations, blocks, epochs, initialized
tensors, per-generation lines: lines the rules count) is at most {largest} kB a file.
"""


def readme(infos, rows, command, thinned):
    size = sum(r['bytes'] for r in rows)
    out = [f"""# Per-round review fixtures and the official verdicts on them

`round_fixtures_test.cpp` reviews every file listed in `verdicts.tsv` with `trainbench review`'s ruleset of
its round (`review_log_file(path, load_ruleset(ruleset))`) and requires `compliant() && target_reached`
exactly when the official MLPerf compliance checker of that round passes the file.

## Where the files come from

Every fixture is a trimmed copy of one result log published in `mlcommons/training_results_v<round>`
(at the commit listed below; the logs are Apache-2.0 licensed, as is the rest of those repositories), path
`<org>/results/<system>/<benchmark>/result_*.txt` as listed per fixture below. For every round and every
benchmark with published logs:

- `<benchmark>_pass.txt`: the first log (sorted by path) that the round's official checker passes;
- `<benchmark>_no_run_stop.txt`: the same trimmed log with its `run_stop` line removed (not kept: the test
  derives it from `<benchmark>_pass.txt`, byte for byte what the checker was given);
- `<benchmark>_published_failure.txt`: the first log the official checker fails, where the round
  published failing logs for that benchmark.

Which logs pass and fail was taken from `scripts/compare-rounds.py official`'s per-log verdicts on the whole
round.

## How they were trimmed

Only `:::MLLOG` lines are kept (any prefix before the token stripped, the line read from the last
`:::MLLOG ` on as the checker's parser reads it), and of those only the ones whose `key` some rule file
(YAML) of the round names in a `KEY` record's `NAME` (plus `eval_accuracy`); `"file"` and `"lineno"` are
removed from each line's `metadata`. Nothing else is changed: keys, values, other metadata and timestamps
are as published, line order is kept. A line that is not JSON (two 4.1 Lambda logs have one each, another
line's text run into it) is kept as published when its `"key"` is a rule's. A fixture with no line (1.0
`minigo_published_failure.txt`) comes from a published log without any `:::MLLOG` line.
{THINNING.format(largest=round(max(r['bytes'] for r in rows) / 1000)) if thinned else ''}
## Verdicts

`verdicts.tsv`: `round`, `ruleset`, fixture path (relative to this folder), the official checker's
verdict on the fixture file as committed (`pass` or `fail`), and its first message on one line (the message
without the log line and context it quotes, at most {MESSAGE_CHARS} characters; empty on a pass). The
checker is mlcommons/logging's `mlperf_logging.compliance_checker` at the tag or commit listed per round,
run in process as `python -m mlperf_logging.compliance_checker --usage training --ruleset X.Y.0 FILE` runs
it (`--ruleset 1.0.0 FILE` at 1.0.0), a fresh checker per file. The verdict is the checker's on the
trimmed file, which may differ from the one on the published log (e.g. a failure in a line the trim left
out); the source's verdict is listed below.

| round | ruleset | mlperf_logging | logging commit | results commit | fixtures | uncounted keys |
|---|---|---|---|---|---|---|"""]
    for info in infos:
        n = sum(1 for r in rows if r['round'] == info['round'])
        out.append(f"| {info['round']} | {info['ruleset']} | {info['tag']} | {info['logging_commit'][:12]} | "
                   f"{info['results_commit'][:12]} | {n} | {', '.join(info['uncounted'])} |")
    out.append(f"""
{len(rows)} fixtures, {size / 1e6:.2f} MB in all.

## Regenerating

Not run in CI (it needs the published results of every round, gigabytes, and the official per-log verdicts):

    {command}

with the per-log verdicts of every round made first by `scripts/compare-rounds.py official` into
`/tmp/rounds/official/<round>.json`, for 3.1 with `--tag 9b25d4a` into `/tmp/rounds/official/extra/3.1-at-9b25d4a.json`
(its final tag, 3.1.0-rc3, crashes on every log; see both scripts' docstrings).

## Sources
""")
    for info in infos:
        out.append(f"### Round {info['round']} (mlcommons/training_results_v{info['round']} @ "
                   f"{info['results_commit'][:12]})\n")
        out.append('| fixture | official verdict | source log | source verdict | lines | bytes |\n'
                   '|---|---|---|---|---|---|')
        for r in rows:
            if r['round'] == info['round']:
                source = r['source'] + (' without run_stop' if r['kind'] == 'no_run_stop' else '')
                out.append(f"| {r['fixture'].split('/', 1)[1]} | {r['verdict']} | {source} | {r['source_verdict']} | "
                           f"{r['lines']} | {r['bytes']} |")
        out.append('')
    return '\n'.join(out)


def main():
    if os.environ.get('PYTHONHASHSEED') != '0':  # the checker's message order follows set order
        os.execve(sys.executable, [sys.executable, *sys.argv], {**os.environ, 'PYTHONHASHSEED': '0'})
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument('--logging', default='/work/.mirror/mlcommons+logging/repo',
                        help='git dir of mlcommons/logging')
    parser.add_argument('--results', default='/work/.mirror/mlcommons+training_results_v{round}/repo',
                        help='git dir of mlcommons/training_results_v<round>, {round} standing for the round')
    parser.add_argument('--official', default='/tmp/rounds/official',
                        help="folder of compare-rounds.py official's <round>.json files")
    parser.add_argument('--work', default='/tmp/rounds/work', help='export folder (<work>/<round>/...)')
    parser.add_argument('--out', default=OUT_DEFAULT, help='fixture folder (default tests/review/rounds)')
    parser.add_argument('--rounds', default=','.join(ROUNDS), help='comma-separated rounds (default all)')
    parser.add_argument('--timeout', type=float, default=120, help='seconds per fixture')
    args = parser.parse_args()
    rounds = args.rounds.split(',')
    for args.thin in (False, True):
        infos, rows = [], []
        for rnd in rounds:
            info, round_rows = make_round(args, rnd, args.out)
            infos.append(info)
            rows += round_rows
            counts = collections.Counter(r['verdict'] for r in round_rows)
            print(f"round {rnd}: {len(round_rows)} fixtures {dict(counts)}, {sum(r['bytes'] for r in round_rows)} "
                  f"bytes, {info['keys']} rule keys from {','.join(info['folders'])}, {info['stats']}",
                  file=sys.stderr)
        size = sum(r['bytes'] for r in rows)
        if size <= SIZE_LIMIT or args.thin:
            break
        print(f'{size} bytes, over {SIZE_LIMIT}: again, thinning runs of uncounted keys', file=sys.stderr)
    if rounds != ROUNDS:
        print('not all rounds: verdicts.tsv and README.md left as they were', file=sys.stderr)
        return 0
    with open(os.path.join(args.out, 'verdicts.tsv'), 'w') as f:
        f.write('# official MLPerf compliance checker verdicts on the fixtures as committed; made by '
                'scripts/make-round-fixtures.py\n')
        for info in infos:
            f.write(f"# round {info['round']}: ruleset {info['ruleset']}, mlcommons/logging {info['tag']} "
                    f"({info['logging_commit']}), mlcommons/training_results_v{info['round']} "
                    f"{info['results_commit']}\n")
        f.write('# round\truleset\tfixture\tverdict\tfirst official message\n')
        for r in rows:
            f.write(f"{r['round']}\t{r['ruleset']}\t{r['fixture']}\t{r['verdict']}\t{r['message']}\n")
    command = ('/usr/bin/python3 scripts/make-round-fixtures.py --logging /work/.mirror/mlcommons+logging/repo '
               "--results '/work/.mirror/mlcommons+training_results_v{round}/repo' "
               '--official /tmp/rounds/official --work /tmp/rounds/work')
    with open(os.path.join(args.out, 'README.md'), 'w') as f:
        f.write(readme(infos, rows, command, args.thin))
    size = sum(r['bytes'] for r in rows)
    print(f'{len(rows)} fixtures, {size} bytes', file=sys.stderr)
    unexpected = [r for r in rows if (r['kind'] == 'pass') != (r['verdict'] == 'pass')]
    for r in unexpected:
        print(f"note: {r['fixture']} ({r['kind']}) is {r['verdict']}: {r['message']}", file=sys.stderr)
    if size > SIZE_LIMIT:
        print(f'warning: the fixtures are {size} bytes, over {SIZE_LIMIT}', file=sys.stderr)
    return 0


if __name__ == '__main__':
    sys.exit(main())
