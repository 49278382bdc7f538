#!/usr/bin/python3
"""Reviews every published MLPerf Training v3.0 gpt3 result with the official 3.0.0 tools and with
`trainbench review`, and prints the comparison table of docs/review.md ("GPT-3 at 3.0.0"). Not run in CI:
it needs the two repositories (the session's `fetch` tool, or clones) and Debian's python3 with numpy,
scipy, pyyaml and pandas (apt-get install python3-numpy python3-scipy python3-yaml python3-pandas).

  /usr/bin/python3 scripts/compare-gpt3-v3.0.py --logging /work/.mirror/mlcommons+logging/repo \\
      --results /work/.mirror/mlcommons+training_results_v3.0/repo [--trainbench build/bin/trainbench]

Both repositories are read with git (bare mirrors do), at logging tag 3.0.0-rc2 (the state the v3.0 round
was checked with) and the results' HEAD. Per log it compares the compliance checker's verdict with the
review's (compliant and target reached); per system the package checker's RCP verdict and message, the
result summarizer's score on the folder as published, and the summarizer's score after the package checker
has written scaling.json, each with the review's on the same tree. Exit status 1 when anything disagrees."""
import argparse, glob, io, json, os, shutil, subprocess, sys, tarfile, tempfile

LOGGING_TAG = '3.0.0-rc2'


def export(git_dir, rev, paths, into):
    data = subprocess.run(['git', '-C', git_dir, 'archive', rev, *paths], check=True, capture_output=True).stdout
    tarfile.open(fileobj=io.BytesIO(data)).extractall(into)


def make_packages(results_repo, work):
    """<work>/published/<org>/{systems,results/<system>/gpt3,benchmarks/gpt3}: the gpt3 results only."""
    listing = subprocess.run(['git', '-C', results_repo, 'ls-tree', '-r', '--name-only', 'HEAD'], check=True,
                             capture_output=True, text=True).stdout.split('\n')
    folders = sorted({os.path.dirname(p) for p in listing if '/results/' in p and p.split('/')[-2] == 'gpt3'})
    systems = [f'{f.split("/")[0]}/systems/{f.split("/")[2]}.json' for f in folders]
    export(results_repo, 'HEAD', folders + systems, os.path.join(work, 'published'))
    for folder in folders:
        os.makedirs(os.path.join(work, 'published', folder.split('/')[0], 'benchmarks', 'gpt3'), exist_ok=True)
    return folders


def python(logging_dir, *args):
    return subprocess.run(['/usr/bin/python3', '-m', *args], cwd=logging_dir, capture_output=True, text=True)


def official_log_verdict(logging_dir, log):
    out = python(logging_dir, 'mlperf_logging.compliance_checker', '--usage', 'training', '--ruleset', '3.0.0',
                 log, '--log_output', os.devnull)
    text = out.stdout + out.stderr
    return 'pass' if 'SUCCESS' in text else 'fail' if 'FAILED' in text else 'crash'


def official_package(logging_dir, org_dir):
    """The package checker's RCP message per system (it writes scaling.json into the tree)."""
    log = org_dir + '.package_checker.log'
    python(logging_dir, 'mlperf_logging.package_checker', org_dir, 'training', '3.0.0', '--log_output', log)
    text = open(log).read()
    verdicts = {}
    for block in text.split('Running compliance checks in dir')[1:]:
        system = block.split('System ', 1)[1].split('\n', 1)[0].strip()
        rcp = [l for l in block.split('\n') if 'RCP Test' in l]
        verdicts[system] = rcp[0].split('RCP Test ', 1)[1].strip() if rcp else 'no RCP line'
    return verdicts, 'PACKAGE CHECKER FOUND NO ERRORS' in text


def official_scores(logging_dir, org_dir):
    csv = org_dir + '.summary.csv'
    python(logging_dir, 'mlperf_logging.result_summarizer', org_dir, 'training', '3.0.0', '--csv', csv)
    import pandas
    table = pandas.read_csv(csv)
    return {row['system']: row['gpt3'] for _, row in table.iterrows()}


