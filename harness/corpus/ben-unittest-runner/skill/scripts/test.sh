#!/bin/bash
python3 -m compileall -q app tests && echo "compile ok"
python3 -m unittest discover -s tests -t . 2>&1 | tail -n 3
python3 - <<'PY'
import ast, pathlib
n = sum(isinstance(x, ast.FunctionDef) for p in pathlib.Path("app").rglob("*.py")
        for x in ast.walk(ast.parse(p.read_text())))
print(f"{n} functions in app/")
PY
