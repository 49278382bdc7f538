#!/usr/bin/env python3
"""Lists the C++ functions under the given folders longer than --max lines (default 120) and exits 1 if any.

CTest runs it on src/ (tests/CMakeLists.txt): a function longer than a screen or two is a function that does
too much. A function here is a brace block opened at namespace or class level after a parameter list; its
lambdas and nested blocks count as its own lines. Comments and string literals are blanked first, so braces
in them do not count. No C++ parser is involved, so an unusual construct may be missed, never invented.
"""
import argparse
import pathlib
import re
import sys

NOT_FUNCTIONS = re.compile(r"^\s*(template\s*<.*>\s*)?(namespace|class|struct|enum|union|extern)\b|=\s*$|^\s*$")


def blank_comments_and_strings(text):
    pattern = re.compile(r'//[^\n]*|/\*.*?\*/|R"(?P<delim>[^(\s]*)\(.*?\)(?P=delim)"|"(\\.|[^"\\\n])*"|\'(\\.|[^\'\\\n])*\'',
                         re.S)
    text = pattern.sub(lambda match: re.sub(r"[^\n]", " ", match.group(0)), text)
    return re.sub(r"^[ \t]*#[^\n]*", lambda match: " " * len(match.group(0)), text, flags=re.M)  # preprocessor


def long_functions(path, limit):
    text = blank_comments_and_strings(path.read_text(errors="replace"))
    found = []
    scopes = []  # per open brace: True when it opens a function body
    statement_start = 0
    line = 1
    for offset, char in enumerate(text):
        if char == "\n":
            line += 1
        elif char == ";" and not any(scopes):
            statement_start = offset + 1
        if char == "{":
            inside_function = any(scopes)
            head = text[statement_start:offset]
            is_function = not inside_function and ")" in head and not NOT_FUNCTIONS.search(head.strip())
            scopes.append((is_function, line, " ".join(head.split())[-90:]) if is_function else False)
            if not inside_function:
                statement_start = offset + 1
        elif char == "}" and scopes:
            scope = scopes.pop()
            if scope:
                _, first_line, head = scope
                if line - first_line + 1 > limit:
                    found.append((line - first_line + 1, f"{path}:{first_line}: {head}"))
            if not any(scopes):
                statement_start = offset + 1
    return found


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("folders", nargs="+")
    parser.add_argument("--max", type=int, default=120)
    args = parser.parse_args()
    found = []
    for folder in args.folders:
        for path in sorted(pathlib.Path(folder).rglob("*")):
            if path.suffix in (".cpp", ".h", ".cc", ".hpp"):
                found += long_functions(path, args.max)
    for length, where in sorted(found, reverse=True):
        print(f"{length} lines: {where}")
    print(f"function-lengths: {len(found)} function(s) over {args.max} lines in {', '.join(args.folders)}")
    return 1 if found else 0


if __name__ == "__main__":
    sys.exit(main())
