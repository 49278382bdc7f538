#!/usr/bin/python3
"""Writes rules/training_<round>/checker/ from mlcommons/logging: each round's compliance-checker YAML files
as that round's release tag holds them, stored as what changed from the round before.

  /usr/bin/python3 scripts/import-checker-rules.py --logging /work/.mirror/mlcommons+logging/repo

A round's files are compared with the previous round's after replacing the round in their own config paths
(`training_2.1.0/closed_{}.yaml` and `training_2.0.0/closed_{}.yaml` are the same rule); a file that differs
in anything else is stored whole and verbatim in the round's folder. checker.json names the round's files,
the round it builds on, and the tag and commit they came from; src/review/checker_configs.cpp resolves a
file through that chain. The round's RCP tables (rcp_checker/training_<round>/rcps_*.json) go to
rules/training_<round>/ the same way: stored when they differ from the table the round before resolves to
(src/review/ruleset.cpp follows the same chain). 1.1.0's tables are the final v1.1 ones trainbench already
holds, and a table with trainbench's own "note" (3.0.0's gpt3) is left as it is. Re-run it when a new round's rules are tagged (add the round to ROUNDS)."""
import argparse, json, os, re, shutil, subprocess

# The tag each round was checked with: the last release candidate before its results were published (HEAD
# where a round has no tag yet).
# Before 1.1.0 the folder was named without the usage ('1.0.0/' rather than 'training_1.0.0/').
# 3.1.0 is read at 9b25d4a ("fix last minute change in SD logs", 2023-10-05), the last commit to touch its
# files: its tag 3.1.0-rc3 crashes on every log (REQ.startswith('AT_LEAST') also matches AT_LEAST_ONE, fixed
# in 3aa5296 an hour and a half later), so the round's results were checked after it.
ROUNDS = [('1.0.0', '1.0.0'), ('1.1.0', '1.1.0-rc4'), ('2.0.0', '2.0.0'), ('2.1.0', '2.1.0'),
          ('3.0.0', '3.0.0-rc2'), ('3.1.0', '9b25d4a'), ('4.0.0', '4.0.0-rc3-rcp-prunning'),
          ('4.1.0', '4.1.0-rc4'), ('5.0.0', '5.0.0-rc3'), ('5.1.0', '5.1.0-rc4'), ('6.0.0', '6.0.0-rc6'),
          ('6.1.0', 'HEAD')]


# How each tag's mlp_compliance.py differs from today's engine where it decides verdicts:
# - before 2.0.0 a submission_* key's PRE/CHECK/POST ran on every line of it, not the first only;
# - 1.1.0-rc4 (lines 124-125, 231-232) made a failed initialized-tensors END check and a missing
#   weights_initialization line warnings ("can be ignored for 1.1.0").
ENGINE = {'1.0.0': {'submission_keys_once': False},
          '1.1.0': {'submission_keys_once': False, 'weights_initialization_warnings': True}}


def git(logging, *args):
    return subprocess.run(['git', '-C', logging, *args], check=True, capture_output=True, text=True).stdout


def round_folder(logging, tag, version):
    base = 'mlperf_logging/compliance_checker/'
    listed = git(logging, 'ls-tree', '--name-only', tag, base).split('\n')
    return next(f'{p}/' for p in (f'{base}training_{version}', f'{base}{version}') if p in listed)


def round_files(logging, tag, folder):
    names = [p[len(folder):] for p in git(logging, 'ls-tree', '-r', '--name-only', tag, folder).split('\n')
             if p.endswith('.yaml')]
    return {name: git(logging, 'show', f'{tag}:{folder}{name}') for name in sorted(names)}


def normalized(text, version):
    return re.sub(r'(training_)?' + re.escape(version) + '/', 'training_{round}/', text)


def resolved(rules, version, name, bases):
    """The text a round's file resolves to through the chain of rounds before it, or None."""
    while version:
        path = os.path.join(rules, f'training_{version}', name)
        if os.path.exists(path):
            return open(path).read()
        version = bases.get(version, '')
    return None


def import_rcp_tables(logging, rules, version, tag, bases):
    base = 'mlperf_logging/rcp_checker/'
    folders = git(logging, 'ls-tree', '--name-only', tag, base).split('\n')
    folder = next(f'{p}/' for p in (f'{base}training_{version}', f'{base}{version}') if p in folders)
    listed = git(logging, 'ls-tree', '-r', '--name-only', tag, folder).split('\n')
    names = [p[len(folder):] for p in listed if re.fullmatch(r'rcps_\w+\.json', p[len(folder):])]
    stored = 0
    for name in names:
        text = git(logging, 'show', f'{tag}:{folder}{name}')
        target = os.path.join(rules, f'training_{version}', name)
        if version == '1.1.0' or os.path.exists(target) and '"note": "RCP table' in open(target).read():
            continue
        if resolved(rules, bases.get(version, ''), name, bases) == text:
            if os.path.exists(target):
                os.remove(target)
            continue
        with open(target, 'w') as f:
            f.write(text)
        stored += 1
    return names, stored


def main():
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument('--logging', required=True, help='git dir of mlcommons/logging')
    parser.add_argument('--rules', default=os.path.join(os.path.dirname(__file__), '..', 'rules'))
    args = parser.parse_args()
    previous, previous_version = {}, ''
    bases = {}
    for version, tag in ROUNDS:
        bases[version] = previous_version
        folder = round_folder(args.logging, tag, version)
        files = round_files(args.logging, tag, folder)
        out = os.path.join(args.rules, f'training_{version}', 'checker')
        shutil.rmtree(out, ignore_errors=True)
        os.makedirs(out)
        changed = [name for name, text in files.items()
                   if normalized(text, version) != previous.get(name)]
        for name in changed:
            with open(os.path.join(out, name), 'w') as f:
                f.write(files[name])
        manifest = {'round': version, 'base': previous_version,
                    'source': f'mlcommons/logging {tag} ({git(args.logging, "rev-parse", tag).strip()}), '
                              f'{folder}',
                    'engine': {'submission_keys_once': True, 'weights_initialization_warnings': False,
                               **ENGINE.get(version, {})},
                    'files': sorted(files)}
        with open(os.path.join(out, 'checker.json'), 'w') as f:
            json.dump(manifest, f, indent=2)
            f.write('\n')
        tables, stored = import_rcp_tables(args.logging, args.rules, version, tag, bases)
        print(f'{version}: {len(files)} files, {len(changed)} stored; {len(tables)} RCP tables, {stored} stored')
        previous = {name: normalized(text, version) for name, text in files.items()}
        previous_version = version


if __name__ == '__main__':
    main()