def review(trainbench, *args):
    out = subprocess.run([trainbench, 'review', '--json', *args], capture_output=True, text=True)
    if out.returncode == 2:
        sys.exit(f'trainbench review {" ".join(args)} refused its input:\n{out.stderr}')
    return json.loads(out.stdout)


def review_benchmarks(trainbench, org_dir):
    result = {}
    for system in review(trainbench, org_dir)['systems']:
        for benchmark in system['benchmarks']:
            result[system['name']] = benchmark
    return result


def main():
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument('--logging', required=True, help='git dir of mlcommons/logging')
    parser.add_argument('--results', required=True, help='git dir of mlcommons/training_results_v3.0')
    parser.add_argument('--trainbench', default='build/bin/trainbench')
    parser.add_argument('--keep', help='work folder to keep (default: a temporary one)')
    args = parser.parse_args()
    trainbench = os.path.abspath(args.trainbench)
    work = args.keep or tempfile.mkdtemp(prefix='gpt3-v3.0-')
    export(args.logging, LOGGING_TAG, ['mlperf_logging'], os.path.join(work, 'logging'))
    logging_dir = os.path.join(work, 'logging')
    folders = make_packages(args.results, work)
    shutil.copytree(os.path.join(work, 'published'), os.path.join(work, 'checked'))
    orgs = sorted({f.split('/')[0] for f in folders})

    disagreements = 0
    print('| log | compliance checker | review | agree |\n|---|---|---|---|')
    for folder in folders:
        for log in sorted(glob.glob(os.path.join(work, 'published', folder, 'result_*.txt'))):
            official = official_log_verdict(logging_dir, log)
            run = review(trainbench, '--log', log)[0]
            ours = 'pass' if run['compliant'] and run['target_reached'] else 'fail'
            disagreements += official != ours
            print(f'| {os.path.relpath(log, os.path.join(work, "published"))} | {official} | {ours} | '
                  f'{"yes" if official == ours else "**no**"} |')

    print('\n| system | package checker RCP | review RCP | summarizer (published) | review | '
          'summarizer (after package checker) | review | agree |\n|---|---|---|---|---|---|---|---|')
    for org in orgs:
        rcp, package_ok = official_package(logging_dir, os.path.join(work, 'checked', org))
        published = official_scores(logging_dir, os.path.join(work, 'published', org))
        checked = official_scores(logging_dir, os.path.join(work, 'checked', org))
        ours_published = review_benchmarks(trainbench, os.path.join(work, 'published', org))
        ours_checked = review_benchmarks(trainbench, os.path.join(work, 'checked', org))
        for folder in [f for f in folders if f.startswith(org + '/')]:
            system = folder.split('/')[2]
            desc = json.load(open(os.path.join(work, 'published', org, 'systems', system + '.json')))
            name = desc['system_name']
            mine, mine_checked = ours_published[system], ours_checked[system]
            official_rcp = ('Passed: ' if 'Passed' in rcp[system] else 'Failed: ') + rcp[system].split(': ', 1)[-1]
            ours_rcp = ('Passed: ' if mine['rcp']['passed'] else 'Failed: ') + mine['rcp']['outcome']
            scores = [published[name], mine['score_minutes'], checked[name], mine_checked['score_minutes']]
            agree = (official_rcp == ours_rcp and package_ok == (mine['verdict'] == 'VALID')
                     and abs(scores[0] - scores[1]) < 5e-7 and abs(scores[2] - scores[3]) < 5e-7)
            disagreements += not agree
            print(f'| {org}/{system} | {official_rcp} | {ours_rcp} | {scores[0]:.6f} | {scores[1]:.6f} | '
                  f'{scores[2]:.6f} | {scores[3]:.6f} | {"yes" if agree else "**no**"} |')
    print(f'\n{disagreements} disagreement(s); work folder {work}')
    if not args.keep:
        shutil.rmtree(work)
    return 1 if disagreements else 0


if __name__ == '__main__':
    sys.exit(main())
